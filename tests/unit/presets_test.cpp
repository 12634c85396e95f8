#include "policies/presets.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "policies/policy_parser.hpp"

namespace corral {
namespace {

Policy load_preset(const std::string& name) {
    PolicyParseResult result = load_policy(name);
    EXPECT_TRUE(result.ok()) << result.format_errors();
    return result.policy.value_or(Policy{});
}

TEST(Presets, ShipsNoneDefaultAndStrict) {
    auto names = preset_names();
    std::sort(names.begin(), names.end());
    EXPECT_EQ(names, (std::vector<std::string>{"default", "none", "strict"}));
    EXPECT_TRUE(preset_yaml("default").has_value());
    EXPECT_FALSE(preset_yaml("nonexistent").has_value());
}

TEST(Presets, EveryPresetParsesAndNamesItself) {
    for (const auto& name : preset_names()) {
        SCOPED_TRACE(name);
        Policy policy = load_preset(name);
        EXPECT_EQ(policy.name, name);
    }
}

TEST(Presets, EveryPresetRoundTripsThroughYaml) {
    for (const auto& name : preset_names()) {
        SCOPED_TRACE(name);
        Policy policy = load_preset(name);
        std::string yaml = policy_to_yaml(policy);
        PolicyParseResult again = parse_policy(yaml, "<roundtrip>");
        ASSERT_TRUE(again.ok()) << again.format_errors() << yaml;
        // extends_chain is provenance, not content: the emitted YAML is self-contained.
        EXPECT_TRUE(again.policy->extends_chain.empty());
        again.policy->extends_chain = policy.extends_chain;
        EXPECT_EQ(*again.policy, policy) << yaml;
    }
}

TEST(Presets, NoneOnlyTracksTheCgroup) {
    Policy none = load_preset("none");
    EXPECT_FALSE(none.namespaces.pid || none.namespaces.mount || none.namespaces.ipc ||
                 none.namespaces.uts || none.namespaces.user);
    EXPECT_EQ(none.namespaces.network, NetworkMode::host);
    EXPECT_EQ(none.seccomp.preset, "none");
    EXPECT_TRUE(none.capabilities.inherit);
    EXPECT_TRUE(none.user.inherit);
    EXPECT_FALSE(none.env.clear);
    EXPECT_TRUE(none.filesystem.read_only.empty() && none.filesystem.hidden.empty() &&
                none.filesystem.tmpfs.empty());
    EXPECT_FALSE(none.landlock.enabled());
}

TEST(Presets, DefaultIsolatesAndHidesHomes) {
    Policy policy = load_preset("default");
    EXPECT_TRUE(policy.namespaces.pid && policy.namespaces.mount && policy.namespaces.ipc &&
                policy.namespaces.uts);
    // Issue 10: never the host's root; a user namespace of its own (DESIGN.md "Identity").
    EXPECT_TRUE(policy.namespaces.user);
    EXPECT_TRUE(policy.user.inherit);
    EXPECT_EQ(policy.namespaces.network, NetworkMode::isolated);
    EXPECT_EQ(policy.filesystem.read_only, std::vector<std::string>{"/"});
    EXPECT_EQ(policy.filesystem.hidden, (std::vector<std::string>{"/home", "/root", "/run/user"}));
    EXPECT_EQ(policy.filesystem.tmpfs.at("/tmp"), 256ull << 20);
    EXPECT_EQ(policy.seccomp.preset, "default");
    EXPECT_EQ(policy.seccomp.action, SeccompAction::errno_code);
    EXPECT_EQ(policy.seccomp.errno_value, EPERM);
    EXPECT_FALSE(policy.capabilities.inherit);
    EXPECT_TRUE(policy.capabilities.keep.empty());
    EXPECT_TRUE(policy.user.inherit);
    EXPECT_TRUE(policy.env.clear);
    EXPECT_TRUE(policy.env.set.count("PATH"));
    EXPECT_EQ(policy.limits.output, 16ull << 20);
    EXPECT_EQ(policy.limits.core, 0u);
    EXPECT_EQ(policy.timeouts.grace, Millis(5000));
    EXPECT_TRUE(policy.extends_chain.empty());
}

TEST(Presets, StrictTightensDefault) {
    Policy strict = load_preset("strict");
    Policy base = load_preset("default");
    EXPECT_EQ(strict.extends_chain, std::vector<std::string>{"default"});
    EXPECT_EQ(strict.seccomp.preset, "strict");
    EXPECT_FALSE(strict.user.inherit);
    EXPECT_EQ(strict.user.uid, 65534u);
    EXPECT_EQ(strict.user.gid, 65534u);
    EXPECT_EQ(strict.limits.memory, 1ull << 30);
    EXPECT_EQ(strict.limits.pids, 256u);
    EXPECT_EQ(strict.limits.open_files, 1024u);
    EXPECT_EQ(strict.timeouts.command, std::chrono::minutes(10));
    EXPECT_EQ(strict.timeouts.session, std::chrono::hours(1));
    EXPECT_EQ(strict.timeouts.idle, std::chrono::minutes(15));
    EXPECT_EQ(strict.enforcement, Enforcement::strict);
    for (const auto& hidden : base.filesystem.hidden) {
        EXPECT_NE(
            std::find(strict.filesystem.hidden.begin(), strict.filesystem.hidden.end(), hidden),
            strict.filesystem.hidden.end())
            << hidden << " hidden by default must stay hidden in strict";
    }
    // Inherited unchanged from default.
    EXPECT_EQ(strict.namespaces, base.namespaces);
    EXPECT_EQ(strict.env, base.env);
    EXPECT_EQ(strict.filesystem.tmpfs, base.filesystem.tmpfs);
    EXPECT_EQ(strict.limits.core, 0u);
}

}  // namespace
}  // namespace corral
