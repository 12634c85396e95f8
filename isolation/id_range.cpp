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

/// Ids named in the third field of passwd/group lines ("name:x:ID:...").
void add_account_ids(const char* path, std::vector<Span>& out) {
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream fields(line);
        std::string name, password, id;
        if (!std::getline(fields, name, ':') || !std::getline(fields, password, ':') ||
            !std::getline(fields, id, ':'))
            continue;
        try {
            out.push_back(Span{std::stoull(id), 1});
        } catch (...) {
        }
    }
}

/// Ranges of subordinate-id files ("owner:FIRST:COUNT").
void add_subordinate_ranges(const char* path, std::vector<Span>& out) {
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream fields(line);
        std::string owner, first, count;
        if (!std::getline(fields, owner, ':') || !std::getline(fields, first, ':') ||
            !std::getline(fields, count, ':'))
            continue;
        try {
            out.push_back(Span{std::stoull(first), std::stoull(count)});
        } catch (...) {
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
    add_account_ids("/etc/passwd", taken);
    add_account_ids("/etc/group", taken);
    add_subordinate_ranges("/etc/subuid", taken);
    add_subordinate_ranges("/etc/subgid", taken);
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
