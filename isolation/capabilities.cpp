#include "isolation/capabilities.hpp"

#include <linux/capability.h>
#include <sys/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>

#include "base/file_io.hpp"

namespace corral {
namespace {

std::string normalized_name(std::string name) {
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (name.rfind("cap_", 0) != 0) name = "cap_" + name;
    return name;
}

bool has(uint64_t mask, int cap) {
    return (mask >> cap) & 1u;
}

// Reads the calling thread's effective set (raw capget; async-signal-safe).
bool effective_has(int cap) {
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2]{};
    if (syscall(SYS_capget, &header, data) != 0) return false;
    return (data[cap / 32].effective >> (cap % 32)) & 1u;
}

}  // namespace

Result<uint64_t> capability_mask(const std::vector<std::string>& names, int last_cap,
                                 const std::string& key) {
    uint64_t mask = 0;
    for (const std::string& name : names) {
        cap_value_t value = 0;
        std::string lookup = normalized_name(name);
        if (cap_from_name(lookup.c_str(), &value) != 0 || value < 0 || value > 63) {
            return plain_error(key + ": unknown capability `" + name + "`");
        }
        if (value > last_cap) {
            return plain_error(key + ": capability `" + name + "` is not known to this kernel");
        }
        mask |= uint64_t{1} << value;
    }
    return mask;
}

int last_capability() {
    auto text = read_file("/proc/sys/kernel/cap_last_cap");
    if (text.ok()) {
        try {
            return std::stoi(*text);
        } catch (...) {
        }
    }
    return static_cast<int>(cap_max_bits()) - 1;
}

const char* drop_bounding_capabilities(uint64_t keep, int last_cap) {
    if (!effective_has(CAP_SETPCAP)) return nullptr;  // see the header: nothing to gain at exec
    // No PR_CAPBSET_READ first: dropping a capability that is not in the set succeeds, and every
    // number up to last_cap is valid, so asking first only doubled the 41 system calls here
    // (issue 18: they run in every launched child before its execve).
    for (int cap = 0; cap <= last_cap; ++cap) {
        if (has(keep, cap)) continue;
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0) return "drop bounding capability";
    }
    return nullptr;
}

const char* change_credentials(uid_t uid, gid_t gid, const gid_t* groups, size_t group_count,
                               bool keep_caps) {
    if (keep_caps && prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) != 0) return "keepcaps";
    // Raw system calls: glibc's wrappers broadcast id changes to all threads with signals, which
    // is neither needed nor safe in a freshly cloned child.
    if (syscall(SYS_setgroups, group_count, groups) != 0) return "setgroups";
    if (syscall(SYS_setresgid, gid, gid, gid) != 0) return "setresgid";
    if (syscall(SYS_setresuid, uid, uid, uid) != 0) return "setresuid";
    return nullptr;
}

const char* set_capability_sets(uint64_t keep) {
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2]{};
    for (int i = 0; i < 2; ++i) {
        auto word = static_cast<uint32_t>(keep >> (32 * i));
        data[i].effective = word;
        data[i].permitted = word;
        data[i].inheritable = word;
    }
    if (syscall(SYS_capset, &header, data) != 0) return "capset";
    return nullptr;
}

const char* set_ambient_capabilities(uint64_t keep, int last_cap) {
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0)
        return "clear ambient capabilities";
    for (int cap = 0; cap <= last_cap; ++cap) {
        if (!has(keep, cap)) continue;
        if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, cap, 0, 0) != 0)
            return "raise ambient capability";
    }
    return nullptr;
}

}  // namespace corral
