#include "isolation/id_range.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
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
        IdRangeLease lease;
        lease.lock_ = std::move(fd);
        lease.base_ = base;
        return lease;
    }
    return sys_error(EAGAIN, "uid range: all " + std::to_string(kIdRangeSlots) +
                                 " session uid ranges under `" + lock_dir + "` are in use");
}

}  // namespace corral
