#pragma once
// x86_64 syscalls the kernel's table (arch/x86/entry/syscalls/syscall_64.tbl, Linux 6.18) assigns
// but that the libseccomp corral links may not name: Debian 12 ships libseccomp 2.5.4, whose table
// ends at futex_requeue (456). Without their numbers a filter could neither deny them by name nor
// tell an assigned number from an unassigned one. isolation/seccomp resolves names through
// libseccomp first and through this table second.
//
// Names and numbers only, as the group table (syscall_groups.hpp): data, no kernel calls.

#include <span>
#include <string_view>

namespace corral {

/// One x86_64 syscall number.
struct SyscallNumber {
    std::string_view name;  ///< "mseal"
    int number;             ///< 462
};

/// Syscalls newer than libseccomp 2.5.4, sorted by name.
std::span<const SyscallNumber> recent_x86_64_syscalls();
/// The number of a syscall in recent_x86_64_syscalls(), or -1.
int recent_x86_64_syscall(std::string_view name);
/// The highest number the x86_64 table assigns (6.18: file_setattr, 469). Numbers above it, and
/// the gap the table leaves unused (337..423), are unassigned.
int highest_x86_64_syscall();

}  // namespace corral
