#pragma once
// The small per-namespace pieces of a session's namespace holder (sandbox.hpp): which CLONE_NEW*
// flags a policy asks for, the user namespace's id maps (written by the parent), and the
// holder-side setup of the network and uts namespaces (async-signal-safe).

#include <sys/types.h>

#include <cstddef>

#include "base/error.hpp"
#include "policies/policy.hpp"

namespace corral {

/// CLONE_NEW* flags for a policy's namespaces (network isolated -> CLONE_NEWNET).
int namespace_clone_flags(const NamespaceSpec& spec);

/// Parent side, for a child in a new user namespace: "deny" to setgroups (required before an
/// unprivileged gid_map, harmless otherwise), then maps inside 0 to `outside_uid`/`outside_gid`.
Status write_id_maps(pid_t child, uid_t outside_uid, gid_t outside_gid);

/// Child side, after entering a user namespace (created or joined): switches to the namespace's
/// uid/gid 0. Until then the process keeps its unmapped host ids and every file it creates fails
/// with EOVERFLOW. Raw system calls: glibc's setresuid would try to synchronise threads that
/// exist only in the parent. Async-signal-safe.
bool become_namespace_root() noexcept;

/// Holder side: sets IFF_UP on `lo` (a new network namespace starts with it down). Returns false
/// with errno set on failure. Async-signal-safe.
bool bring_loopback_up() noexcept;

/// Holder side: sethostname. Async-signal-safe.
bool set_hostname(const char* name, size_t length) noexcept;

}  // namespace corral
