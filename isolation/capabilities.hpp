#pragma once
// Credentials of a confined process: user/group ids and the five capability sets.
// Names are resolved with libcap in the parent; the child-side functions make only raw system
// calls (async-signal-safe, no allocation) and return the failing step's name or nullptr.
//
// Order in the child, and why:
//   1. drop_bounding_capabilities: needs CAP_SETPCAP in the effective set, which a uid change
//      clears, so it comes first. A caller without CAP_SETPCAP has no capabilities to lose at
//      exec anyway (no_new_privs blocks setuid binaries and file capabilities), so it is skipped.
//   2. change_credentials: PR_SET_KEEPCAPS keeps the permitted set across setresuid.
//   3. set_capability_sets: effective/permitted/inheritable = keep (capset).
//   4. set_ambient_capabilities: clear, then raise each kept one, so a non-root uid still holds
//      them after execve (ambient needs the bit in permitted and inheritable: after step 3).

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/error.hpp"

namespace corral {

/// Resolves names ("CAP_NET_ADMIN", "net_admin", any case) to a bitmask of capability numbers.
/// Errors name `key` and the bad name; a capability this kernel does not know is an error too.
Result<uint64_t> capability_mask(const std::vector<std::string>& names, int last_capability,
                                 const std::string& key = "capabilities.keep");

/// The highest capability number the running kernel knows (/proc/sys/kernel/cap_last_cap).
int last_capability();

/// Child: drops every capability not in `keep` from the bounding set.
const char* drop_bounding_capabilities(uint64_t keep, int last_capability);

/// Child: sets supplementary groups, gid and uid (real, effective, saved). With `keep_caps`, the
/// permitted capability set survives the uid change.
const char* change_credentials(uid_t uid, gid_t gid, const gid_t* groups, size_t group_count,
                               bool keep_caps);

/// Child: effective, permitted and inheritable sets become exactly `keep`.
const char* set_capability_sets(uint64_t keep);

/// Child: the ambient set becomes exactly `keep`.
const char* set_ambient_capabilities(uint64_t keep, int last_capability);

}  // namespace corral
