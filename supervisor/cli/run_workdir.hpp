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

#include <memory>
#include <optional>
#include <string>

#include "base/error.hpp"
#include "base/unique_fd.hpp"
#include "policies/policy.hpp"

namespace corral::cli {

/// The job's directory, resolved once. The job runs as root's guest in it (bound writable, or
/// copied and its outputs copied back as root), so after resolve_job_directory() nothing
/// resolves its path again: every later use goes through `fd` (fstat, openat, open_tree on the
/// fd), and `path` only names it in messages and says where the sandbox sees it. A job that
/// swaps a component of the path for a symlink while it runs (CVE-2018-15664, the `docker cp`
/// symlink-exchange race; CVE-2021-30465, runc's mount-target swap) changes nothing corral does.
struct JobDirectory {
    std::string path;                    ///< canonical host path, as it was when resolved
    std::shared_ptr<const UniqueFd> fd;  ///< O_PATH|O_DIRECTORY of the directory itself
    int get() const { return fd ? fd->get() : -1; }
};

/// The job's directory: `given` (relative paths against the current directory, walked without
/// following symlinks) or the current directory itself. Errors name what was given.
Result<JobDirectory> resolve_job_directory(const std::optional<std::string>& given);

/// What `corral run` does with the job directory under a policy.
struct RunWorkdirPlan {
    std::string job_dir;  ///< canonical host path (messages, the sandbox's view)
    JobDirectory job;     ///< the directory itself, for everything that touches it
    WorkdirFrom from = WorkdirFrom::cwd;
    std::string command_cwd;         ///< where the command starts, in the sandbox's view
    bool bind_job_dir = false;       ///< from cwd: bind job_dir writable at its own path
    std::vector<std::string> notes;  ///< said on stderr before the run (what will not work)
};

/// The plan for `policy` and `job`; errors name the policy key that cannot be honoured.
Result<RunWorkdirPlan> plan_run_workdir(const Policy& policy, const JobDirectory& job);

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
