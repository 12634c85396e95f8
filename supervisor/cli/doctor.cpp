#include "supervisor/cli/doctor.hpp"

#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "isolation/host_probe.hpp"
#include "isolation/id_range.hpp"
#include "isolation/sandbox.hpp"
#include "isolation/systemd_scope.hpp"
#include "supervisor/reports/report_json.hpp"

namespace corral::cli {
namespace {

const char* yes_no(bool value) { return value ? "yes" : "no"; }

void print_cgroups(const HostProbe& probe) {
    if (probe.cgroups) {
        const CgroupHost& host = *probe.cgroups;
        std::printf("cgroups        %s, cgroup2 at %s\n",
                    host.layout == CgroupLayout::unified ? "unified" : "hybrid",
                    host.v2_mount.c_str());
        std::printf("  own cgroup   %s\n", host.v2_own.c_str());
        if (!host.v2_started_in.empty())
            std::printf("  started in   %s\n", host.v2_started_in.c_str());
        std::printf("  cgroup.kill  %s\n", probe.cgroup_kill ? "yes" : "no (freeze fallback)");
        std::printf("  clone3 CLONE_INTO_CGROUP  %s\n",
                    probe.clone_into_cgroup ? "yes" : "no (attach fallback)");
        std::printf("  placement    %s: %s\n", placement_mode_name(probe.placement.mode),
                    probe.placement.reason.c_str());
        if (host.layout == CgroupLayout::unified) {
            std::string enabled;
            for (const auto& name : probe.controllers_enabled) enabled += " " + name;
            if (probe.controller_probe_error.empty())
                std::printf("  controllers  enabled in a probe cgroup below %s:%s\n",
                            host.v2_own.c_str(), enabled.c_str());
            else
                std::printf("  controllers  NOT enabled: %s\n",
                            probe.controller_probe_error.c_str());
        }
        std::printf("  limits via   %s\n", probe.limit_backend.c_str());
        for (const auto& [kind, capability] : probe.limits.kinds)
            std::printf("    %-10s %s  %s\n", limit_name(kind),
                        capability.enforceable ? "yes" : "NO ", capability.detail.c_str());
    }
    if (!probe.cgroup_error.empty()) std::printf("  problem: %s\n", probe.cgroup_error.c_str());
}

/// Who a `default` sandbox is on this host (DESIGN.md "Identity", issue 10).
void print_identity() {
    std::printf("identity       ");
    if (::geteuid() == 0) {
        std::printf("uid 0 inside (strict: 65534) = host ids 0x%x + 65536*N, one range per session "
                    "(%u slots, locks in %s); never the host's root\n",
                    kIdRangeFirst, kIdRangeSlots, kIdRangeLockDir);
    } else {
        std::printf("uid 0 inside = your uid %u on the host\n", ::geteuid());
    }
    auto idmap = probe_idmapped_mount(".");
    std::printf("  idmapped cwd %s\n",
                idmap ? "yes: files written in the bound cwd belong to its owner"
                      : ("NO (" + idmap.error().describe() +
                         "): the sandbox writes only where its own ids may")
                            .c_str());
}

void print_text(const HostProbe& probe) {
    std::printf("corral %s doctor\n\n", CORRAL_VERSION);
    print_cgroups(probe);
    std::printf("namespaces\n");
    for (const auto& ns : probe.namespaces)
        std::printf("  %-8s %s%s\n", ns.name.c_str(), yes_no(ns.available),
                    ns.available ? "" : (": " + ns.error).c_str());
    std::printf("seccomp        %s\n", probe.seccomp ? "yes (filter mode)" : "no");
    if (probe.landlock_abi > 0) std::printf("landlock       ABI %d\n", probe.landlock_abi);
    else std::printf("landlock       no\n");
    std::printf("openat2        %s\n", yes_no(probe.openat2));
    print_identity();
}

}  // namespace

int doctor_command(bool as_json) {
    // Placed as corrald would be (it steps out of its own cgroup), by really doing it: a scope
    // from systemd, the root below which corral would build, and controllers really enabled.
    const HostProbe probe = probe_host(PlacementOptions{true, "corral-doctor", scope_requester()});
    if (as_json) {
        auto json = host_probe_to_json(probe);
        json["version"] = CORRAL_VERSION;
        auto idmap = probe_idmapped_mount(".");
        json["identity"] = {{"hostRoot", ::geteuid() == 0},
                            {"rangeFirst", kIdRangeFirst},
                            {"rangeSize", kIdRangeSize},
                            {"rangeSlots", kIdRangeSlots},
                            {"idmappedCwd", static_cast<bool>(idmap)}};
        std::cout << json.dump(2) << "\n";
    } else {
        print_text(probe);
    }
    return probe.cgroups ? 0 : 1;
}

}  // namespace corral::cli
