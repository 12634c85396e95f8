// What a private network namespace costs a session start. Prints medians (µs) of:
//   - a bare clone + exit + wait (baseline)
//   - the same child with pid/mount/ipc/uts namespaces (a session without network isolation)
//   - the same plus CLONE_NEWNET and `lo` up (a `network: isolated` session's holder)
//   - entering the namespace with a NetnsRunner (what the daemon adds per isolated session)
//   - a burst: 50 isolated holders created back to back (network namespace teardown runs in a
//     kernel work queue and can slow creations that follow)
// Run as root. Never asserts anything.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <vector>

#include "isolation/namespaces.hpp"
#include "sessions/network/netns_runner.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double micros(Clock::duration d) {
    return std::chrono::duration<double, std::micro>(d).count();
}

double median(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    return values[values.size() / 2];
}

/// clone with `flags`, the child brings lo up when it has a network namespace, exits; waits.
void clone_and_reap(int flags) {
    long pid = ::syscall(SYS_clone, SIGCHLD | flags, nullptr, nullptr, nullptr, nullptr);
    if (pid == 0) {
        if ((flags & CLONE_NEWNET) && !corral::bring_loopback_up()) ::_exit(1);
        ::_exit(0);
    }
    if (pid < 0) {
        std::perror("clone");
        std::exit(1);
    }
    int status = 0;
    ::waitpid(static_cast<pid_t>(pid), &status, 0);
}

double measure(int iterations, const std::function<void()>& step) {
    // Network namespaces are torn down later by a kernel work queue; let the previous phase's
    // teardown finish so each phase starts from a quiet kernel.
    ::sleep(1);
    std::vector<double> samples;
    for (int i = 0; i < iterations; ++i) {
        auto start = Clock::now();
        step();
        samples.push_back(micros(Clock::now() - start));
    }
    return median(samples);
}

/// A paused child in a new network namespace (lo up); returns once lo is up.
pid_t paused_netns_child(int flags = CLONE_NEWNET) {
    int ready[2];
    if (::pipe2(ready, O_CLOEXEC) != 0) std::exit(1);
    long pid = ::syscall(SYS_clone, SIGCHLD | flags, nullptr, nullptr, nullptr, nullptr);
    if (pid == 0) {
        if (flags & CLONE_NEWNET) corral::bring_loopback_up();
        char c = 1;
        (void)::write(ready[1], &c, 1);
        for (;;) ::pause();
    }
    ::close(ready[1]);
    char c;
    (void)::read(ready[0], &c, 1);
    ::close(ready[0]);
    return static_cast<pid_t>(pid);
}

/// Median time until a held (not yet destroyed) holder is ready; all are killed afterwards, so
/// this is the creation cost without teardown.
double measure_creation_only(int iterations, int flags) {
    ::sleep(1);
    std::vector<double> samples;
    std::vector<pid_t> held;
    for (int i = 0; i < iterations; ++i) {
        auto start = Clock::now();
        held.push_back(paused_netns_child(flags));
        samples.push_back(micros(Clock::now() - start));
    }
    for (pid_t pid : held) ::kill(pid, SIGKILL);
    for (pid_t pid : held) ::waitpid(pid, nullptr, 0);
    return median(samples);
}

}  // namespace

int main() {
    if (::geteuid() != 0) {
        std::fprintf(stderr, "netns_cost: run as root\n");
        return 2;
    }
    constexpr int kIterations = 200;
    const int session_flags = CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS;
    double bare = measure(kIterations, [] { clone_and_reap(0); });
    double without_net = measure(kIterations, [&] { clone_and_reap(session_flags); });
    double with_net = measure(kIterations, [&] { clone_and_reap(session_flags | CLONE_NEWNET); });
    double net_only = measure(kIterations, [] { clone_and_reap(CLONE_NEWNET); });
    double create_without_net = measure_creation_only(100, session_flags);
    double create_with_net = measure_creation_only(100, session_flags | CLONE_NEWNET);

    pid_t holder = paused_netns_child();
    double thread_start = measure(kIterations, [&] {
        auto fd = corral::open_network_namespace(holder, -1);
        auto thread = corral::NetnsRunner::start(std::move(*fd));
        (*thread)->stop();
    });
    ::kill(holder, SIGKILL);
    ::waitpid(holder, nullptr, 0);

    auto burst_start = Clock::now();
    for (int i = 0; i < 50; ++i) clone_and_reap(CLONE_NEWNET);
    ::sleep(1);
    double burst_each = micros(Clock::now() - burst_start) / 50;

    std::printf("%-58s %10s %8s\n", "step (median of 200)", "µs", "ratio");
    std::printf("%-58s %10.1f %8.2f\n", "clone+exit+wait, no namespaces (baseline)", bare, 1.0);
    std::printf("%-58s %10.1f %8.2f\n", "  + pid/mount/ipc/uts namespaces", without_net,
                without_net / bare);
    std::printf("%-58s %10.1f %8.2f\n", "  + pid/mount/ipc/uts + network namespace, lo up",
                with_net, with_net / bare);
    std::printf("%-58s %10.1f %8.2f\n", "network namespace only, lo up", net_only, net_only / bare);
    std::printf("%-58s %10.1f %8.2f\n",
                "holder ready, pid/mount/ipc/uts (no teardown, median of 100)", create_without_net,
                create_without_net / bare);
    std::printf("%-58s %10.1f %8.2f\n",
                "holder ready, + network namespace (no teardown, median of 100)", create_with_net,
                create_with_net / bare);
    std::printf("%-58s %10.1f %8.2f\n", "NetnsRunner start+stop (daemon side, per session)",
                thread_start, thread_start / bare);
    std::printf("%-58s %10.1f %8.2f\n", "burst of 50 network namespaces, mean each", burst_each,
                burst_each / bare);
    return 0;
}
