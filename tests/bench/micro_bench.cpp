// Google Benchmark micro-benchmarks of kernel steps a corral launch is made of, to explain the
// launch table: waiting for cgroup.events with an inotify instance (whose close() waits for an
// SRCU grace period) against poll(POLLPRI) on the file itself, creating/removing a cgroup, and
// joining a v1 cgroup (the first write to a v1 cgroup.procs waits for an RCU grace period; the
// same join through `tasks` does not).
// Needs root and a cgroup2 mount; a benchmark that cannot run here says why (SkipWithError).

#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "tests/bench/cgroup_tree.hpp"

namespace {

/// A scratch cgroup beneath our own v2 cgroup for the lifetime of one benchmark.
struct ScratchCgroup {
    std::string path;
    ScratchCgroup() {
        std::string own = corral::bench::own_v2_cgroup();
        if (own.empty()) return;
        path = own + "/corral-bench-micro-" + std::to_string(::getpid());
        if (::mkdir(path.c_str(), 0755) != 0) path.clear();
    }
    ~ScratchCgroup() {
        if (!path.empty()) corral::bench::remove_cgroup_tree(path);
    }
};

/// What corral did per wait for `populated 0`: inotify_init1 + add_watch + read + close.
void BM_WaitEmpty_InotifyInstance(benchmark::State& state) {
    ScratchCgroup cg;
    if (cg.path.empty()) return state.SkipWithError("no cgroup2 / not root");
    std::string events = cg.path + "/cgroup.events";
    for (auto _ : state) {
        int in = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        ::inotify_add_watch(in, events.c_str(), IN_MODIFY);
        int fd = ::open(events.c_str(), O_RDONLY | O_CLOEXEC);
        char buf[128];
        benchmark::DoNotOptimize(::read(fd, buf, sizeof buf));
        ::close(fd);
        ::close(in);  // fsnotify_destroy_group: waits for an SRCU grace period
    }
}
BENCHMARK(BM_WaitEmpty_InotifyInstance)->UseRealTime()->Unit(benchmark::kMillisecond);

/// The alternative: kernfs wakes poll(POLLPRI) on cgroup.events itself; no instance to destroy.
void BM_WaitEmpty_PollPri(benchmark::State& state) {
    ScratchCgroup cg;
    if (cg.path.empty()) return state.SkipWithError("no cgroup2 / not root");
    std::string events = cg.path + "/cgroup.events";
    for (auto _ : state) {
        int fd = ::open(events.c_str(), O_RDONLY | O_CLOEXEC);
        char buf[128];
        benchmark::DoNotOptimize(::read(fd, buf, sizeof buf));
        pollfd p{fd, POLLPRI, 0};
        benchmark::DoNotOptimize(::poll(&p, 1, 0));
        ::close(fd);
    }
}
BENCHMARK(BM_WaitEmpty_PollPri)->UseRealTime()->Unit(benchmark::kMicrosecond);

/// One inotify instance kept open, a watch added and removed per wait (no close per wait).
void BM_WaitEmpty_SharedInotifyRmWatch(benchmark::State& state) {
    ScratchCgroup cg;
    if (cg.path.empty()) return state.SkipWithError("no cgroup2 / not root");
    std::string events = cg.path + "/cgroup.events";
    int in = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    for (auto _ : state) {
        int wd = ::inotify_add_watch(in, events.c_str(), IN_MODIFY);
        ::inotify_rm_watch(in, wd);
    }
    ::close(in);
}
BENCHMARK(BM_WaitEmpty_SharedInotifyRmWatch)->UseRealTime()->Unit(benchmark::kMicrosecond);

/// mkdir + rmdir of an empty v2 cgroup.
void BM_V2CgroupMkdirRmdir(benchmark::State& state) {
    ScratchCgroup cg;
    if (cg.path.empty()) return state.SkipWithError("no cgroup2 / not root");
    std::string child = cg.path + "/c";
    for (auto _ : state) {
        ::mkdir(child.c_str(), 0755);
        ::rmdir(child.c_str());
    }
}
BENCHMARK(BM_V2CgroupMkdirRmdir)->UseRealTime()->Unit(benchmark::kMicrosecond);

/// fork + the child writing itself into a cgroup's cgroup.procs + exit + wait: `v1` selects the
/// v1 pids hierarchy (hybrid hosts), otherwise the v2 scratch cgroup. The difference is the cost of
/// a migration under cgroup_threadgroup_rwsem (an RCU grace period on a write after idle).
void fork_join_exit(benchmark::State& state, const std::string& procs) {
    for (auto _ : state) {
        // Idle first, as between two launches: back-to-back writes share one grace period.
        state.PauseTiming();
        ::usleep(100000);
        state.ResumeTiming();
        pid_t pid = ::fork();
        if (pid == 0) {
            int fd = ::open(procs.c_str(), O_WRONLY);
            _exit(fd >= 0 && ::write(fd, "0", 1) == 1 ? 0 : 1);
        }
        int status = 0;
        ::waitpid(pid, &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            return state.SkipWithError("join failed");
    }
}

void BM_ForkJoinExit_V2(benchmark::State& state) {
    ScratchCgroup cg;
    if (cg.path.empty()) return state.SkipWithError("no cgroup2 / not root");
    fork_join_exit(state, cg.path + "/cgroup.procs");
}
BENCHMARK(BM_ForkJoinExit_V2)->Iterations(20)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_ForkJoinExit_V1Pids(benchmark::State& state) {
    std::string dir = "/sys/fs/cgroup/pids/corral-bench-micro-" + std::to_string(::getpid());
    if (::mkdir(dir.c_str(), 0755) != 0) return state.SkipWithError("no v1 pids hierarchy here");
    fork_join_exit(state, dir + "/cgroup.procs");
    ::rmdir(dir.c_str());
}
BENCHMARK(BM_ForkJoinExit_V1Pids)->Iterations(20)->UseRealTime()->Unit(benchmark::kMillisecond);

/// The same join through the v1 `tasks` file, as the launcher's child does it (it is
/// single-threaded): "0" there moves only the writing thread, which the kernel does without
/// cgroup_threadgroup_rwsem, so no grace period (isolation/limits_hybrid_v1.cpp).
void BM_ForkJoinExit_V1PidsTasks(benchmark::State& state) {
    std::string dir = "/sys/fs/cgroup/pids/corral-bench-micro-" + std::to_string(::getpid());
    if (::mkdir(dir.c_str(), 0755) != 0) return state.SkipWithError("no v1 pids hierarchy here");
    fork_join_exit(state, dir + "/tasks");
    ::rmdir(dir.c_str());
}
BENCHMARK(BM_ForkJoinExit_V1PidsTasks)
    ->Iterations(20)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

/// Baseline for the two above: fork + exit + wait, no cgroup write.
void BM_ForkExit(benchmark::State& state) {
    for (auto _ : state) {
        pid_t pid = ::fork();
        if (pid == 0) _exit(0);
        ::waitpid(pid, nullptr, 0);
    }
}
BENCHMARK(BM_ForkExit)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
