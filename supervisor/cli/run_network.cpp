#include "supervisor/cli/run_network.hpp"

namespace corral::cli {

std::string describe_run_network(const Policy& policy) {
    if (policy.namespaces.network != NetworkMode::isolated) return {};
    const NetworkSpec& network = policy.network;
    std::string asked;
    if (network.egress.mode == EgressMode::allow_all) asked = "network.egress mode allow-all";
    if (network.egress.mode == EgressMode::custom) asked = "network.egress mode custom";
    if (!network.allow.empty()) asked += (asked.empty() ? "" : ", ") + std::string("network.allow");
    if (network.ports != 0) asked += (asked.empty() ? "" : ", ") + std::string("network.ports");
    if (asked.empty()) return {};
    return "# corral run: corrald serves " + asked +
           " (its proxy, relay and DNS), corral run does not: this run reaches nothing outside "
           "its network namespace, as with mode deny-all; run it in a corrald session for "
           "egress.\n";
}

}  // namespace corral::cli
