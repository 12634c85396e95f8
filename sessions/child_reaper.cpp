#include "sessions/child_reaper.hpp"

#include <dirent.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include <csignal>
#include <fstream>
#include <string>

namespace corral {

ChildReaper::ChildReaper(boost::asio::io_context& io, bool subreaper)
    : signals_(io, SIGCHLD, SIGPIPE) {
    if (subreaper) ::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    arm();
}

ChildReaper::~ChildReaper() {
    boost::system::error_code ignored;
    signals_.cancel(ignored);
}

void ChildReaper::add_owned(pid_t pid) {
    owned_.insert(pid);
}

void ChildReaper::remove_owned(pid_t pid) {
    owned_.erase(pid);
    // Only a round that stopped at an owned zombie can have left an orphan behind it. Otherwise
    // every zombie there was got reaped, and one that came since sends SIGCHLD: each round walks
    // every child of corrald (waitid(P_ALL): 0.45 ms beside 1,000 sessions' holders), and every
    // finished run used to cost two (issue 18).
    if (stopped_at_owned_) reap_orphans();
}

void ChildReaper::arm() {
    signals_.async_wait([this](const boost::system::error_code& error, int signal) {
        if (error) return;  // cancelled: the reaper is going away
        if (signal == SIGCHLD) reap_orphans();
        arm();
    });
}

void ChildReaper::reap_orphans() {
    stopped_at_owned_ = false;
    for (;;) {
        siginfo_t info{};
        if (::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid == 0) return;
        if (owned_.count(info.si_pid) != 0) {
            // waitid(P_ALL) keeps reporting this owned zombie until its owner reaps it; orphans
            // behind it are found through /proc instead, and once more when the owner has reaped.
            stopped_at_owned_ = true;
            reap_unowned_children_of_all_threads();
            return;
        }
        siginfo_t reaped{};
        if (::waitid(P_PID, static_cast<id_t>(info.si_pid), &reaped, WEXITED | WNOHANG) == 0 &&
            reaped.si_pid != 0) {
            ++orphans_reaped_;
        }
    }
}

// /proc/self/task/<tid>/children lists each thread's children (orphans are reparented to one of
// our threads). Used only when an owned zombie hides the others from waitid(P_ALL).
void ChildReaper::reap_unowned_children_of_all_threads() {
    DIR* tasks = ::opendir("/proc/self/task");
    if (tasks == nullptr) return;
    std::vector<pid_t> candidates;
    while (dirent* entry = ::readdir(tasks)) {
        if (entry->d_name[0] == '.') continue;
        std::ifstream children(std::string("/proc/self/task/") + entry->d_name + "/children");
        pid_t pid = 0;
        while (children >> pid) candidates.push_back(pid);
    }
    ::closedir(tasks);
    for (pid_t pid : candidates) {
        if (owned_.count(pid) != 0) continue;
        siginfo_t reaped{};
        if (::waitid(P_PID, static_cast<id_t>(pid), &reaped, WEXITED | WNOHANG) == 0 &&
            reaped.si_pid != 0) {
            ++orphans_reaped_;
        }
    }
}

}  // namespace corral
