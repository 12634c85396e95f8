#pragma once
// The launcher's two halves, for a launch started ahead (launch_ahead.hpp): a child that enters
// its session now and becomes a command later. Only launcher.cpp and launch_ahead.cpp use them.

#include "base/error.hpp"
#include "base/pipe.hpp"
#include "isolation/launcher.hpp"
#include "isolation/pid_ref.hpp"

namespace corral::launcher_internal {

/// What a waiting child runs once it has entered its session: `spec` is the session part it was
/// started for, `own_fd` the one descriptor of ours it kept (besides the session's). Never returns.
using AfterEntering = void (*)(const LaunchSpec& spec, int own_fd) noexcept;

/// Clones a child of `spec`'s session part only (cgroup_fd, v1_join_fds, namespace_holder_pidfd,
/// namespace_flags, clone_parent, new_session (its setsid comes first), and what of the confinement
/// a child may apply ahead, launch_ahead.hpp; the command's fields are not read): born in the
/// cgroup with every signal blocked, non-dumpable, it keeps only `own_fd` and the session's
/// descriptors, joins the v1 cgroups and the session's namespaces as launch_begin()'s child does,
/// and then runs `then(spec, own_fd)`. A failure to enter is reported on `own_fd` (a report
/// channel's write end, child_report.hpp), and the child exits with 127. For a single-threaded
/// caller only (the launch zygote): the child allocates afterwards.
Result<PidRef> start_session_child(const LaunchSpec& spec, int own_fd, AfterEntering then);

/// In a child that has entered its session (start_session_child) and may allocate: the rest of a
/// launch for `spec`, whose descriptors are ours — stdio, session, cwd, confinement, execve —
/// reporting as launch_begin()'s child does on `report_fd`. Every other descriptor is closed
/// first. Never returns.
[[noreturn]] void become_command(const LaunchSpec& spec, int report_fd) noexcept;

/// Whether `spec`'s child hands its seccomp listener over before execve (its report channel is
/// then a SOCK_SEQPACKET socket pair: launcher.hpp).
bool hands_over_listener(const LaunchSpec& spec);

/// The channel a launched child reports on (child_report.hpp): a pipe, or a SOCK_SEQPACKET socket
/// pair when the child hands its listener over across it.
Result<Pipe> make_report_channel(bool hands_over_listener);

}  // namespace corral::launcher_internal
