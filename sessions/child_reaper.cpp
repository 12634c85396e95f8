#include "sessions/child_reaper.hpp"

#include <dirent.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <fstream>
#include <string>

namespace corral {

/// A handed-over child and the watch of its pidfd (the PidRef keeps the descriptor: the watch
/// releases it before it would close it).
struct ChildReaper::HandedOver {
    HandedOver(boost::asio::io_context& io, PidRef ref)
        : child(std::move(ref)), exit(io, child.pidfd()) {}
    ~HandedOver() { (void)exit.release(); }
    PidRef child;
    boost::asio::posix::stream_descriptor exit;
};

ChildReaper::ChildReaper(boost::asio::io_context& io, bool subreaper)
    : io_(io), signals_(io, SIGCHLD, SIGPIPE) {
    if (subreaper) ::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    arm();
}

ChildReaper::~ChildReaper() {
    boost::system::error_code ignored;
    signals_.cancel(ignored);
    for (auto& handed : handed_over_) handed->exit.cancel(ignored);
}

void ChildReaper::hand_over(PidRef child) {
    owned_.erase(child.pid());
    if (!child.valid() || child.pidfd() < 0) return;
    if (auto status = child.try_wait(); !status || *status) return;  // gone already, or not ours
    handed_over_.push_back(std::make_unique<HandedOver>(io_, std::move(child)));
    auto where = std::prev(handed_over_.end());
    (*where)->exit.async_wait(boost::asio::posix::descriptor_base::wait_read,
                              [this, where](const boost::system::error_code& error) {
                                  if (error == boost::asio::error::operation_aborted) return;
                                  (void)(*where)->child.try_wait();
                                  handed_over_.erase(where);
                              });
}

void ChildReaper::reap_handed_over() {
    // Reaped only: each entry stays until its own wait's handler erases it (a completed wait may
    // already be queued for the loop, and its handler holds the entry's iterator). Its try_wait
    // there then finds nothing left to reap.
    for (auto& handed : handed_over_) (void)handed->child.try_wait();
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
    // On the main thread, orphans are all among its own children (child_reaper.hpp).
    const bool main_thread = ::gettid() == ::getpid();
    const int which = main_thread ? __WNOTHREAD : 0;
    for (;;) {
        siginfo_t info{};
        if (::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT | which) != 0 ||
            info.si_pid == 0)
            return;
        if (owned_.count(info.si_pid) != 0) {
            // waitid(P_ALL) keeps reporting this owned zombie until its owner reaps it; orphans
            // behind it are found through /proc instead, and once more when the owner has reaped.
            stopped_at_owned_ = true;
            reap_unowned_children(main_thread);
            return;
        }
        siginfo_t reaped{};
        if (::waitid(P_PID, static_cast<id_t>(info.si_pid), &reaped, WEXITED | WNOHANG) == 0 &&
            reaped.si_pid != 0) {
            ++orphans_reaped_;
        }
    }
}

// /proc/self/task/<tid>/children lists each thread's children (orphans are reparented to our
// main thread). Used only when an owned zombie hides the others from waitid(P_ALL).
void ChildReaper::reap_unowned_children(bool this_thread_only) {
    std::vector<std::string> tasks;
    if (this_thread_only) {
        tasks.push_back(std::to_string(::gettid()));
    } else {
        DIR* all = ::opendir("/proc/self/task");
        if (all == nullptr) return;
        while (dirent* entry = ::readdir(all))
            if (entry->d_name[0] != '.') tasks.emplace_back(entry->d_name);
        ::closedir(all);
    }
    std::vector<pid_t> candidates;
    for (const std::string& task : tasks) {
        std::ifstream children("/proc/self/task/" + task + "/children");
        pid_t pid = 0;
        while (children >> pid) candidates.push_back(pid);
    }
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
