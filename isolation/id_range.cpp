#include "isolation/id_range.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

namespace corral {
namespace {

struct Span {
    uint64_t first;
    uint64_t count;
};

enum class IdFile {
    accounts,     ///< passwd/group: "name:x:ID:..." names one id
    subordinate,  ///< subuid/subgid: "owner:FIRST:COUNT" names a range
};

/// The ids a passwd/group or subuid/subgid file hands out. Unreadable files add nothing.
void add_taken_ids(const char* path, IdFile kind, std::vector<Span>& out) {
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream fields(line);
        std::string first, second, third;
        if (!std::getline(fields, first, ':') || !std::getline(fields, second, ':') ||
            !std::getline(fields, third, ':'))
            continue;
        try {
            if (kind == IdFile::accounts)
                out.push_back(Span{std::stoull(third), 1});
            else
                out.push_back(Span{std::stoull(second), std::stoull(third)});
        } catch (...) {  // a malformed line names no id
        }
    }
}

bool overlaps(const std::vector<Span>& taken, uint64_t first, uint64_t count) {
    for (const auto& span : taken) {
        if (span.first < first + count && first < span.first + span.count) return true;
    }
    return false;
}

Status make_lock_dir(const std::string& dir) {
    // mkdir -p, 0755 root: the lock files are root's; nobody else can take or free a slot.
    for (size_t pos = 1; pos <= dir.size(); ++pos) {
        if (pos != dir.size() && dir[pos] != '/') continue;
        std::string part = dir.substr(0, pos);
        if (::mkdir(part.c_str(), 0755) != 0 && errno != EEXIST)
            return sys_error("mkdir `" + part + "`");
    }
    return {};
}

/// Whether a live process in a user namespace other than ours has host ids of
/// [first, first + count) in its uid_map or gid_map: a session's namespace holder, whatever
/// happened to the lock file. The lock alone is not proof: a lock dir removed under a live
/// holder (systemd deletes a unit's RuntimeDirectory on restart; an admin's `rm -rf /run/...`)
/// gives the next locker a fresh file and the same slot.
bool range_in_use(uint64_t first, uint64_t count) {
    char self_ns[64] = {};
    if (::readlink("/proc/self/ns/user", self_ns, sizeof self_ns - 1) <= 0) return false;
    DIR* proc = ::opendir("/proc");
    if (proc == nullptr) return false;
    bool used = false;
    while (dirent* entry = ::readdir(proc)) {
        if (entry->d_name[0] < '1' || entry->d_name[0] > '9') continue;
        const std::string base = std::string("/proc/") + entry->d_name;
        char ns[64] = {};
        if (::readlink((base + "/ns/user").c_str(), ns, sizeof ns - 1) <= 0) continue;
        if (std::strcmp(ns, self_ns) == 0) continue;  // our namespace: the identity map
        for (const char* map : {"/uid_map", "/gid_map"}) {
            std::ifstream in(base + map);
            uint64_t inside = 0, outside = 0, length = 0;
            while (in >> inside >> outside >> length) {
                if (outside < first + count && first < outside + length) used = true;
            }
        }
        if (used) break;
    }
    ::closedir(proc);
    return used;
}

}  // namespace

bool is_corral_range_id(uint32_t id) {
    return id >= kIdRangeFirst && id < kIdRangeFirst + kIdRangeSlots * kIdRangeSize;
}

Result<IdRangeLease> IdRangeLease::acquire(const std::string& lock_dir) {
    CORRAL_TRY(make_lock_dir(lock_dir), "uid range");
    std::vector<Span> taken;
    add_taken_ids("/etc/passwd", IdFile::accounts, taken);
    add_taken_ids("/etc/group", IdFile::accounts, taken);
    add_taken_ids("/etc/subuid", IdFile::subordinate, taken);
    add_taken_ids("/etc/subgid", IdFile::subordinate, taken);
    for (uint32_t slot = 0; slot < kIdRangeSlots; ++slot) {
        uid_t base = kIdRangeFirst + slot * kIdRangeSize;
        if (overlaps(taken, base, kIdRangeSize)) continue;
        std::string path = lock_dir + "/" + std::to_string(slot) + ".lock";
        UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
        if (!fd) return sys_error("uid range: open `" + path + "`");
        if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
            if (errno == EWOULDBLOCK) continue;
            return sys_error("uid range: flock `" + path + "`");
        }
        // Locked, yet a live session may still map it (its lock file was deleted): skip it.
        // Looked at under our lock, so no other allocator hands the slot out meanwhile.
        if (range_in_use(base, kIdRangeSize)) continue;
        IdRangeLease lease;
        lease.lock_ = std::move(fd);
        lease.base_ = base;
        return lease;
    }
    return sys_error(EAGAIN, "uid range: all " + std::to_string(kIdRangeSlots) +
                                 " session uid ranges under `" + lock_dir + "` are in use");
}

}  // namespace corral
