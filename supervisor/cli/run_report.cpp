#include "supervisor/cli/run_report.hpp"

namespace corral::cli {

int RunReport::process_exit_code() const {
    if (status == ExitReason::setup_failed) return 125;
    if (status == ExitReason::timeout) return 124;
    if (exit_code) return *exit_code;
    if (signal) return 128 + *signal;
    return 125;
}

nlohmann::json to_json(const ResourceUsage& usage) {
    nlohmann::json out = {
        {"cpuUserUsec", usage.cpu_user_usec},
        {"cpuSystemUsec", usage.cpu_system_usec},
        {"cpuTotalUsec", usage.cpu_total_usec},
        {"oomKills", usage.oom_kills},
        {"pidsLimitHits", usage.pids_limit_hits},
    };
    auto put = [&](const char* key, const std::optional<uint64_t>& value) {
        out[key] = value ? nlohmann::json(*value) : nlohmann::json(nullptr);
    };
    put("memoryCurrentBytes", usage.memory_current);
    put("memoryPeakBytes", usage.memory_peak);
    put("pidsCurrent", usage.pids_current);
    put("pidsPeak", usage.pids_peak);
    put("ioReadBytes", usage.io_read_bytes);
    put("ioWriteBytes", usage.io_write_bytes);
    return out;
}

nlohmann::json to_json(const RunReport& report) {
    nlohmann::json out = {
        {"status", std::string(to_string(report.status))},
        {"exitCode", report.exit_code ? nlohmann::json(*report.exit_code) : nlohmann::json(nullptr)},
        {"signal", report.signal ? nlohmann::json(*report.signal) : nlohmann::json(nullptr)},
        {"durationMs", report.duration_ms},
        {"usage", to_json(report.usage)},
        {"leftBehind", report.left_behind},
        {"policy", report.policy},
    };
    if (!report.error.empty()) out["error"] = report.error;
    if (!report.not_enforced.empty()) out["notEnforced"] = report.not_enforced;
    return out;
}

}  // namespace corral::cli
