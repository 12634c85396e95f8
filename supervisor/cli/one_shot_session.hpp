#pragma once
// `corral run`'s session: one command, supervised to the end, with nothing left behind.
//
// Lifetime: (workdir.from copy: the tmpfs copy of the job directory) -> cgroup
// `<own>/corral-run-<pid>` (leaves `holder` for the namespace holder and `main` for the command) ->
// sandbox -> launch -> wait for the main process, forwarding our own stop signals and enforcing the
// timeout -> SIGTERM to what it left behind, grace, cgroup.kill -> usage -> copy workdir.outputs
// back -> remove the cgroups. Synchronous (poll on pidfd + signalfd): no event loop needed for one
// process.

#include <map>
#include <string>
#include <vector>

#include "policies/policy.hpp"
#include "supervisor/cli/run_report.hpp"
#include "supervisor/cli/run_workdir.hpp"

namespace corral::cli {

/// What to run, besides the policy.
struct OneShotRequest {
    std::vector<std::string> command;
    Millis timeout{0};                             ///< 0 = none
    RunWorkdirPlan workdir;                        ///< from plan_run_workdir()
    std::map<std::string, std::string> env_set;    ///< --env overrides, over the policy's env
    std::vector<std::string> env_unset;            ///< --env NAME the caller does not have
    bool measure_usage = true;  ///< false skips reading usage at the end (only --report shows it)
};

/// Runs the request under `policy` and returns how it ended. Never throws; setup failures come
/// back as status setup-failed with the message (and exit code 127/126 when execve failed).
RunReport run_one_shot(const Policy& policy, const OneShotRequest& request);

}  // namespace corral::cli
