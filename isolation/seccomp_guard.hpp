#pragma once
// The seccomp guard: a short classic-BPF program that runs in front of the libseccomp-generated
// filter of the `default` and `strict` presets and refuses what no allow/deny list may re-open:
//
//   setuid/setgid bits   chmod, fchmod, fchmodat, fchmodat2, creat, mknod, mknodat with S_ISUID or
//                        S_ISGID in the mode, open/openat creating a file (O_CREAT, O_TMPFILE) with
//                        them -> EPERM. A sandbox that runs as (some) root owns the files it
//                        makes; a setuid-root binary it leaves in a directory a host user can reach
//                        is root for that user (issue 10.4; systemd's RestrictSUIDSGID= filters
//                        the same calls the same way).
//   openat2              -> ENOSYS: its mode sits in a struct in memory that seccomp cannot read;
//                        glibc and every library that uses it fall back to openat.
//   personality          only Docker's allowed personas (0, PER_LINUX32 bits 0x8, UNAME26
//                        0x20000, 0x20008, and the 0xffffffff query) -> else EPERM.
//   socket               AF_VSOCK (not network-namespaced: reaches the hypervisor from an
//                        isolated session) and AF_ALG (kernel crypto API, a history of LPEs:
//                        CVE-2017-17805, CVE-2021-3609-era bugs) -> EAFNOSUPPORT, what a kernel
//                        without the family answers, so programs take their fallback.
//   unassigned numbers   -> ENOSYS, as the kernel answers today, so a syscall a newer kernel adds
//                        is not silently allowed by an allow-by-default filter.
//
// Why raw BPF: libseccomp 2.5 cannot put two comparisons on one argument (personality, socket)
// and drops a conditional rule when the same syscall already has an unconditional one (strict
// allows chmod; the guard must still refuse chmod 4755). Every argument is compared on its low
// 32 bits: the kernel truncates int/umode_t arguments, so upper-half garbage cannot sneak past.
// The refusals use fixed errnos, not the policy's action: `action: log` must not turn the setuid
// guard into a log line.

#include <linux/filter.h>

#include <vector>

#include "base/error.hpp"

namespace corral {

/// A range of syscall numbers, both ends included.
struct SyscallRange {
    int first;
    int last;
};

/// Numbers from 0 to highest_x86_64_syscall() that neither libseccomp nor the recent-syscall
/// table names, as sorted ranges.
std::vector<SyscallRange> unassigned_syscall_ranges();

/// The guard program. Its "continue" exit is the instruction after its last one, so the caller
/// appends the main filter directly behind it. `debuggers`: also allow personality with
/// ADDR_NO_RANDOMIZE (gdb and the sanitizers turn ASLR off for the process they start).
Result<std::vector<sock_filter>> compile_seccomp_guard(bool debuggers = false);

}  // namespace corral
