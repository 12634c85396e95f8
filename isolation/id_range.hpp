#pragma once
// Host uid/gid ranges for sessions' user namespaces. When corral runs as root, a `default`
// session is root inside its user namespace and an unprivileged block of host ids outside, so the
// host kernel judges everything it does (files it creates, setuid bits, sockets it connects to,
// processes it signals) as a stranger's (issue 10, items 3, 4, 6, 7; DESIGN.md "Identity").
//
// The blocks: 65536 ids each (inside 0..65535, so `nobody` 65534 maps too), slot N at
// 0x70000000 + N * 0x10000, slots up to 0x7FFDFFFF (4094 of them). That is the range systemd's
// UIDS-GIDS.md leaves unused: above the container ranges systemd-nspawn picks from
// (0x00080000-0x6FFFFFFF), below systemd's "foreign" range (0x7FFE0000) and below 2^31 (ids that
// are negative as a signed int break tools). A slot that overlaps any id in /etc/passwd,
// /etc/group, /etc/subuid or /etc/subgid is never handed out.
//
// One allocator for every corral process on the host: a slot is taken by holding flock() on
// <lock dir>/<N>.lock (default /run/corral-id-ranges). corrald and independent `corral run`s
// thus never share a slot, and a crashed holder frees its slot by dying. The lock's open file is
// also kept by the session's namespace holder (sandbox.cpp), so a slot stays taken as long as the
// session's namespaces exist, even if the process that took it is gone. Lock files in place are
// never unlinked: unlinking a flock()ed file races with the next locker (a new one is made under
// a temporary name and linked into place, locked).
//
// The lock dir is not under /run/corral: that is corrald's systemd RuntimeDirectory, which
// systemd deletes when the unit stops or restarts (unless RuntimeDirectoryPreserve=yes, which
// deploy/systemd/corrald.service sets too), and a restarted corrald would then lock fresh files
// for slots live `corral run`s still hold. Should the lock files vanish anyway, a slot whose lock
// is free is still checked for a live user before it is handed out: no process in another user
// namespace may have any id of it in its uid_map or gid_map (a /proc scan under the slot's lock).
// The scan runs only for a slot with no lock file: one that exists was linked into place after a
// scan found its range free, and a range found in use gets no file (see id_range.cpp).
//
// Slots this process holds a lease on are skipped without a look at their files: a scan from slot
// 0 tried each of them (open, flock, close) before it found a free one, ~3,000 system calls on
// corrald's loop for a session created beside 1,000 `default` ones (issue 18). Skipping them is
// also the safer answer: a slot this process holds is never handed out twice by it, even if its
// lock file was removed under it.

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "base/error.hpp"
#include "base/unique_fd.hpp"

namespace corral {

/// First host id of slot 0.
inline constexpr uid_t kIdRangeFirst = 0x70000000;
/// Ids per session (inside 0 .. kIdRangeSize-1).
inline constexpr uint32_t kIdRangeSize = 0x10000;
/// Number of slots: up to (not including) systemd's foreign range at 0x7FFE0000.
inline constexpr uint32_t kIdRangeSlots = (0x7FFE0000u - kIdRangeFirst) / kIdRangeSize;
/// Where the slot lock files live.
inline constexpr const char* kIdRangeLockDir = "/run/corral-id-ranges";

/// Whether a host uid/gid lies in any corral session range (for the daemon's peer check).
bool is_corral_range_id(uint32_t id);

/// One slot, taken for as long as this object (or a process that inherited lock_fd()) lives.
class IdRangeLease {
  public:
    IdRangeLease() = default;
    IdRangeLease(IdRangeLease&& other) noexcept;
    IdRangeLease& operator=(IdRangeLease&& other) noexcept;
    ~IdRangeLease();
    /// Takes the first free slot: unlocked, and mapped by no live process's user namespace.
    /// Fails with EAGAIN when every slot is in use, or with the error of creating the lock dir.
    static Result<IdRangeLease> acquire(const std::string& lock_dir = kIdRangeLockDir);

    bool valid() const { return lock_.valid(); }
    /// Host id that inside id 0 maps to.
    uid_t base() const { return base_; }
    uint32_t count() const { return kIdRangeSize; }
    /// Host id of inside id `inside` (which must be below count()).
    uid_t outside(uid_t inside) const { return base_ + inside; }
    /// The locked file; a process that keeps a copy keeps the slot taken.
    int lock_fd() const { return lock_.get(); }

  private:
    /// Gives the slot up: this process's copy of its lock closes (a namespace holder's copy
    /// keeps it taken) and the process no longer counts it as its own.
    void release() noexcept;

    UniqueFd lock_;
    uid_t base_ = 0;
    std::string lock_dir_;  ///< where it was taken (the held-slot registry's key, with the slot)
};

}  // namespace corral
