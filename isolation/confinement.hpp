#pragma once
// Per-process confinement compiled from a Policy once, in the parent, so the child after clone only
// makes async-signal-safe system calls: no allocation, no libseccomp/libcap calls in the child.
// Order in the child (apply_confinement): rlimits -> bounding set (needs CAP_SETPCAP, which the uid
// change clears) -> groups/gid/uid (keeping caps across setuid) -> capset (effective, permitted,
// inheritable) -> ambient (needs the bits in permitted and inheritable) -> no_new_privs ->
// Landlock -> seccomp (last, so the filter does not have to allow the setup calls; a session's
// first process may have installed it while it waited, where the filter allows every call left:
// launch_ahead.hpp).
// One file per kernel concern: seccomp.hpp, capabilities.hpp, rlimits.hpp, landlock.hpp.

#include <linux/filter.h>
#include <sys/resource.h>
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "base/unique_fd.hpp"
#include "policies/policy.hpp"

namespace corral {

/// One rlimit to set (both soft and hard).
struct RlimitStep {
    int resource;
    rlimit value;
};

/// Everything the child applies to itself before exec.
struct Confinement {
    std::vector<sock_filter> seccomp_filter;  ///< empty: no filter; the one without a listener
    /// The same filter with its refusals handed to a listener (seccomp_refusals.hpp); empty when
    /// nothing would be counted. The launcher installs it when its caller counts refusals.
    std::vector<sock_filter> seccomp_notifying_filter;
    /// The marked program both come from: the supervisor's answers (seccomp_listener.hpp).
    std::shared_ptr<const std::vector<sock_filter>> seccomp_marked;
    bool drop_capabilities = true;            ///< false: leave caps as inherited
    /// Set only by a child on itself, never sent: it dropped the bounding set to exactly these
    /// keep_capabilities and last_capability while it waited (launch_ahead.hpp), and
    /// apply_confinement does not drop it again (the other sets are still changed there).
    bool bounding_set_dropped = false;
    /// Set only by a child on itself, never sent: it installed exactly these seccomp filters while
    /// it waited (launch_ahead.hpp), and apply_confinement installs none (nor hands a listener
    /// over: it went with the child's word that it entered).
    bool seccomp_installed = false;
    uint64_t keep_capabilities = 0;           ///< bitmask of CAP_* kept in all sets (incl. ambient)
    int last_capability = 40;                 ///< highest cap number this kernel knows
    bool change_ids = false;
    uid_t uid = 0;
    gid_t gid = 0;
    std::vector<gid_t> groups;
    std::vector<RlimitStep> rlimits;
    UniqueFd landlock_ruleset;  ///< -1: no Landlock
    bool no_new_privs = true;
};

/// Compiles a policy's seccomp, capabilities, ids, rlimits and Landlock sections. Errors name the
/// key and the bad value ("seccomp.deny: unknown syscall `foo`"). Landlock or seccomp missing
/// from the kernel: an error (Landlock) or a setup failure (seccomp) under `enforcement: strict`,
/// skipped under best-effort.
/// `landlock_later`: the sandbox will have a mount namespace of its own, whose paths the ruleset
/// must hold (landlock.hpp): Landlock is left for root_landlock() once the sandbox stands.
Result<Confinement> compile_confinement(const Policy& policy, bool landlock_later = false);
/// Builds `out`'s Landlock ruleset from the policy's paths as the sandbox rooted at `root_fd` sees
/// them (no-op without landlock rules, or best-effort on a kernel without Landlock). A path the
/// sandbox does not have is a policy that cannot be honoured (Error::invalid_policy).
Status root_landlock(const Policy& policy, int root_fd, Confinement& out);

/// After a credential change in a forked child: the kernel sets the mm's dumpability from
/// fs.suid_dumpable, which is 1 on some hosts, and a dumpable child could be ptraced, and its
/// memory and descriptors taken (pidfd_getfd), by the session's processes of its new uid until
/// execve (CVE-2019-5736 reached runc the same way). Sets it back and says whether it held.
/// Never for a child sharing our memory: the flag is the mm's, i.e. corrald's (launcher.hpp).
/// Async-signal-safe.
bool stay_non_dumpable() noexcept;

/// Runs in the child between clone and exec. Async-signal-safe. On failure returns the failing
/// step's name (a string literal, e.g. "capset") and leaves errno set; nullptr on success.
/// With `listener` and a notifying filter, that filter is installed with a new listener, whose
/// descriptor (close-on-exec) lands in *listener; where the kernel refuses one (EBUSY: the caller
/// already runs under a filter with a listener, as inside another corral; EINVAL/ENOSYS: older
/// kernels) the filter without a listener is installed instead and *listener stays -1.
/// `landlock_ruleset`: where the ruleset is in the calling thread's table, if not at the
/// confinement's own number (-1).
const char* apply_confinement(const Confinement& confinement, int* listener = nullptr,
                              int landlock_ruleset = -1);

/// Builds the seccomp BPF program for a spec (used by compile_confinement; exposed for tests and
/// `corral doctor`). Empty vector where compiles_to_no_filter(spec).
Result<std::vector<sock_filter>> compile_seccomp(const SeccompSpec& spec);
/// Whether a spec compiles to no filter at all: preset "none" and nothing denied (`allow` alone
/// changes nothing there, but is still checked for unknown names).
bool compiles_to_no_filter(const SeccompSpec& spec);
/// The marked program of a spec (seccomp_refusals.hpp): compile_seccomp's with its counted
/// answers marked. What the cache stores.
Result<std::vector<sock_filter>> compile_marked_seccomp(const SeccompSpec& spec);

}  // namespace corral
