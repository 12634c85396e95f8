#include "supervisor/cli/run_report.hpp"

#include "supervisor/reports/report_json.hpp"

namespace corral::cli {

int RunReport::process_exit_code() const {
    // A setup failure carries an exit code only when execve failed (127/126, as a shell).
    if (status == ExitReason::setup_failed) return exit_code.value_or(125);
    if (status == ExitReason::timeout) return 124;
    if (exit_code) return *exit_code;
    if (signal) return 128 + *signal;
    return 125;
}

nlohmann::json to_json(const RunReport& report) {
    nlohmann::json out = {
        {"status", std::string(to_string(report.status))},
        {"exitCode",
         report.exit_code ? nlohmann::json(*report.exit_code) : nlohmann::json(nullptr)},
        {"signal", signal_to_json(report.signal)},
        {"durationMs", report.duration_ms},
        {"usage", usage_to_json(report.usage)},
        {"leftBehind", report.left_behind},
        {"policy", report.policy},
        {"seccomp", refusals_to_json(report.seccomp)},
    };
    if (!report.error.empty()) out["error"] = report.error;
    if (!report.not_enforced.empty()) out["notEnforced"] = report.not_enforced;
    if (report.outputs) {
        out["outputs"] = {{"copied", report.outputs->copied},
                          {"missing", report.outputs->missing},
                          {"skipped", report.outputs->skipped}};
        if (!report.outputs->error.empty()) out["outputs"]["error"] = report.outputs->error;
    }
    return out;
}

}  // namespace corral::cli
