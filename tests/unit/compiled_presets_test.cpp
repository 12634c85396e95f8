#include "policies/compiled/compiled_presets.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
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

// corrald's named policies (load_named_policy_compiled): a preset comes compiled and equals what
// the parser makes of it through the same path, while a policy-dir file of a preset's name still
// wins over the preset, and a path is still refused (issue 10.2).
TEST(CompiledPresets, NamedPoliciesTakeThePolicyDirFirstThenTheCompiledPreset) {
    const std::string dir = ::testing::TempDir() + "corral-compiled-named-" +
                            std::to_string(::getpid());
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/strict.yaml") << "extends: none\nlimits: { pids: 5 }\n";
    for (const auto& name : preset_names()) {
        SCOPED_TRACE(name);
        PolicyParseResult parsed = load_named_policy(name, "");
        ASSERT_TRUE(parsed.ok()) << parsed.format_errors();
        PolicyParseResult compiled = load_named_policy_compiled(name, "");
        ASSERT_TRUE(compiled.ok()) << compiled.format_errors();
        EXPECT_TRUE(*compiled.policy == *parsed.policy);
    }
    PolicyParseResult overridden = load_named_policy_compiled("strict", dir);
    ASSERT_TRUE(overridden.ok()) << overridden.format_errors();
    EXPECT_EQ(overridden.policy->limits.pids, 5u) << "the policy dir's strict.yaml wins";
    EXPECT_EQ(load_named_policy_compiled("../strict", dir).diagnostics.size(), 1u);
    // What corrald takes on its loop: only a preset no file of the dir shadows.
    EXPECT_FALSE(unshadowed_compiled_preset("strict", dir).has_value());
    EXPECT_FALSE(unshadowed_compiled_preset("../strict", dir).has_value());
    EXPECT_FALSE(unshadowed_compiled_preset("no-such-preset", dir).has_value());
    std::optional<Policy> unshadowed = unshadowed_compiled_preset("default", dir);
    ASSERT_TRUE(unshadowed.has_value());
    EXPECT_TRUE(*unshadowed == *load_named_policy_compiled("default", dir).policy);
    std::filesystem::remove_all(dir);
}

// Compiled entries are used only for the very texts they were compiled from: a generated file
// older than the presets (a stale build) must lose to the text, never stand in for it. The texts
// of every preset count, not only the asked one's: strict extends default, so a changed default
// changes what strict resolves to (review of issue 18's compiled presets).
TEST(CompiledPresets, EntriesOfOtherTextsAreNotUsed) {
    const std::vector<PresetText> embedded = embedded_preset_texts();
    const uint64_t hash = preset_set_hash(embedded);
    // What the compiler computed (embed_presets.cmake) is what the texts hash to at run time.
    EXPECT_EQ(embedded_presets_hash(), hash);
    EXPECT_TRUE(compiled_preset_from("default", hash).has_value());
    EXPECT_TRUE(compiled_preset_from("strict", hash).has_value());
    EXPECT_FALSE(compiled_preset_from("no-such-preset", hash).has_value());

    for (size_t i = 0; i < embedded.size(); ++i) {
        SCOPED_TRACE(embedded[i].name);
        std::vector<PresetText> changed = embedded;
        const std::string longer = std::string(embedded[i].text) + "\n# one more line\n";
        changed[i].text = longer;
        const uint64_t other = preset_set_hash(changed);
        for (const auto& preset : embedded)
            EXPECT_FALSE(compiled_preset_from(preset.name, other).has_value()) << preset.name;
    }
    // Where one text ends and the next begins is part of what is hashed.
    EXPECT_NE(preset_set_hash({{"default", "ab"}, {"strict", "c"}}),
              preset_set_hash({{"default", "a"}, {"strict", "bc"}}));
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
