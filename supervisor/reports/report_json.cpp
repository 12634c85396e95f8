#include "supervisor/reports/report_json.hpp"

#include <cstring>

namespace corral {
namespace {

nlohmann::json optional_number(const std::optional<uint64_t>& value) {
    return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

nlohmann::json cgroups_to_json(const HostProbe& probe) {
    nlohmann::json out = nlohmann::json::object();
    if (probe.cgroups) {
        const CgroupHost& host = *probe.cgroups;
        nlohmann::json v1 = nlohmann::json::object();
        for (const auto& [controller, dir] : host.v1_own) v1[controller] = dir;
        out["mode"] = host.layout == CgroupLayout::unified ? "unified" : "hybrid";
        out["v2Mount"] = host.v2_mount;
        out["v2Own"] = host.v2_own;
        out["v2Controllers"] = host.v2_controllers;
        out["v1"] = v1;
        out["cgroupKill"] = probe.cgroup_kill;
        out["cloneIntoCgroup"] = probe.clone_into_cgroup;
        out["placement"] = {{"mode", placement_mode_name(probe.placement.mode)},
                            {"reason", probe.placement.reason}};
        if (!host.v2_started_in.empty()) out["v2StartedIn"] = host.v2_started_in;
        if (host.layout == CgroupLayout::unified) {
            out["controllersEnabled"] = probe.controllers_enabled;
            if (!probe.controller_probe_error.empty())
                out["controllerProbeError"] = probe.controller_probe_error;
        }
        nlohmann::json limits = {{"backend", probe.limit_backend}};
        for (const auto& [kind, capability] : probe.limits.kinds)
            limits[limit_name(kind)] = {{"enforceable", capability.enforceable},
                                        {"detail", capability.detail}};
        out["limits"] = limits;
    }
    if (!probe.cgroup_error.empty()) out["error"] = probe.cgroup_error;
    return out;
}

}  // namespace

nlohmann::json usage_to_json(const ResourceUsage& usage) {
    return {
        {"cpuUserUsec", usage.cpu_user_usec},
        {"cpuSystemUsec", usage.cpu_system_usec},
        {"cpuTotalUsec", usage.cpu_total_usec},
        {"memoryCurrentBytes", optional_number(usage.memory_current)},
        {"memoryPeakBytes", optional_number(usage.memory_peak)},
        {"pidsCurrent", optional_number(usage.pids_current)},
        {"pidsPeak", optional_number(usage.pids_peak)},
        {"ioReadBytes", optional_number(usage.io_read_bytes)},
        {"ioWriteBytes", optional_number(usage.io_write_bytes)},
        {"oomKills", usage.oom_kills},
        {"pidsLimitHits", usage.pids_limit_hits},
    };
}

nlohmann::json host_probe_to_json(const HostProbe& probe) {
    nlohmann::json namespaces = nlohmann::json::object();
    for (const auto& ns : probe.namespaces)
        namespaces[ns.name] =
            ns.available ? nlohmann::json(true) : nlohmann::json("no: " + ns.error);
    return {
        {"cgroups", cgroups_to_json(probe)},
        {"namespaces", namespaces},
        {"seccomp", probe.seccomp},
        {"landlockAbi", probe.landlock_abi},
        {"openat2", probe.openat2},
    };
}

nlohmann::json signal_to_json(std::optional<int> signal) {
    if (!signal) return nullptr;
    const char* abbrev = ::sigabbrev_np(*signal);
    return abbrev ? std::string("SIG") + abbrev : "SIG" + std::to_string(*signal);
}

}  // namespace corral

namespace corral {

nlohmann::json refusals_to_json(const std::optional<RefusalCounts>& counts) {
    if (!counts) return nullptr;
    if (!counts->counted) {
        return {{"counted", false}, {"refused", nullptr}, {"refusedTotal", nullptr},
                {"logged", nullptr}, {"loggedTotal", nullptr}};
    }
    return {{"counted", true},
            {"refused", nlohmann::json(counts->refused)},
            {"refusedTotal", counts->refused_total},
            {"logged", nlohmann::json(counts->logged)},
            {"loggedTotal", counts->logged_total}};
}

}  // namespace corral
