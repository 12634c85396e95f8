#include "supervisor/cli/run_workdir.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdlib>

#include "base/path_walk.hpp"
#include "base/unique_fd.hpp"
#include "policies/units.hpp"

namespace corral::cli {
namespace {

std::string octal_mode(mode_t mode) {
    char text[8];
    std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
    return text;
}

bool keeps_dac_override(const Policy& policy) {
    if (policy.capabilities.inherit) return true;
    return std::any_of(policy.capabilities.keep.begin(), policy.capabilities.keep.end(),
                       [](const std::string& name) {
                           std::string upper;
                           for (char c : name)
                               upper +=
                                   static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
                           return upper == "DAC_OVERRIDE" || upper == "CAP_DAC_OVERRIDE";
                       });
}

/// Whether `writer` may create files in a directory with this stat, by its mode bits. nullopt
/// when an ACL decides (the mode bits do not tell).
std::optional<bool> may_write(const SandboxWriter& writer, const struct stat& dir,
                              const std::string& path) {
    if (writer.overrides_permissions) return true;
    if (::getxattr(path.c_str(), "system.posix_acl_access", nullptr, 0) >= 0) return std::nullopt;
    mode_t needed;
    if (dir.st_uid == writer.uid) {
        needed = S_IWUSR | S_IXUSR;
    } else if (dir.st_gid == writer.gid || std::find(writer.groups.begin(), writer.groups.end(),
                                                     dir.st_gid) != writer.groups.end()) {
        needed = S_IWGRP | S_IXGRP;
    } else {
        needed = S_IWOTH | S_IXOTH;
    }
    return (dir.st_mode & needed) == needed;
}

/// Item 2 of issue 17: a checkout owned by root and a sandbox running as nobody fail deep in
/// the job ("cannot create configure.log: Permission denied"). Say it before the run.
/// Whether the sandbox can create files in the bound job directory, by the rules of
/// isolation/sandbox.cpp: in a user namespace started by root, the sandbox's user is a leased,
/// unprivileged host uid, and the bind is idmapped to the directory's owner unless the policy
/// names its own user and root owns the directory. nullopt: writable, or not ours to tell (an
/// ACL decides, or the sandbox reports a failed idmap itself).
std::optional<std::string> unwritable_reason(const Policy& policy, const struct stat& dir,
                                             const std::string& job_dir) {
    if (policy.namespaces.user) {
        if (::geteuid() != 0 || policy.user.inherit || dir.st_uid != 0) return std::nullopt;
        if ((dir.st_mode & (S_IWOTH | S_IXOTH)) == (S_IWOTH | S_IXOTH)) return std::nullopt;
        return "uid " + std::to_string(policy.user.uid) +
               " inside, an unprivileged uid of its own on the host, never mapped to root";
    }
    const SandboxWriter writer = sandbox_writer(policy);
    auto writable = may_write(writer, dir, job_dir);
    if (!writable || *writable) return std::nullopt;
    return "uid " + std::to_string(writer.uid) + (writer.uid == 0 ? " without capabilities" : "");
}

/// Item 2 of issue 17: a checkout owned by root and a sandbox running as nobody fail deep in
/// the job ("cannot create configure.log: Permission denied"). Say it before the run.
std::optional<std::string> write_access_note(const Policy& policy, const JobDirectory& job) {
    const std::string& job_dir = job.path;
    struct stat dir {};
    if (::fstat(job.get(), &dir) != 0) return std::nullopt;
    // The ACL is read through the descriptor too (the /proc magic link is the directory itself).
    auto who = unwritable_reason(policy, dir, "/proc/self/fd/" + std::to_string(job.get()));
    if (!who) return std::nullopt;
    return "the sandbox user (" + *who + "; policy `" + policy.name +
           "`) cannot write the job directory `" + job_dir + "` (owner uid " +
           std::to_string(dir.st_uid) + ", gid " + std::to_string(dir.st_gid) + ", mode " +
           octal_mode(dir.st_mode) +
           "): the command's writes there will fail with EACCES. To fix it, extend the policy "
           "with `workdir: {from: copy, outputs: [...]}` (the job works in a tmpfs copy and its "
           "outputs come back, owned by the directory's owner), or with `user: inherit` (the "
           "sandbox's root then writes as the directory's owner), or let the directory's owner "
           "be an ordinary user (its files are then written as that user)";
}

std::string writable_places(const Policy& policy) {
    std::string out;
    for (const auto& [path, size] : policy.filesystem.tmpfs) {
        out += (out.empty() ? "" : ", ") + path + " (fresh tmpfs";
        out += size != 0 ? " of " + format_size(size) + ")" : ")";
    }
    for (const auto& path : policy.filesystem.read_write) out += (out.empty() ? "" : ", ") + path;
    return out;
}

std::string identity(const Policy& policy) {
    if (policy.user.inherit) return "the caller's uid";
    return "uid " + std::to_string(policy.user.uid);
}

}  // namespace

Result<JobDirectory> resolve_job_directory(const std::optional<std::string>& given) {
    JobDirectory job;
    auto finish = [&](UniqueFd dir, const std::string& what) -> Result<JobDirectory> {
        char resolved[PATH_MAX];
        const std::string link = "/proc/self/fd/" + std::to_string(dir.get());
        ssize_t n = ::readlink(link.c_str(), resolved, sizeof resolved - 1);
        if (n <= 0) return sys_error(what + ": resolve");
        job.path = std::string(resolved, static_cast<size_t>(n));
        job.fd = std::make_shared<const UniqueFd>(std::move(dir));
        return job;
    };
    if (!given) {
        // The current directory itself, whatever links led here (the caller's shell followed
        // them); its name is the physical path.
        UniqueFd dir(::open(".", O_PATH | O_DIRECTORY | O_CLOEXEC));
        if (!dir) return sys_error("the current directory");
        return finish(std::move(dir), "the current directory");
    }
    // --cwd is walked one component at a time without following links. The job directory is
    // bound writable, and a link a previous job planted in its checkout (`ln -s /etc etc-link`,
    // then `--cwd etc-link`) must not turn the host's /etc into the next job's directory
    // (CVE-2021-30465's shape: a path swapped for a symlink between runs).
    const std::string what = "--cwd `" + *given + "`";
    auto dir = open_directory_no_symlinks(
        *given, what,
        "; the job's directory is bound writable, so corral does not follow links to it: give "
        "its real path");
    if (!dir) return std::move(dir.error());
    return finish(std::move(*dir), what);
}

SandboxWriter sandbox_writer(const Policy& policy) {
    SandboxWriter writer;
    if (policy.user.inherit) {
        writer.uid = ::geteuid();
        writer.gid = ::getegid();
        int count = ::getgroups(0, nullptr);
        if (count > 0) {
            writer.groups.resize(static_cast<size_t>(count));
            count = ::getgroups(count, writer.groups.data());
            writer.groups.resize(count > 0 ? static_cast<size_t>(count) : 0);
        }
    } else {
        writer.uid = policy.user.uid;
        writer.gid = policy.user.gid;
        writer.groups = policy.user.groups;
    }
    writer.overrides_permissions = keeps_dac_override(policy);
    return writer;
}

Result<RunWorkdirPlan> plan_run_workdir(const Policy& policy, const JobDirectory& job) {
    const std::string& job_dir = job.path;
    RunWorkdirPlan plan;
    plan.job_dir = job_dir;
    plan.job = job;
    plan.from = policy.workdir.from;
    if (policy.workdir.from == WorkdirFrom::copy) {
        if (job_dir == "/")
            return plain_error(
                "workdir.from: copy would copy all of `/` (the job directory): cd "
                "into the job's directory or pass --cwd DIR");
        plan.command_cwd = policy.workdir.mount;
        return plan;
    }
    if (policy.workdir.size)
        return plain_error("workdir.size (" + format_size(*policy.workdir.size) +
                           ") is set, but workdir.from is `cwd`: the job directory is bound as "
                           "it is and cannot be given a size. Set `workdir.from: copy` to run "
                           "in a tmpfs of that size at workdir.mount, or remove workdir.size");
    plan.command_cwd = job_dir;
    if (!policy.namespaces.mount) return plan;  // the host's view: nothing to bind
    if (job_dir == "/") {
        plan.notes.push_back(
            "the job directory is `/`: it is not bound (that would make the whole host "
            "writable), so the command sees `/` as the policy makes it; cd into the job's "
            "directory or pass --cwd DIR to make that directory writable");
        return plan;
    }
    plan.bind_job_dir = true;
    if (auto note = write_access_note(policy, job)) plan.notes.push_back(*note);
    return plan;
}

std::string describe_run_workdir(const Policy& policy) {
    const std::string places = writable_places(policy);
    const bool host_read_only =
        std::find(policy.filesystem.read_only.begin(), policy.filesystem.read_only.end(), "/") !=
        policy.filesystem.read_only.end();
    const std::string rest = !policy.namespaces.mount ? ""
                             : host_read_only
                                 ? "; everything else it sees is read-only"
                                 : "; the rest of the host as " + identity(policy) + " may";
    std::string out = "# corral run, as " + identity(policy) + ": ";
    if (!policy.namespaces.mount) {
        out +=
            "the command runs in the job directory (the current one, or --cwd DIR) with the "
            "host's own view of the file system: it can write wherever " +
            identity(policy) + " can.\n";
    } else if (policy.workdir.from == WorkdirFrom::cwd) {
        out +=
            "the command runs in the job directory (the current one, or --cwd DIR), bound "
            "writable at its own path. It can write there";
        out += places.empty() ? "" : " and in " + places;
        out += rest + ".\n";
        if (policy.workdir.size)
            out += "# corral run refuses this policy: workdir.size needs workdir.from: copy.\n";
    } else {
        out += "the job directory (the current one, or --cwd DIR) is copied into a fresh tmpfs";
        out += policy.workdir.size ? " of " + format_size(*policy.workdir.size) : "";
        out += " at " + policy.workdir.mount + " and the command runs there. It can write there";
        out += places.empty() ? "" : " and in " + places;
        out += rest + ". When it ends, ";
        if (policy.workdir.outputs.empty()) {
            out += "nothing is copied back (no workdir.outputs).\n";
        } else {
            std::string list;
            for (const auto& output : policy.workdir.outputs)
                list += (list.empty() ? "" : ", ") + output;
            out += "workdir.outputs (" + list +
                   ") are copied back into the job directory; nothing else survives.\n";
        }
    }
    if (policy.timeouts.session || policy.timeouts.idle) {
        out += "# corral run: ";
        out += policy.timeouts.session
                   ? "timeouts.session bounds the run like the command's timeout (the shorter "
                     "one ends it: status timeout, exit 124)"
                   : "";
        out += policy.timeouts.session && policy.timeouts.idle ? "; " : "";
        out += policy.timeouts.idle
                   ? "timeouts.idle applies to corrald sessions only (a run's command is always "
                     "running)"
                   : "";
        out += ".\n";
    }
    out += "# corrald sessions: a scratch workdir at " +
           (policy.namespaces.mount ? policy.workdir.mount : std::string("its session directory"));
    out += policy.workdir.size ? " (tmpfs of " + format_size(*policy.workdir.size) + ")" : "";
    out += ", or the host directory the request's `workdir` names.\n";
    return out;
}

}  // namespace corral::cli
