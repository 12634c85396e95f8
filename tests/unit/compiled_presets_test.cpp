#include "policies/compiled/compiled_presets.hpp"

#include <gtest/gtest.h>

#include <string>

#include "policies/policy_parser.hpp"
#include "policies/presets.hpp"

namespace corral {
namespace {

// What `corral run --policy NAME` gets without parsing must be exactly what the parser makes of
// the preset's text (Policy's operator== compares every field).
TEST(CompiledPresets, EveryPresetIsCompiledAndEqualsWhatTheParserMakesOfIt) {
    ASSERT_FALSE(preset_names().empty());
    for (const auto& name : preset_names()) {
        SCOPED_TRACE(name);
        PolicyParseResult parsed = load_policy(name);
        ASSERT_TRUE(parsed.ok()) << parsed.format_errors();
        std::optional<Policy> compiled = compiled_preset(name);
        ASSERT_TRUE(compiled.has_value()) << "no compiled form, or not of this binary's text";
        EXPECT_TRUE(*compiled == *parsed.policy);
        EXPECT_EQ(policy_to_yaml(*compiled), policy_to_yaml(*parsed.policy));

        PolicyParseResult loaded = load_policy_compiled(name);
        ASSERT_TRUE(loaded.ok());
        EXPECT_TRUE(*loaded.policy == *parsed.policy);
    }
}

// A compiled entry is used only for the very text it was compiled from: a generated file older
// than the preset (a stale build) must lose to the text, never stand in for it.
TEST(CompiledPresets, AnEntryOfAnotherTextIsNotUsed) {
    const std::string text(*preset_yaml("default"));
    EXPECT_TRUE(compiled_preset_from("default", text).has_value());
    EXPECT_FALSE(compiled_preset_from("default", text + "\n# one more line\n").has_value());
    EXPECT_FALSE(compiled_preset_from("default", *preset_yaml("strict")).has_value());
    EXPECT_FALSE(compiled_preset_from("no-such-preset", text).has_value());
}

// Names that are not presets take load_policy's path, with its answers: a file is parsed (and
// one that does not exist says so), an unknown name gets load_policy's diagnostic.
TEST(CompiledPresets, AnythingButAPresetNameIsLoadedByTheParser) {
    PolicyParseResult unknown = load_policy_compiled("no-such-preset");
    EXPECT_FALSE(unknown.ok());
    EXPECT_EQ(unknown.format_errors(), load_policy("no-such-preset").format_errors());

    PolicyParseResult file = load_policy_compiled("./no-such-corral-test-policy.yaml");
    EXPECT_FALSE(file.ok());  // there is no such file in the test's directory
    EXPECT_EQ(file.format_errors(),
              load_policy("./no-such-corral-test-policy.yaml").format_errors());
}

}  // namespace
}  // namespace corral
