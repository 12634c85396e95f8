#pragma once
// mount_setattr(2), the one way corral changes a mount's attributes (read-only, nosuid, nodev,
// noexec, idmap), on a path or on a detached tree's descriptor. Every caller used to spell the
// mount_attr and the syscall itself. Async-signal-safe (no allocation, no locks): the holder uses
// it between fork and exec.

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>

namespace corral {

/// Sets `attributes` (MOUNT_ATTR_*) on the mount at `path` relative to `dirfd` (`""` with
/// AT_EMPTY_PATH: the mount `dirfd` is), with everything beneath it when `at_flags` has
/// AT_RECURSIVE. `userns_fd` is the user namespace of MOUNT_ATTR_IDMAP, passed as given with it
/// (a bad one fails: EBADF, EINVAL) and unused without it. false with errno.
inline bool set_mount_attributes(int dirfd, const char* path, unsigned at_flags,
                                 uint64_t attributes, int userns_fd = -1) noexcept {
    mount_attr attr{};
    attr.attr_set = attributes;
    if ((attributes & MOUNT_ATTR_IDMAP) != 0) attr.userns_fd = static_cast<uint64_t>(userns_fd);
    return ::syscall(SYS_mount_setattr, dirfd, path, at_flags, &attr, sizeof attr) == 0;
}

/// set_mount_attributes on the detached (or attached) mount `tree` itself.
inline bool set_tree_attributes(int tree, bool recursive, uint64_t attributes,
                                int userns_fd = -1) noexcept {
    return set_mount_attributes(tree, "", AT_EMPTY_PATH | (recursive ? AT_RECURSIVE : 0),
                                attributes, userns_fd);
}

}  // namespace corral
