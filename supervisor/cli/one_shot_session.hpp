#pragma once
// `corral run`'s session: one command, supervised to the end, with nothing left behind.
//
// Lifetime: cgroup `<own>/corral-run-<pid>` (leaves `holder` for the namespace holder and `main`
// for the command) -> sandbox -> launch -> wait for the main process, forwarding our own stop
// signals and enforcing the timeout -> SIGTERM to what it left behind, grace, cgroup.kill ->
// usage -> remove the cgroups. Synchronous (poll on pidfd + signalfd): no event loop needed for
// one process.

#include <string>
#include <vector>

#include "policies/policy.hpp"
#include "supervisor/cli/run_report.hpp"

namespace corral::cli {

/// Runs `command` under `policy` and returns how it ended. Never throws; setup failures come
/// back as status setup-failed with the message. `timeout` 0 = none. `cwd` is the command's
/// working directory inside the sandbox (empty: ours). `measure_usage` false skips reading the
/// cgroup usage files at the end (only the --report shows usage).
RunReport run_one_shot(const Policy& policy, const std::vector<std::string>& command,
                       Millis timeout, const std::string& cwd = "", bool measure_usage = true);

}  // namespace corral::cli
