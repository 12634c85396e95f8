#pragma once
// The small per-namespace pieces of a session's namespace holder (sandbox.hpp): which CLONE_NEW*
// flags a policy asks for, the user namespace's id maps (written by the parent), and the
// holder-side setup of the network and uts namespaces (async-signal-safe).

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

#include "base/error.hpp"
#include "base/unique_fd.hpp"
#include "policies/policy.hpp"

namespace corral {

/// CLONE_NEW* flags for a policy's namespaces (network isolated -> CLONE_NEWNET).
int namespace_clone_flags(const NamespaceSpec& spec);

/// One line of a uid_map or gid_map: ids inside..inside+count-1 are outside..outside+count-1
/// on the host.
struct IdMapping {
    uint32_t inside = 0;
    uint32_t outside = 0;
    uint32_t count = 1;
};

/// Parent side, for a child in a new user namespace: writes its uid_map and gid_map. With
/// `deny_setgroups` it first writes "deny" to setgroups, which the kernel requires before an
/// unprivileged writer may set a gid_map; a root writer leaves setgroups allowed, so a policy's
/// `user.groups` can still be set inside.
Status write_id_maps(pid_t child, IdMapping uid, IdMapping gid, bool deny_setgroups);

/// A user namespace that exists only to carry a mapping (for an idmapped mount: the kernel takes
/// the mapping from a user namespace fd). A short-lived helper process is cloned into a new user
/// namespace (sharing our memory where clone3_on_stack exists, forked elsewhere), its maps are
/// written, its /proc/PID/ns/user is returned open, and it is ended and reaped before return.
Result<UniqueFd> make_mapping_namespace(IdMapping uid, IdMapping gid);

/// Child side, after entering a user namespace (created or joined): switches to the namespace's
/// uid/gid 0. Until then the process keeps its unmapped host ids and every file it creates fails
/// with EOVERFLOW. Raw system calls: glibc's setresuid would try to synchronise threads that
/// exist only in the parent. Async-signal-safe.
/// `drop_supplementary_groups` (a namespace whose maps a root parent wrote): the supplementary
/// groups are cleared first and must be. A host group stays effective on host inodes even where
/// the namespace does not map it, so root's group 0 inherited by a sandbox would open every
/// group-root file its view shows. Unprivileged namespaces (setgroups denied) keep the caller's
/// groups, as bubblewrap does: they are the caller's own.
bool become_namespace_root(bool drop_supplementary_groups) noexcept;

/// Holder side: sets IFF_UP on `lo` (a new network namespace starts with it down). Returns false
/// with errno set on failure. Async-signal-safe.
bool bring_loopback_up() noexcept;

/// Holder side: sethostname. Async-signal-safe.
bool set_hostname(const char* name, size_t length) noexcept;

}  // namespace corral
