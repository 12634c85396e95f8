#pragma once
// Landlock: an unprivileged, stackable filesystem access control. The parent builds a ruleset
// (landlock_create_ruleset + one path_beneath rule per policy path, each opened O_PATH) and hands
// its fd to the child, which only calls landlock_restrict_self before exec.
//
// The ruleset handles every filesystem right the running kernel's ABI knows, so anything not
// granted by a rule is denied: `landlock.read` paths get read + execute, `landlock.write` paths
// get every right. A program's own binary and libraries must therefore be under a read path.

#include <vector>

#include "base/error.hpp"
#include "base/unique_fd.hpp"
#include "policies/policy.hpp"

namespace corral {

/// The kernel's Landlock ABI version; 0 when Landlock is unsupported or disabled.
int landlock_abi_version();

/// Builds a ruleset for the spec. Errors name the key and path ("landlock.write: `/x`: ENOENT").
/// `root_fd`: the sandbox's root (its holder's /proc/PID/root) where the sandbox has a mount
/// namespace of its own. A rule holds an inode, so a path must be opened as the sandbox sees it:
/// its /workspace and its /tmp are its own mounts, which the host's paths do not reach (a host
/// without /workspace refused every session of examples/policies/ai-agent.yaml, and a rule on the
/// host's /tmp granted nothing in the sandbox's /tmp). Paths resolve inside it, following a link
/// only where it lies on a read-only mount (the image's: merged-/usr's /bin): one the sandbox
/// made where it can write could widen a rule. -1: the caller's own view.
Result<UniqueFd> build_landlock_ruleset(const LandlockSpec& spec, int root_fd = -1);

/// Child: restricts the calling thread (needs no_new_privs or CAP_SYS_ADMIN). Async-signal-safe.
/// Returns 0, or -1 with errno set.
int landlock_restrict(int ruleset_fd);

}  // namespace corral
