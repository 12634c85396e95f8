#pragma once
// Where `corral run`'s command works: the job's directory (the current one, or --cwd DIR) and
// what the policy's workdir keys make of it.
//
//   workdir.from: cwd   (default) the job directory is bound writable at its own path and the
//                       command starts there; what it writes lands in the directory. A size
//                       cannot apply to a bound directory, so workdir.size is refused here.
//   workdir.from: copy  the job directory is copied into a fresh tmpfs of workdir.size mounted at
//                       workdir.mount; the command starts there and cannot touch the original
//                       (it stays as read-only as the policy makes the host). When it ends, the
//                       paths in workdir.outputs are copied back; the rest goes with the tmpfs.
//
// The job directory `/` is never bound (it would make the whole host writable) nor copied.

#include <optional>
#include <string>

#include "base/error.hpp"
#include "policies/policy.hpp"

namespace corral::cli {

/// The job's directory as a canonical host path: `given` (relative paths against the current
/// directory) or the current directory. Errors name what was given.
Result<std::string> resolve_job_directory(const std::optional<std::string>& given);

/// What `corral run` does with the job directory under a policy.
struct RunWorkdirPlan {
    std::string job_dir;  ///< canonical host path
    WorkdirFrom from = WorkdirFrom::cwd;
    std::string command_cwd;         ///< where the command starts, in the sandbox's view
    bool bind_job_dir = false;       ///< from cwd: bind job_dir writable at its own path
    std::vector<std::string> notes;  ///< said on stderr before the run (what will not work)
};

/// The plan for `policy` and `job_dir`; errors name the policy key that cannot be honoured.
Result<RunWorkdirPlan> plan_run_workdir(const Policy& policy, const std::string& job_dir);

/// Host uid and gid whose permissions the sandbox's writes are checked against, and whether it
/// writes with capabilities that bypass them (CAP_DAC_OVERRIDE kept or inherited).
struct SandboxWriter {
    uid_t uid = 0;
    gid_t gid = 0;
    std::vector<gid_t> groups;
    bool overrides_permissions = false;
};
/// The writer for `policy` when `corral run` is started by the current process.
SandboxWriter sandbox_writer(const Policy& policy);

/// Where `corral run` runs the command and what it can write, as `#` comment lines (for
/// `corral policy check`), and what a daemon session gets.
std::string describe_run_workdir(const Policy& policy);

}  // namespace corral::cli
