#include "isolation/confinement.hpp"

#include <linux/audit.h>
#include <sys/prctl.h>

#include <cerrno>

#include "isolation/capabilities.hpp"
#include "isolation/landlock.hpp"
#include "isolation/rlimits.hpp"
#include "isolation/seccomp.hpp"
#include "isolation/seccomp_cache.hpp"
#include "isolation/seccomp_refusals.hpp"

namespace corral {
namespace {

Status compile_credentials(const Policy& policy, Confinement& out) {
    out.drop_capabilities = !policy.capabilities.inherit;
    if (out.drop_capabilities) {
        out.last_capability = last_capability();  // only dropping needs it (a /proc read)
        auto mask = capability_mask(policy.capabilities.keep, out.last_capability);
        if (!mask) return std::move(mask.error());
        out.keep_capabilities = *mask;
    }
    out.change_ids = !policy.user.inherit;
    if (out.change_ids) {
        out.uid = policy.user.uid;
        out.gid = policy.user.gid;
        out.groups = policy.user.groups;
    }
    return {};
}

// Landlock on a kernel without it: refused under `enforcement: strict`, skipped under best-effort.
Status compile_landlock(const Policy& policy, int root_fd, Confinement& out) {
    if (!policy.landlock.enabled()) return {};
    if (landlock_abi_version() == 0 && policy.enforcement == Enforcement::best_effort) return {};
    auto ruleset = build_landlock_ruleset(policy.landlock, root_fd);
    if (!ruleset) {
        Error error = std::move(ruleset.error());
        // A path of the policy the sandbox does not have: the caller's to fix (HTTP 422).
        if (root_fd >= 0 && (error.code == ENOENT || error.code == ENOTDIR || error.code == ELOOP))
            error.invalid_policy = true;
        return error;
    }
    out.landlock_ruleset = std::move(*ruleset);
    return {};
}

// The child hands its listener to the parent with sendmsg(2) right after installing the filter
// (launcher.cpp). A policy that refuses sendmsg would have the child wait on a listener nobody
// holds yet, forever: such a filter is installed without a listener (nothing counted).
bool listener_can_be_handed_over(const std::vector<sock_filter>& marked) {
    if (!has_refusal_marks(marked)) return false;
    seccomp_data handover{};
    handover.nr = resolve_syscall("sendmsg");
    handover.arch = AUDIT_ARCH_X86_64;
    return refusal_verdict(marked, handover).kind == RefusalVerdict::not_marked;
}

}  // namespace

Status root_landlock(const Policy& policy, int root_fd, Confinement& out) {
    return compile_landlock(policy, root_fd, out);
}

Result<Confinement> compile_confinement(const Policy& policy, bool landlock_later) {
    Confinement out;
    // A spec that compiles to no filter is not worth the cache (a directory, a key with the
    // kernel's release, a file: ten system calls on every `corral run --policy none`, issue 18).
    auto marked = compiles_to_no_filter(policy.seccomp)
                      ? compile_marked_seccomp(policy.seccomp)
                      : compile_seccomp_cached(policy.seccomp, default_seccomp_cache_dir());
    if (!marked) return std::move(marked.error());
    // A kernel without seccomp filters: refused under `enforcement: strict` (the child's install
    // fails and names the step), skipped under best-effort.
    if (!marked->empty() && (policy.enforcement == Enforcement::strict || seccomp_available())) {
        out.seccomp_filter = without_listener(*marked);
        if (listener_can_be_handed_over(*marked)) {
            out.seccomp_notifying_filter = notifying(*marked);
            out.seccomp_marked =
                std::make_shared<const std::vector<sock_filter>>(std::move(*marked));
        }
    }
    auto credentials = compile_credentials(policy, out);
    if (!credentials) return std::move(credentials.error());
    out.rlimits = compile_rlimits(policy.limits);
    if (!landlock_later) {
        auto landlock = compile_landlock(policy, -1, out);
        if (!landlock) return std::move(landlock.error());
    }
    out.no_new_privs =
        true;  // always: seccomp and Landlock need it, and setuid binaries must not escalate
    return out;
}

bool stay_non_dumpable() noexcept {
    ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    return ::prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0;
}

const char* apply_confinement(const Confinement& c, int* listener, int landlock_ruleset) {
    if (const char* step = apply_rlimits(c.rlimits.data(), c.rlimits.size())) return step;
    if (c.drop_capabilities && !c.bounding_set_dropped) {
        if (const char* step = drop_bounding_capabilities(c.keep_capabilities, c.last_capability))
            return step;
    }
    if (c.change_ids) {
        if (const char* step = change_credentials(c.uid, c.gid, c.groups.data(), c.groups.size(),
                                                  c.drop_capabilities))
            return step;
        if (!stay_non_dumpable()) {
            errno = EPERM;
            return "stay non-dumpable";
        }
    }
    if (c.drop_capabilities) {
        if (const char* step = set_capability_sets(c.keep_capabilities)) return step;
        if (const char* step = set_ambient_capabilities(c.keep_capabilities, c.last_capability))
            return step;
    }
    if (c.no_new_privs && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return "no_new_privs";
    if (c.landlock_ruleset.valid() &&
        landlock_restrict(landlock_ruleset >= 0 ? landlock_ruleset : c.landlock_ruleset.get()) != 0)
        return "landlock_restrict_self";
    if (c.seccomp_installed) return nullptr;
    if (listener != nullptr && !c.seccomp_notifying_filter.empty()) {
        *listener = install_seccomp_filter(c.seccomp_notifying_filter.data(),
                                           c.seccomp_notifying_filter.size(), true);
        if (*listener >= 0) return nullptr;
        if (errno != EBUSY && errno != EINVAL && errno != ENOSYS) return "seccomp";
        *listener = -1;  // no listener here: the filter without one, as before counting
    }
    if (!c.seccomp_filter.empty() &&
        install_seccomp_filter(c.seccomp_filter.data(), c.seccomp_filter.size()) != 0)
        return "seccomp";
    return nullptr;
}

}  // namespace corral
