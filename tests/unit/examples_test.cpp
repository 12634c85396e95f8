// The example policies in examples/policies/ are documentation users copy: each must parse, and
// each must say what its comments claim.

#include <gtest/gtest.h>

#include <filesystem>

#include "policies/policy_parser.hpp"
#include "policies/presets.hpp"
#include "policies/syscall_groups.hpp"

namespace corral {
namespace {

namespace fs = std::filesystem;

const fs::path kExamples = fs::path(CORRAL_SOURCE_DIR) / "examples" / "policies";

Policy load_example(const std::string& file) {
    PolicyParseResult result = parse_policy_file((kExamples / file).string());
    EXPECT_TRUE(result.ok()) << result.format_errors();
    return result.policy.value_or(Policy{});
}

TEST(ExamplePolicies, EveryFileParsesAndRoundTrips) {
    int count = 0;
    for (const auto& entry : fs::directory_iterator(kExamples)) {
        if (entry.path().extension() != ".yaml") continue;
        SCOPED_TRACE(entry.path().string());
        ++count;
        PolicyParseResult result = parse_policy_file(entry.path().string());
        ASSERT_TRUE(result.ok()) << result.format_errors();
        EXPECT_EQ(result.policy->name, entry.path().stem().string());
        PolicyParseResult again = parse_policy(policy_to_yaml(*result.policy), "<roundtrip>");
        ASSERT_TRUE(again.ok()) << again.format_errors();
        again.policy->extends_chain = result.policy->extends_chain;
        EXPECT_EQ(*again.policy, *result.policy);
    }
    EXPECT_GE(count, 3);
}

// A typo in an @group passes the parser (syntax only) but would fail at session start.
TEST(ExamplePolicies, SyscallGroupsInExamplesAndPresetsExist) {
    std::vector<Policy> policies;
    for (const auto& entry : fs::directory_iterator(kExamples)) {
        if (entry.path().extension() == ".yaml")
            policies.push_back(load_example(entry.path().filename()));
    }
    for (const auto& name : preset_names()) policies.push_back(load_policy(name).policy.value());
    for (const Policy& policy : policies) {
        SCOPED_TRACE(policy.name);
        for (const auto* list : {&policy.seccomp.deny, &policy.seccomp.allow}) {
            auto expanded = expand_syscalls(*list);
            EXPECT_TRUE(expanded.ok()) << (expanded.ok() ? "" : expanded.error().describe());
        }
    }
}

TEST(ExamplePolicies, CiJobIsStrictWithRoomToBuild) {
    Policy ci = load_example("ci-job.yaml");
    EXPECT_EQ(ci.extends_chain, (std::vector<std::string>{"strict", "default"}));
    EXPECT_EQ(ci.seccomp.preset, "strict");
    EXPECT_EQ(ci.user.uid, 65534u);
    EXPECT_TRUE(ci.namespaces.user);  // nobody inside a leased range, not the host's nobody
    EXPECT_EQ(ci.enforcement, Enforcement::strict);
    EXPECT_EQ(ci.namespaces.network, NetworkMode::isolated);
    EXPECT_EQ(ci.limits.memory, 4ull << 30);
    EXPECT_TRUE(ci.timeouts.command && ci.timeouts.session && ci.timeouts.idle);
    EXPECT_TRUE(ci.env.clear);
    EXPECT_TRUE(ci.env.set.count("PATH"));
    // Issue 10.8: the 4Gi workspace is a tmpfs copy of the checkout, not the host's disk.
    EXPECT_EQ(ci.workdir.from, WorkdirFrom::copy);
    EXPECT_EQ(ci.workdir.size, 4ull << 30);
    EXPECT_EQ(ci.workdir.mount, "/workspace");
}

TEST(ExamplePolicies, AiAgentHasPortsEgressAllowListAndLandlock) {
    Policy agent = load_example("ai-agent.yaml");
    EXPECT_GT(agent.network.ports, 0u);
    EXPECT_FALSE(agent.network.allow.empty());
    EXPECT_EQ(agent.network.egress.mode, EgressMode::custom);
    EXPECT_FALSE(agent.network.egress.allowed_hosts.empty());
    EXPECT_EQ(agent.namespaces.network, NetworkMode::isolated);
    EXPECT_TRUE(agent.landlock.enabled());
    EXPECT_FALSE(agent.user.inherit);
    EXPECT_TRUE(agent.namespaces.user);
    EXPECT_TRUE(agent.workdir.size.has_value());
}

TEST(ExamplePolicies, LocalTestingKeepsHostNetwork) {
    Policy local = load_example("local-testing.yaml");
    EXPECT_EQ(local.namespaces.network, NetworkMode::host);
    EXPECT_TRUE(local.user.inherit);
    EXPECT_TRUE(local.namespaces.user);  // issue 10: never the host's root
    EXPECT_TRUE(local.namespaces.mount);  // so /home can be hidden while the cwd stays writable
    EXPECT_EQ(local.enforcement, Enforcement::best_effort);
}

}  // namespace
}  // namespace corral
