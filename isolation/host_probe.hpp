#pragma once
// What this host can enforce, found by probing (never assumed): for `corral doctor` and the
// daemon's /v1/health. Probing forks short-lived children (namespaces) and creates and removes a
// probe cgroup, so call it once at start-up, before any thread exists, and keep the result.

#include <optional>
#include <string>
#include <vector>

#include "isolation/cgroup.hpp"
#include "isolation/cgroup_placement.hpp"
#include "isolation/limits.hpp"

namespace corral {

/// Whether one namespace type can be created here.
struct NamespaceSupport {
    std::string name;   ///< "pid", "mount", "ipc", "uts", "network", "user", "cgroup"
    bool available = false;
    std::string error;  ///< errno name when not available
};

/// The result of probe_host().
struct HostProbe {
    std::optional<CgroupHost> cgroups;  ///< nullopt when discovery failed (see cgroup_error)
    std::string cgroup_error;
    bool cgroup_kill = false;           ///< cgroup.kill exists (else freeze fallback)
    bool clone_into_cgroup = false;     ///< clone3 CLONE_INTO_CGROUP works (else attach fallback)
    std::string limit_backend;          ///< "unified" or "hybrid-v1"
    /// Where corral builds its cgroups on this host (cgroups->v2_own is already its base).
    CgroupPlan placement;
    /// Unified hosts: the controllers really enabled below a probe cgroup in the base, or why
    /// they could not be (then no v2 limit is claimed). Empty on hybrid hosts.
    std::vector<std::string> controllers_enabled;
    std::string controller_probe_error;
    LimitSupport limits;
    std::vector<NamespaceSupport> namespaces;
    bool seccomp = false;
    int landlock_abi = 0;               ///< 0 = no Landlock
    bool openat2 = false;
};

/// Probes everything above. Cgroup placement is carried out for real (place_cgroups with
/// `placement`: a systemd scope may be requested), so the result's `cgroups` can be handed to
/// the session manager as is.
HostProbe probe_host(const PlacementOptions& placement);

}  // namespace corral
