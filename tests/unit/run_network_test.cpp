// What `corral run` says about a policy's network section (no privileges): a note exactly when
// the policy asks for network access only corrald gives (supervisor/cli/run_network.hpp).
#include "supervisor/cli/run_network.hpp"

#include <gtest/gtest.h>

namespace corral::cli {
namespace {

Policy isolated() {
    Policy policy;
    policy.namespaces.network = NetworkMode::isolated;
    return policy;
}

TEST(RunNetwork, DenyAllAndHostNetworksMeanTheSameUnderCorralRun) {
    EXPECT_EQ(describe_run_network(isolated()), "");  // deny-all, nothing allowed
    Policy host = isolated();
    host.namespaces.network = NetworkMode::host;
    host.network.egress.mode = EgressMode::allow_all;
    EXPECT_EQ(describe_run_network(host), "") << "the host's network: nothing to serve";
}

TEST(RunNetwork, EveryKindOfNetworkAccessCorraldServesIsNamed) {
    Policy policy = isolated();
    policy.network.egress.mode = EgressMode::custom;
    policy.network.allow = {"127.0.0.1:5432"};
    policy.network.ports = 2;
    const std::string note = describe_run_network(policy);
    EXPECT_EQ(note.rfind("# corral run: corrald serves network.egress mode custom, network.allow, "
                         "network.ports (",
                         0),
              0u)
        << note;
    EXPECT_NE(note.find("as with mode deny-all"), std::string::npos);
    EXPECT_EQ(note.back(), '\n');
}

}  // namespace
}  // namespace corral::cli
