#pragma once
// seccomp: compile a SeccompSpec into a classic BPF program in the parent (libseccomp), install it
// in the child with one raw system call. compile_seccomp itself is declared in confinement.hpp.
//
// Presets:
//   default  allow everything except a deny list modelled on Docker's default profile (mount,
//            modules, reboot, swap, raw I/O, clock setting, debugging/ptrace, keyrings, obsolete
//            calls, namespace creation, bpf, userfaultfd, io_uring, handle-based opens, ...).
//            `allow` removes names from that deny list; `deny` adds to it.
//   strict   deny everything (with the policy's action) except @system-service; `allow` adds.
//   none     no filter unless `deny` names something.
// In every preset `deny` wins over `allow`.
//
// Namespace creation: clone(2) carries CLONE_NEW* in its flags argument, which seccomp can test;
// clone3(2) carries them in a struct in memory, which seccomp cannot read. So wherever `unshare`
// is denied (default preset, strict without unshare allowed), clone with any CLONE_NEW* flag gets
// the policy action and clone3 fails with ENOSYS, which makes glibc fall back to clone (Docker
// answers clone3 the same way).
//
// Only the native architecture is allowed: a syscall made through another ABI (i386 int 0x80, x32)
// would have different numbers and slip past a deny list, so the filter kills the process instead.

#include <linux/filter.h>

#include <cstddef>
#include <string_view>

namespace corral {

/// Whether this kernel supports seccomp filters with SECCOMP_RET_KILL_PROCESS (for `corral
/// doctor`).
bool seccomp_available();

/// The x86_64 number of a syscall name: libseccomp's table, then policies/syscall_numbers for
/// calls newer than the libseccomp we link. -1 for unknown names and other architectures' calls.
int resolve_syscall(std::string_view name);

/// Installs a BPF program on the calling thread. Async-signal-safe; needs no_new_privs (or
/// CAP_SYS_ADMIN). Returns 0 (with `new_listener`: the listener's descriptor, close-on-exec), or
/// -1 with errno set.
int install_seccomp_filter(const sock_filter* program, size_t length, bool new_listener = false);

}  // namespace corral
