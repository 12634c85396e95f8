#include "policies/syscall_numbers.hpp"

#include <algorithm>

namespace corral {
namespace {

// From the kernel's arch/x86/entry/syscalls/syscall_64.tbl (6.18). Keep sorted by name (a unit
// test checks); add a row when a kernel adds a syscall and libseccomp does not know it yet.
constexpr SyscallNumber kRecent[] = {
    {"file_getattr", 468},
    {"file_setattr", 469},
    {"getxattrat", 464},
    {"listmount", 458},
    {"listxattrat", 465},
    {"lsm_get_self_attr", 459},
    {"lsm_list_modules", 461},
    {"lsm_set_self_attr", 460},
    {"mseal", 462},
    {"open_tree_attr", 467},
    {"removexattrat", 466},
    {"setxattrat", 463},
    {"statmount", 457},
    {"uprobe", 336},
    {"uretprobe", 335},
};

}  // namespace

std::span<const SyscallNumber> recent_x86_64_syscalls() {
    return kRecent;
}

int recent_x86_64_syscall(std::string_view name) {
    auto table = recent_x86_64_syscalls();
    auto it =
        std::lower_bound(table.begin(), table.end(), name,
                         [](const SyscallNumber& s, std::string_view n) { return s.name < n; });
    return it != table.end() && it->name == name ? it->number : -1;
}

int highest_x86_64_syscall() {
    return 469;
}

}  // namespace corral
