#include "isolation/setup_watchdog.hpp"

#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "base/thread_without_signals.hpp"

namespace corral {
namespace {

using Clock = std::chrono::steady_clock;

/// A child that has not exec'd after this long gets its SetupDeadline (which reads its CPU time
/// from /proc/<pid>/schedstat, so it needs the pid); almost every child has exec'd long before,
/// and its watch costs nothing but a push and a pop under the lock.
constexpr auto kFirstCheck = std::chrono::milliseconds(50);

class SetupWatchdog {
  public:
    Status start() {
        // The thread lives in the process that started it; a fork of that process (which has
        // only the forking thread, and maybe our lock held) has no watchdog.
        const pid_t owner = owner_.load();
        if (owner != 0) {
            if (owner == ::getpid()) return {};
            return sys_error(ESRCH, "the setup watchdog runs in the process we were forked from");
        }
        std::lock_guard lock(mutex_);
        if (started_) return {};
        try {
            start_thread_without_signals([this] { watch(); }).detach();
        } catch (const std::system_error& e) {
            return sys_error(e.code().value(), "start the setup watchdog");
        }
        started_ = true;
        owner_ = ::getpid();
        return {};
    }

    void arm(WatchedLaunch& launch) {
        std::lock_guard lock(mutex_);
        launch.first_check = Clock::now() + kFirstCheck;
        launch.deadline.reset();
        launch.killed = false;
        watched_.push_back(&launch);
        armed_since_wake_ = true;
        if (launch.first_check < sleeping_until_) wake_.notify_one();
    }

    std::optional<SetupDeadline> disarm(WatchedLaunch& launch) {
        std::lock_guard lock(mutex_);
        watched_.erase(std::remove(watched_.begin(), watched_.end(), &launch), watched_.end());
        if (launch.killed) return std::move(launch.deadline);
        return std::nullopt;
    }

  private:
    [[noreturn]] void watch() {
        std::unique_lock lock(mutex_);
        for (;;) {
            const auto now = Clock::now();
            auto next = Clock::time_point::max();
            for (WatchedLaunch* launch : watched_) {
                if (launch->killed) continue;
                if (!launch->deadline) {
                    if (now < launch->first_check || launch->pid <= 0) {
                        next = std::min(next, std::max(launch->first_check, now + kFirstCheck));
                        continue;
                    }
                    launch->deadline.emplace(launch->limit, launch->pid);
                }
                const int left = launch->deadline->poll_timeout();
                if (left > 0 || !launch->deadline->expired()) {
                    next = std::min(next, now + std::chrono::milliseconds(std::max(left, 1)));
                    continue;
                }
                // By pid, not through the pidfd: that is in the launching thread's descriptor
                // table, which may not be ours (the launch worker has its own). The pid cannot
                // have been recycled: the child is unreaped until the launcher has disarmed us,
                // and nothing else waits for a child whose pid the launcher has not returned
                // (corrald's ChildReaper runs on its loop, which is waiting for this launch).
                ::kill(launch->pid, SIGKILL);
                launch->killed = true;
            }
            // Launches come in runs (a client's `run` after `run`): with nothing to watch after
            // one, sleep one first-check period before sleeping for good, so the next launches
            // (each first checked a period after it is armed) find us due to wake before their
            // check and need no wake-up. Waking us per launch was a futex wake and a switch to
            // this thread, contending for the lock with the launch, every time (issue 18).
            if (next == Clock::time_point::max() && armed_since_wake_) next = now + kFirstCheck;
            armed_since_wake_ = false;
            sleeping_until_ = next;
            if (next == Clock::time_point::max())
                wake_.wait(lock);
            else
                wake_.wait_until(lock, next);
            sleeping_until_ = Clock::time_point::min();
        }
    }

    std::mutex mutex_;
    std::condition_variable wake_;
    bool started_ = false;
    std::atomic<pid_t> owner_{0};
    std::vector<WatchedLaunch*> watched_;
    /// Whether arm() was called since the thread last woke (then it lingers: watch()).
    bool armed_since_wake_ = false;
    /// When the thread wakes next on its own (max: not at all; min: it is awake).
    Clock::time_point sleeping_until_ = Clock::time_point::min();
};

/// Leaked on purpose, as the launch worker: its thread waits until the process exits.
SetupWatchdog& watchdog() {
    static SetupWatchdog* instance = new SetupWatchdog();
    return *instance;
}

}  // namespace

Status start_setup_watchdog() {
    return watchdog().start();
}

void arm_setup_watchdog(WatchedLaunch& launch) {
    watchdog().arm(launch);
}

std::optional<SetupDeadline> disarm_setup_watchdog(WatchedLaunch& launch) {
    return watchdog().disarm(launch);
}

}  // namespace corral
