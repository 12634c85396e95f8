#include "sessions/files/inotify_budget.hpp"

#include <algorithm>
#include <cerrno>
#include <fstream>

namespace corral {
namespace {

/// The number in a /proc/sys file, or 0 when it cannot be read.
size_t read_sysctl(const char* path) {
    std::ifstream in(path);
    long long value = 0;
    if (!(in >> value) || value <= 0) return 0;
    return static_cast<size_t>(value);
}

}  // namespace

InotifyBudget::Limits InotifyBudget::from_host() {
    Limits limits;
    if (const size_t host = read_sysctl("/proc/sys/fs/inotify/max_user_instances"))
        limits.instances = std::max<size_t>(1, host / 2);
    if (const size_t host = read_sysctl("/proc/sys/fs/inotify/max_user_watches"))
        limits.directories = std::max<size_t>(1, host / 2);
    limits.instances_per_session = std::min(limits.instances_per_session, limits.instances);
    limits.directories_per_session = std::min(limits.directories_per_session, limits.directories);
    return limits;
}

Result<std::unique_ptr<InotifyBudget::Lease>> InotifyBudget::acquire(const std::string& sid) {
    State& state = *state_;
    SessionShare& share = state.sessions[sid];
    if (share.instances >= state.limits.instances_per_session) {
        if (share.instances == 0 && share.directories == 0) state.sessions.erase(sid);
        return sys_error(EUSERS, "this session has " +
                                     std::to_string(state.limits.instances_per_session) +
                                     " file watches open, its share; close one first");
    }
    if (state.instances >= state.limits.instances) {
        if (share.instances == 0 && share.directories == 0) state.sessions.erase(sid);
        return sys_error(EMFILE, "corrald's file watches are all in use (" +
                                     std::to_string(state.limits.instances) +
                                     ", half of the host's fs.inotify.max_user_instances); try "
                                     "again when one has ended");
    }
    ++share.instances;
    ++state.instances;
    return std::unique_ptr<Lease>(new Lease(state_, sid));
}

Status InotifyBudget::Lease::add_directory() {
    State& state = *budget_;
    SessionShare& share = state.sessions[sid_];
    if (share.directories >= state.limits.directories_per_session)
        return sys_error(E2BIG, "this session's file watches hold " +
                                    std::to_string(state.limits.directories_per_session) +
                                    " directories, its share; watch narrower paths");
    if (state.directories >= state.limits.directories)
        return sys_error(E2BIG, "corrald's file watches hold " +
                                    std::to_string(state.limits.directories) +
                                    " directories, half of the host's "
                                    "fs.inotify.max_user_watches; watch a narrower path");
    ++share.directories;
    ++state.directories;
    ++directories_;
    return {};
}

void InotifyBudget::Lease::remove_directories(size_t count) {
    State& state = *budget_;
    count = std::min(count, directories_);
    directories_ -= count;
    state.directories -= count;
    auto it = state.sessions.find(sid_);
    if (it != state.sessions.end()) it->second.directories -= count;
}

InotifyBudget::Lease::~Lease() {
    remove_directories(directories_);
    State& state = *budget_;
    --state.instances;
    auto it = state.sessions.find(sid_);
    if (it == state.sessions.end()) return;
    --it->second.instances;
    if (it->second.instances == 0 && it->second.directories == 0) state.sessions.erase(it);
}

}  // namespace corral
