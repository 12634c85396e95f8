#include "isolation/id_range.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <utility>
#include <vector>

namespace corral {
namespace {

struct Span {
    uint64_t first;
    uint64_t count;
};

/// The slots this process holds a lease on, by lock dir (id_range.hpp: skipped without a look):
/// one bit per slot, so that finding the first slot not held is a scan of a few words, not a
/// lookup per slot (beside 1,000 sessions ~0.3 ms of every creation's) nor a walk of a tree of
/// held slots (~0.2 ms: a cache miss per node; issue 18). Released from a noexcept destructor:
/// remove() neither copies the dir's name nor allocates (only add() does).
class HeldSlots {
  public:
    /// The first slot from `slot` on that this process holds no lease on (kIdRangeSlots: none).
    uint32_t first_unheld(const std::string& dir, uint32_t slot) {
        std::lock_guard lock(mutex_);
        auto found = held_.find(dir);
        if (found == held_.end()) return slot;
        const Bits& held = found->second;
        while (slot < kIdRangeSlots) {
            const uint64_t free = ~held[slot / 64] >> (slot % 64);
            if (free != 0) return std::min<uint32_t>(slot + std::countr_zero(free), kIdRangeSlots);
            slot = (slot / 64 + 1) * 64;
        }
        return kIdRangeSlots;
    }
    void add(const std::string& dir, uint32_t slot) {
        std::lock_guard lock(mutex_);
        auto& held = held_[dir];
        held[slot / 64] |= uint64_t{1} << (slot % 64);
    }
    void remove(const std::string& dir, uint32_t slot) noexcept {
        std::lock_guard lock(mutex_);
        if (auto found = held_.find(dir); found != held_.end())
            found->second[slot / 64] &= ~(uint64_t{1} << (slot % 64));
    }

  private:
    using Bits = std::array<uint64_t, (kIdRangeSlots + 63) / 64>;
    std::mutex mutex_;
    std::map<std::string, Bits, std::less<>> held_;
};

HeldSlots& held_slots() {
    static HeldSlots* slots = new HeldSlots;  // never destroyed: leases may outlive statics
    return *slots;
}

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

/// Whether `fd` is the file linked at `path` now (not one unlinked, or replaced, since it was
/// opened): a lock on an unlinked file guards nothing.
bool still_linked(int fd, const std::string& path) {
    struct stat held {
    }, named{};
    return ::fstat(fd, &held) == 0 && held.st_nlink > 0 && ::lstat(path.c_str(), &named) == 0 &&
           held.st_dev == named.st_dev && held.st_ino == named.st_ino;
}

/// Takes the slot whose lock file is `path`: its file locked, or an invalid descriptor when the
/// slot is taken (locked, or mapped by a live namespace).
///
/// The invariant that keeps this cheap: a lock file that exists was made by an allocator that
/// found the range free, so once unlocked it was released by its holder and needs no /proc
/// scan. Only a slot with no file (a first use, or a lock dir someone wiped under live holders)
/// is scanned, O(processes): once per slot for the host's lifetime, not at every session start
/// (issue 10, red-team round 3). The file is made under a temporary name, locked and scanned
/// there, and linked into place only when the range is free: no other allocator can lock it
/// unscanned, and a range in use leaves no file behind, so the next allocator scans it too.
Result<UniqueFd> lock_slot(const std::string& path, uid_t base) {
    for (int attempt = 0; attempt < 100; ++attempt) {
        UniqueFd fd(::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW));
        if (fd) {
            if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
                if (errno == EWOULDBLOCK) return UniqueFd{};
                return sys_error("uid range: flock `" + path + "`");
            }
            if (still_linked(fd.get(), path)) return fd;
            continue;  // unlinked or replaced between open and flock: look again
        }
        if (errno != ENOENT) return sys_error("uid range: open `" + path + "`");
        // A name of its own (mkostemp: O_EXCL, random), so a file a killed allocator left
        // behind is never in the way.
        std::string fresh = path + ".new.XXXXXX";
        UniqueFd made(::mkostemp(fresh.data(), O_CLOEXEC));
        if (!made) return sys_error("uid range: create `" + fresh + "`");
        // Nobody else knows this name: the lock cannot be contended, and it is held before the
        // file can be found under `path`.
        if (::flock(made.get(), LOCK_EX) != 0) {
            Error error = sys_error("uid range: flock `" + fresh + "`");
            ::unlink(fresh.c_str());
            return error;
        }
        // A lock dir removed under a live holder (systemd deletes a unit's RuntimeDirectory on
        // restart; an admin's `rm -rf`) must not give its slot to a second session.
        if (range_in_use(base, kIdRangeSize)) {
            ::unlink(fresh.c_str());
            return UniqueFd{};
        }
        const int linked = ::link(fresh.c_str(), path.c_str());
        const int error = errno;
        ::unlink(fresh.c_str());
        if (linked == 0) return made;
        if (error != EEXIST) return sys_error(error, "uid range: link `" + path + "`");
        // Another allocator linked its file first: look at that one.
    }
    return sys_error(EAGAIN, "uid range: `" + path + "` keeps changing");
}

}  // namespace

bool is_corral_range_id(uint32_t id) {
    return id >= kIdRangeFirst && id < kIdRangeFirst + kIdRangeSlots * kIdRangeSize;
}

IdRangeLease::IdRangeLease(IdRangeLease&& other) noexcept
    : lock_(std::move(other.lock_)), base_(other.base_), lock_dir_(std::move(other.lock_dir_)) {}

IdRangeLease& IdRangeLease::operator=(IdRangeLease&& other) noexcept {
    if (this != &other) {
        release();
        lock_ = std::move(other.lock_);
        base_ = other.base_;
        lock_dir_ = std::move(other.lock_dir_);
    }
    return *this;
}

IdRangeLease::~IdRangeLease() { release(); }

void IdRangeLease::release() noexcept {
    if (!lock_.valid()) return;
    held_slots().remove(lock_dir_, (base_ - kIdRangeFirst) / kIdRangeSize);
    lock_.reset();
}

Result<IdRangeLease> IdRangeLease::acquire(const std::string& lock_dir) {
    CORRAL_TRY(make_lock_dir(lock_dir), "uid range");
    std::vector<Span> taken;
    add_taken_ids("/etc/passwd", IdFile::accounts, taken);
    add_taken_ids("/etc/group", IdFile::accounts, taken);
    add_taken_ids("/etc/subuid", IdFile::subordinate, taken);
    add_taken_ids("/etc/subgid", IdFile::subordinate, taken);
    for (uint32_t slot = 0; slot < kIdRangeSlots; ++slot) {
        slot = held_slots().first_unheld(lock_dir, slot);
        if (slot >= kIdRangeSlots) break;
        uid_t base = kIdRangeFirst + slot * kIdRangeSize;
        if (overlaps(taken, base, kIdRangeSize)) continue;
        std::string path = lock_dir + "/" + std::to_string(slot) + ".lock";
        auto taken_slot = lock_slot(path, base);
        if (!taken_slot) return std::move(taken_slot.error());
        if (!taken_slot->valid()) continue;
        IdRangeLease lease;
        lease.lock_ = std::move(*taken_slot);
        lease.base_ = base;
        lease.lock_dir_ = lock_dir;
        held_slots().add(lock_dir, slot);
        return lease;
    }
    return sys_error(EAGAIN, "uid range: all " + std::to_string(kIdRangeSlots) +
                                 " session uid ranges under `" + lock_dir + "` are in use");
}

}  // namespace corral
