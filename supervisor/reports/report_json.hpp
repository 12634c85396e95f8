#pragma once
// JSON for the reports that both the command line and the daemon show (camelCase, as the API),
// so `corral doctor` and GET /v1/health, `corral run --report` and process records agree.

#include <nlohmann/json.hpp>
#include <optional>

#include "isolation/cgroup.hpp"
#include "isolation/host_probe.hpp"
#include "isolation/seccomp_listener.hpp"

namespace corral {

/// cpuUserUsec, cpuSystemUsec, cpuTotalUsec, memory/pids/io values (null when not measured on
/// this host), oomKills, pidsLimitHits.
nlohmann::json usage_to_json(const ResourceUsage& usage);
/// `signal` as every record and report writes it: the name ("SIGKILL"), null when none.
nlohmann::json signal_to_json(std::optional<int> signal);

/// What a process's seccomp filter refused: null without a filter, else {counted, refused:
/// {name: n}, refusedTotal, logged: {name: n}, loggedTotal} (the maps and totals null when not
/// counted). docs/SECCOMP.md "Refusals in reports".
nlohmann::json refusals_to_json(const std::optional<RefusalCounts>& counts);

/// The host probe: cgroups (mode, mounts, kill, clone-into-cgroup, limits), namespaces,
/// seccomp, landlockAbi, openat2.
nlohmann::json host_probe_to_json(const HostProbe& probe);

}  // namespace corral
