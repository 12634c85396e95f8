#pragma once
// openat2(2) (glibc 2.36 has no wrapper), retried where the kernel asks for it. With
// RESOLVE_BENEATH or RESOLVE_IN_ROOT the kernel follows a `..` only when no rename or mount
// happened anywhere on the system meanwhile, and otherwise fails with EAGAIN ("the caller may
// choose to retry", openat2(2)): on a busy host (a build renaming files beside us) that happens,
// and a caller that took EAGAIN for "it leaves the root" refused what was beneath it (corral run's
// copy-back dropped an output link that stayed inside, seen as a WorkdirOutputs flake under load).
// Every openat2 of corral goes through here. Async-signal-safe (no allocation, no locks): the
// holder uses it between fork and exec.

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace corral {

/// How often an EAGAIN (or EINTR) is retried before it is reported: each retry is one lookup, and
/// only a host renaming or mounting without pause keeps failing them.
inline constexpr int kOpenat2Attempts = 1000;

/// openat2(dirfd, path, how): the new descriptor, or -1 with errno (never EAGAIN unless
/// kOpenat2Attempts lookups in a row raced a rename or mount).
inline int openat2_retrying(int dirfd, const char* path, const open_how& how) noexcept {
    for (int attempt = 1;; ++attempt) {
        const long fd = ::syscall(SYS_openat2, dirfd, path, &how, sizeof how);
        if (fd >= 0) return static_cast<int>(fd);
        if ((errno != EAGAIN && errno != EINTR) || attempt >= kOpenat2Attempts) return -1;
    }
}

/// `relative` beneath the directory `dirfd`, opened O_PATH without following any link on the way
/// (magic ones included) and never above `dirfd`: what is there, never what a link leads to. A
/// link as the last component is opened as the link itself (O_PATH|O_NOFOLLOW, openat2(2)): a
/// caller that must refuse it looks (S_ISLNK). -1 with errno: ENOENT not there, ELOOP a link on
/// the way, EXDEV above `dirfd`.
inline int open_path_beneath_without_links(int dirfd, const char* relative) noexcept {
    open_how how{};
    how.flags = O_PATH | O_CLOEXEC | O_NOFOLLOW;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
    return openat2_retrying(dirfd, relative, how);
}

}  // namespace corral
