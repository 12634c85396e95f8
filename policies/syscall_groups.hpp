#pragma once
// Named syscall groups ("@mount", "@debug", ...) in a sorted constant table, as systemd's
// seccomp-util.c does. A group lists syscall names and may include other groups. Names only:
// resolving a name to a number on this architecture is isolation/seccomp's job.

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.hpp"

namespace corral {

/// One named group.
struct SyscallGroup {
    std::string_view name;      ///< "@mount"
    std::string_view help;      ///< one line for `corral doctor` / docs
    std::string_view syscalls;  ///< space-separated syscall names and "@group" includes
};

/// The table, sorted by name.
std::span<const SyscallGroup> syscall_groups();
/// Looks up a group by name ("@mount"); nullptr if unknown.
const SyscallGroup* find_syscall_group(std::string_view name);
/// Expands names and "@group"s (recursively) into a sorted, de-duplicated list of syscall
/// names. An unknown group is an error naming it.
Result<std::vector<std::string>> expand_syscalls(const std::vector<std::string>& names);

}  // namespace corral
