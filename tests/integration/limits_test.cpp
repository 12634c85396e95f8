// Limits against the real kernel (root), with the backend this host gets (hybrid-v1 here: the
// v2 tree tracks and kills, v1 controllers enforce). Every test's cgroups, v1 and v2, are
// removed even when an assertion fails, and TearDown checks that nothing is left anywhere.
#include "isolation/limits.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <ctime>
#include <functional>
#include <map>
#include <sstream>
#include <thread>

#include "base/directory_listing.hpp"
#include "base/file_io.hpp"
#include "isolation/cgroup.hpp"
#include "isolation/cgroup_placement.hpp"
#include "isolation/launcher.hpp"
#include "isolation/pid_ref.hpp"
#include "isolation/systemd_scope.hpp"
#include "tests/integration/support/test_helpers.hpp"

namespace corral {
namespace {

using test_support::drain;
using test_support::exists;
using test_support::unique_name;

using namespace std::chrono_literals;



double monotonic_seconds() {
    timespec ts{};
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

/// Polls `fds` until one is readable; false at the hang bound.
bool wait_readable(const std::vector<int>& fds, int timeout_ms) {
    std::vector<pollfd> pfds;
    for (int fd : fds) pfds.push_back({fd, POLLIN, 0});
    return ::poll(pfds.data(), pfds.size(), timeout_ms) > 0;
}

class LimitsTest : public ::testing::Test {
  protected:
    void SetUp() override {
        if (::geteuid() != 0) GTEST_SKIP() << "needs root";
        // Placed as corral run is (issue 11.5): from a cgroup shared with other processes (a
        // login shell's scope) the session goes where controllers may be enabled.
        auto host = discover_placed_cgroup_host(PlacementOptions{false, "corral-test", scope_requester()});
        ASSERT_TRUE(host) << host.error().describe();
        host_ = *host;
        name_ = unique_name();
        auto cgroup = Cgroup::create(host_.v2_own, name_);
        ASSERT_TRUE(cgroup) << cgroup.error().describe();
        session_ = std::move(*cgroup);
        backend_ = make_limit_backend(host_);
    }

    void TearDown() override {
        if (name_.empty()) return;
        if (session_.valid()) {
            EXPECT_TRUE(session_.kill_all());
            EXPECT_TRUE(session_.wait_until_empty(10s));
        }
        limits_.reset();  // removes the v1 cgroups
        task_ = Cgroup{};  // its leaf, killed and removed
        EXPECT_TRUE(session_.remove());
        EXPECT_FALSE(exists(host_.v2_own + "/" + name_)) << "v2 cgroup left behind";
        for (const auto& [controller, dir] : host_.v1_own)
            EXPECT_FALSE(exists(dir + "/corral-" + name_)) << controller << " cgroup left behind";
    }

    Status apply(const Limits& limits, Enforcement enforcement = Enforcement::strict) {
        auto applied = backend_->apply(session_, name_, limits, enforcement);
        if (!applied) return std::move(applied.error());
        limits_ = std::move(*applied);
        return {};
    }

    /// Forks a child that joins the session (the v2 cgroup.procs of its leaf `task`, then "0"
    /// into every v1 join fd, `tasks`, as the launcher's child does) and runs `body`; returns once
    /// it has joined. A leaf, as corral's processes have: on v2 the backend sets the session's
    /// subtree_control, and no process may then join the session cgroup itself (EBUSY).
    PidRef start(std::function<void()> body) {
        int ready[2];
        if (::pipe2(ready, O_CLOEXEC) != 0) return {};
        if (!task_.valid()) {
            auto leaf = session_.create_child("task");
            if (!leaf) {
                ADD_FAILURE() << leaf.error().describe();
                return {};
            }
            task_ = std::move(*leaf);
        }
        std::string procs = task_.path() + "/cgroup.procs";
        std::vector<int> joins = limits_ ? limits_->join_fds() : std::vector<int>{};
        pid_t pid = ::fork();
        if (pid == 0) {
            ::close(ready[0]);
            int fd = ::open(procs.c_str(), O_WRONLY | O_CLOEXEC);
            if (fd < 0 || ::write(fd, "0", 1) != 1) ::_exit(120);
            for (int join : joins)
                if (::write(join, "0", 1) != 1) ::_exit(121);
            ::close(ready[1]);
            body();
            ::_exit(0);
        }
        ::close(ready[1]);
        char byte;
        while (::read(ready[0], &byte, 1) < 0 && errno == EINTR) {
        }
        ::close(ready[0]);
        return PidRef(pid, UniqueFd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0))));
    }

    CgroupHost host_;
    std::string name_;
    Cgroup session_;
    Cgroup task_;  ///< session_/task: the leaf start() puts its children in
    std::unique_ptr<LimitBackend> backend_;
    std::unique_ptr<SessionLimits> limits_;
};

TEST_F(LimitsTest, Limits_PidsLimitContainsAForkBomb) {
    if (!backend_->support().get(LimitKind::pids).enforceable)
        GTEST_SKIP() << "pids: " << backend_->support().get(LimitKind::pids).detail;
    Limits limits;
    limits.pids = 64;
    ASSERT_TRUE(apply(limits));
    PidRef bomb = start([] {
        for (;;)
            if (::fork() < 0) ::usleep(1000);  // refused at the limit: back off a little
    });
    ASSERT_TRUE(bomb.valid());
    // Wait for the kernel to refuse a fork (a pids.events change wakes us; hang bound 30 s).
    LimitEvents events;
    for (double deadline = monotonic_seconds() + 30; monotonic_seconds() < deadline;) {
        events = limits_->read_events();
        if (events.pids_limit_hits > 0) break;
        auto fds = limits_->event_fds();
        ASSERT_FALSE(fds.empty());
        wait_readable(fds, 1000);
    }
    EXPECT_GT(events.pids_limit_hits, 0u);
    auto usage = limits_->usage();
    ASSERT_TRUE(usage.pids_current.has_value());
    EXPECT_LE(*usage.pids_current, 64u);
    auto pids = session_.pids();
    ASSERT_TRUE(pids);
    EXPECT_LE(pids->size(), 64u) << "the v2 tree sees the same contained set";
    EXPECT_GT(usage.pids_limit_hits, 0u);

    ASSERT_TRUE(session_.kill_all());
    ASSERT_TRUE(session_.wait_until_empty(10s));
    auto exit = bomb.wait();
    ASSERT_TRUE(exit);
    EXPECT_EQ(exit->code, SIGKILL);
}

TEST_F(LimitsTest, Limits_MemoryLimitOomKillsAnAllocatingChild) {
    if (!backend_->support().get(LimitKind::memory).enforceable)
        GTEST_SKIP() << "memory: " << backend_->support().get(LimitKind::memory).detail;
    Limits limits;
    limits.memory = 64ull << 20;
    ASSERT_TRUE(apply(limits)) << "swap off must be enforceable too";
    PidRef hog = start([] {
        const size_t chunk = 1 << 20;
        for (int i = 0; i < 512; ++i) {  // 512 MiB, touched page by page
            char* block = static_cast<char*>(::malloc(chunk));
            if (!block) ::_exit(3);
            std::memset(block, 1, chunk);
        }
        ::_exit(0);
    });
    auto exit = hog.wait();
    ASSERT_TRUE(exit);
    EXPECT_FALSE(exit->exited) << "the allocation must not succeed";
    EXPECT_EQ(exit->code, SIGKILL);
    EXPECT_TRUE(wait_readable(limits_->event_fds(), 5000)) << "the OOM event fd fired";
    auto events = limits_->read_events();
    EXPECT_GE(events.oom_kills, 1u);
    auto usage = limits_->usage();
    ASSERT_TRUE(usage.memory_peak.has_value());
    EXPECT_GT(*usage.memory_peak, 32ull << 20) << "it did allocate up to the limit";
    EXPECT_LE(*usage.memory_peak, (64ull << 20) + (4ull << 20));
    EXPECT_GE(usage.oom_kills, 1u);
}

TEST_F(LimitsTest, Limits_CpuQuotaHoldsABusyLoopNearItsShare) {
    if (!backend_->support().get(LimitKind::cpu).enforceable)
        GTEST_SKIP() << "cpu: " << backend_->support().get(LimitKind::cpu).detail;
    Limits limits;
    limits.cpu = 0.2;
    ASSERT_TRUE(apply(limits));
    double started = monotonic_seconds();
    PidRef busy = start([] {
        double end = monotonic_seconds() + 2.0;
        while (monotonic_seconds() < end) {
        }
    });
    ASSERT_TRUE(busy.wait());
    double wall = monotonic_seconds() - started;
    auto usage = limits_->usage();
    double share = static_cast<double>(usage.cpu_total_usec) / 1e6 / wall;
    // Generous bounds: a fifth of a core, allowing for the first period and accounting slack.
    RecordProperty("cpu_share", std::to_string(share));
    EXPECT_LE(share, 0.35) << "cpu " << usage.cpu_total_usec << " us over " << wall << " s";
    EXPECT_GE(share, 0.05) << "it did run";
    EXPECT_GT(usage.cpu_user_usec, 0u);
}

TEST_F(LimitsTest, Limits_StrictRefusesAnUnenforceableLimitByName) {
    auto support = backend_->support();
    std::optional<LimitKind> missing;
    for (LimitKind kind : {LimitKind::io, LimitKind::cpu, LimitKind::pids, LimitKind::memory})
        if (!support.get(kind).enforceable) missing = kind;
    if (!missing) GTEST_SKIP() << "this host enforces every limit kind";
    Limits limits;
    limits.io_weight = 100;
    limits.cpu = 1;
    limits.pids = 10;
    limits.memory = 1ull << 30;
    auto refused = backend_->apply(session_, name_, limits, Enforcement::strict);
    ASSERT_FALSE(refused);
    const std::string message = refused.error().describe();
    EXPECT_NE(message.find(std::string("`") + limit_name(*missing) + "`"), std::string::npos)
        << message;
    EXPECT_NE(message.find(support.get(*missing).detail), std::string::npos) << message;

    auto lenient = backend_->apply(session_, name_, limits, Enforcement::best_effort);
    ASSERT_TRUE(lenient) << lenient.error().describe();
    bool listed = false;
    for (const auto& note : (*lenient)->not_enforced())
        listed = listed || note.rfind(std::string(limit_name(*missing)) + ": ", 0) == 0;
    EXPECT_TRUE(listed) << "best-effort lists what it could not enforce";
    limits_ = std::move(*lenient);
}

TEST_F(LimitsTest, Limits_UsageIsPlausibleWithoutAnyLimit) {
    ASSERT_TRUE(apply(Limits{}));
    PidRef child = start([] {
        std::vector<char> block(16 << 20, 1);  // 16 MiB touched
        timespec ts{};
        do {
            ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
        } while (ts.tv_sec == 0 && ts.tv_nsec < 200'000'000);
        (void)!::write(-1, block.data(), 1);
    });
    ASSERT_TRUE(child.wait());
    auto usage = limits_->usage();
    EXPECT_GE(usage.cpu_total_usec, 100'000u);
    if (usage.memory_peak) {
        EXPECT_GE(*usage.memory_peak, 8ull << 20);
    }
    if (usage.pids_peak) {
        EXPECT_GE(*usage.pids_peak, 1u);
    }
    EXPECT_EQ(usage.oom_kills, 0u);
}

/// The cgroup path `controller` has in a /proc/<pid>/cgroup text ("7:pids:/a/b" lines; joint
/// hierarchies list several controllers, "4:cpu,cpuacct:/x"); empty when no line names it.
std::string v1_path_in(const std::string& cgroup_text, const std::string& controller) {
    std::istringstream lines(cgroup_text);
    for (std::string line; std::getline(lines, line);) {
        auto first = line.find(':'), second = line.find(':', first + 1);
        if (first == std::string::npos || second == std::string::npos) continue;
        std::istringstream names(line.substr(first + 1, second - first - 1));
        for (std::string name; std::getline(names, name, ',');)
            if (name == controller) return line.substr(second + 1);
    }
    return "";
}

/// Every thread of this process: tid -> its /proc/self/task/<tid>/cgroup text.
std::map<std::string, std::string> cgroups_of_our_threads() {
    std::map<std::string, std::string> threads;
    for (const auto& tid : subdirectory_names("/proc/self/task"))
        if (auto text = read_file("/proc/self/task/" + tid + "/cgroup")) threads[tid] = *text;
    return threads;
}

// Issue 17.10: the launcher's child joins the v1 cgroups through their `tasks` files, which move
// only the writing thread (the kernel then skips the host-wide threadgroup lock whose RCU grace
// period made `strict` launches ~15 ms slower). That must still put the whole command in them:
// the threads it starts after execve inherit them. And the caller -- corrald has many threads --
// must not move at all: corral never moves a process out of its own v1 cgroups (DESIGN.md,
// "Limits"), and a join that took the caller's threads along would do exactly that.
TEST_F(LimitsTest, Limits_LaunchedCommandHasTheV1CgroupsOnEveryThreadAndTheCallerStays) {
    if (host_.layout != CgroupLayout::hybrid) GTEST_SKIP() << "no v1 cgroups to join here";
    if (!exists("/usr/bin/python3")) GTEST_SKIP() << "needs /usr/bin/python3 (threads)";
    std::vector<std::string> controllers;
    Limits limits;
    if (backend_->support().get(LimitKind::pids).enforceable) {
        limits.pids = 64;
        controllers.push_back("pids");
    }
    if (backend_->support().get(LimitKind::memory).enforceable) {
        limits.memory = 256ull << 20;
        controllers.push_back("memory");
    }
    if (controllers.empty()) GTEST_SKIP() << "neither v1 pids nor v1 memory limits here";
    ASSERT_TRUE(apply(limits));
    ASSERT_EQ(limits_->join_fds().size(), controllers.size());
    auto leaf = session_.create_child("task");
    ASSERT_TRUE(leaf) << leaf.error().describe();
    task_ = std::move(*leaf);

    // Caller threads alive across the launch, as corrald's are.
    std::atomic<bool> release{false};
    std::vector<std::thread> helpers;
    for (int i = 0; i < 3; ++i)
        helpers.emplace_back([&release] {
            while (!release) ::usleep(1000);
        });
    struct Join {
        std::atomic<bool>& release;
        std::vector<std::thread>& threads;
        ~Join() {
            release = true;
            for (auto& thread : threads) thread.join();
        }
    } join{release, helpers};
    const auto before = cgroups_of_our_threads();
    ASSERT_GE(before.size(), 4u);

    int fds[2];
    ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
    UniqueFd read_end(fds[0]), write_end(fds[1]);
    LaunchSpec spec;
    spec.argv = {"/usr/bin/python3", "-c",
                 "import os, threading\n"
                 "paths = ['/proc/self/fd/' + f for f in os.listdir('/proc/self/fd')]\n"
                 "fds = [os.readlink(p) for p in paths if os.path.lexists(p)]\n"
                 "print('@fds', fds, flush=True)\n"
                 "def show(tag):\n"
                 "    print('@' + tag, flush=True)\n"
                 "    print(open('/proc/thread-self/cgroup').read(), flush=True)\n"
                 "t = threading.Thread(target=show, args=('thread',))\n"
                 "t.start(); t.join(); show('main')\n"};
    spec.env = {"PATH=/usr/bin:/bin"};
    spec.cwd = "/";
    spec.cgroup_fd = task_.dir_fd();
    spec.v1_join_fds = limits_->join_fds();
    spec.stdout_fd = write_end.get();
    auto child = launch(spec);
    write_end.reset();
    ASSERT_TRUE(child) << child.error().describe();
    const std::string out = drain(read_end.get());
    auto status = child->wait();
    ASSERT_TRUE(status) << status.error().describe();
    EXPECT_TRUE(status->exited && status->code == 0) << out;

    const auto thread_at = out.find("@thread"), main_at = out.find("@main");
    ASSERT_NE(thread_at, std::string::npos) << out;
    ASSERT_NE(main_at, std::string::npos) << out;
    const std::string of_thread =
        thread_at < main_at ? out.substr(thread_at, main_at - thread_at) : out.substr(thread_at);
    const std::string of_main =
        main_at < thread_at ? out.substr(main_at, thread_at - main_at) : out.substr(main_at);
    const std::string session_dir = "/corral-" + name_;
    for (const auto& controller : controllers) {
        for (const auto& [who, text] :
             {std::pair{"main thread", of_main}, {"new thread", of_thread}}) {
            const std::string path = v1_path_in(text, controller);
            EXPECT_TRUE(path.size() >= session_dir.size() &&
                        path.compare(path.size() - session_dir.size(), session_dir.size(),
                                     session_dir) == 0)
                << "the command's " << who << " is in v1 " << controller << " `" << path
                << "`, not the session's";
        }
    }
    EXPECT_EQ(cgroups_of_our_threads(), before) << "a caller thread changed cgroups";
    // The join fds are close-on-exec: the command holds no way into a v1 cgroup of its own.
    const auto fds_at = out.find("@fds");
    ASSERT_NE(fds_at, std::string::npos) << out;
    const std::string open_fds = out.substr(fds_at, out.find('\n', fds_at) - fds_at);
    EXPECT_EQ(open_fds.find("/tasks"), std::string::npos) << open_fds;
    EXPECT_EQ(open_fds.find("cgroup.procs"), std::string::npos) << open_fds;
}

// Issue 12: removing a session's v1 cgroups slept on corrald's event loop (10 ms at a time, up to
// 2 s per controller) while a killed task was still exiting; v1 says nothing when a cgroup empties.
// try_remove_cgroups() is one pass that never waits: right after it killed a task with 256 MiB to
// give back, the exiting task still holds the cgroups and the pass says so; passes repeated (as
// corrald repeats them on a timer) find them gone, and destruction has nothing left to wait for.
TEST_F(LimitsTest, Limits_V1CgroupsOfAnExitingTaskGoByPassesThatNeverWait) {
    if (host_.layout != CgroupLayout::hybrid) GTEST_SKIP() << "no v1 cgroups here";
    if (!backend_->support().get(LimitKind::memory).enforceable)
        GTEST_SKIP() << "no v1 memory controller here";
    Limits limits;
    limits.memory = 1ull << 30;
    ASSERT_TRUE(apply(limits, Enforcement::best_effort));
    int touched[2];
    ASSERT_EQ(::pipe2(touched, O_CLOEXEC), 0);
    UniqueFd touched_read(touched[0]), touched_write(touched[1]);
    constexpr size_t kBytes = 256u << 20;
    PidRef child = start([&] {
        std::vector<char> memory(kBytes, 1);  // every page touched
        (void)!::write(touched_write.get(), "t", 1);
        for (;;) ::pause();
    });
    ASSERT_TRUE(child.valid());
    touched_write.reset();
    char byte = 0;
    ASSERT_EQ(::read(touched_read.get(), &byte, 1), 1) << "the child did not touch its memory";

    EXPECT_FALSE(limits_->try_remove_cgroups())
        << "the v1 cgroups were gone right after the kill: nothing was left to retry";
    bool removed = false;
    for (int pass = 0; pass < 1000 && !removed; ++pass) {
        std::this_thread::sleep_for(10ms);
        removed = limits_->try_remove_cgroups();
    }
    EXPECT_TRUE(removed) << "v1 cgroups still there after 10 s of passes";
    for (const auto& [controller, dir] : host_.v1_own)
        EXPECT_FALSE(exists(dir + "/corral-" + name_)) << controller << " cgroup left";
    auto status = child.wait();
    ASSERT_TRUE(status) << status.error().describe();
    EXPECT_FALSE(status->exited) << "the child was not killed";
}

// Issue 11.3: on a pure v2 host the cases above must run the unified backend, with the limit
// files on the session and the child in a leaf below it, not silently another path.
TEST_F(LimitsTest, Limits_UnifiedHostUsesTheV2PathWithTheChildInALeaf) {
    if (host_.layout != CgroupLayout::unified) GTEST_SKIP() << "host is hybrid: the v1 path";
    EXPECT_EQ(backend_->name(), "unified");
    if (!backend_->support().get(LimitKind::pids).enforceable)
        GTEST_SKIP() << "pids: " << backend_->support().get(LimitKind::pids).detail;
    Limits limits;
    limits.pids = 32;
    ASSERT_TRUE(apply(limits));
    auto pids_max = read_file(session_.path() + "/pids.max");
    ASSERT_TRUE(pids_max) << pids_max.error().describe();
    EXPECT_EQ(*pids_max, "32\n");
    EXPECT_TRUE(limits_->join_fds().empty()) << "no v1 cgroups on a unified host";
    PidRef child = start([] { ::pause(); });
    ASSERT_TRUE(child.valid());
    auto procs = read_file(task_.path() + "/cgroup.procs");
    ASSERT_TRUE(procs);
    EXPECT_EQ(*procs, std::to_string(child.pid()) + "\n") << "the child runs in the leaf";
    auto usage = limits_->usage();
    ASSERT_TRUE(usage.pids_current.has_value());
    EXPECT_EQ(*usage.pids_current, 1u) << "the session's v2 pids.current counts it";
}

// The unified backend on this hybrid host: the v2 tree has none of our controllers (they are
// bound to v1 hierarchies), so every limit must be reported unavailable with that reason.
TEST_F(LimitsTest, UnifiedBackend_ReportsControllersUnavailableOnAHybridHost) {
    if (host_.layout != CgroupLayout::hybrid) GTEST_SKIP() << "host is not hybrid";
    auto unified = make_unified_backend(host_);
    for (LimitKind kind : {LimitKind::memory, LimitKind::pids, LimitKind::cpu}) {
        auto capability = unified->support().get(kind);
        EXPECT_FALSE(capability.enforceable) << limit_name(kind);
        EXPECT_NE(capability.detail.find("cgroup.controllers"), std::string::npos)
            << capability.detail;
    }
    Limits limits;
    limits.memory = 64ull << 20;
    auto refused = unified->apply(session_, name_, limits, Enforcement::strict);
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().describe().find("limit `memory` cannot be enforced"),
              std::string::npos)
        << refused.error().describe();
}

// The unified backend's controller-enabling path on the real kernel, with a controller this
// host's v2 tree does have (hybrid hosts leave e.g. hugetlb, misc or rdma to cgroup2): the
// kernel accepts our "+ctrl" writes down the path, the session gets the controller's files, and
// a process living in a cgroup on the way yields the no-internal-process explanation until it
// moves into its own leaf (enter_supervisor_leaf).
TEST_F(LimitsTest, UnifiedBackend_EnablesControllersDownThePathOnTheRealKernel) {
    auto controllers = read_file(host_.v2_own + "/cgroup.controllers");
    ASSERT_TRUE(controllers);
    std::string controller;
    for (const char* candidate : {"memory", "pids", "hugetlb", "misc", "rdma"})
        if (controller.empty() && std::string(*controllers).find(candidate) != std::string::npos)
            controller = candidate;
    if (controller.empty()) GTEST_SKIP() << "no controller available in " << host_.v2_own;

    auto instance = session_.create_child("instance");
    ASSERT_TRUE(instance) << instance.error().describe();
    auto sessions = instance->create_child("sessions");
    ASSERT_TRUE(sessions);
    auto leaf = sessions->create_child("s1");
    ASSERT_TRUE(leaf);

    // A process directly in `instance` (as corrald would be before entering its leaf).
    int go[2], done[2];
    ASSERT_EQ(::pipe(go), 0);
    ASSERT_EQ(::pipe(done), 0);
    std::string instance_path = instance->path();
    CgroupHost host = host_;
    pid_t pid = ::fork();
    if (pid == 0) {
        if (!instance->attach(::getpid())) ::_exit(10);
        (void)!::write(done[1], "x", 1);
        char byte;
        if (::read(go[0], &byte, 1) != 1) ::_exit(11);
        auto entered = enter_supervisor_leaf(host, instance_path);
        (void)!::write(done[1], entered ? "y" : "n", 1);
        ::pause();
        ::_exit(0);
    }
    char byte;
    ASSERT_EQ(::read(done[0], &byte, 1), 1);

    auto busy = enable_controllers_down_to(host_.v2_own, leaf->path(), {controller});
    ASSERT_FALSE(busy);
    EXPECT_EQ(busy.error().code, EBUSY) << busy.error().describe();
    EXPECT_NE(busy.error().describe().find("no-internal-process"), std::string::npos);

    ASSERT_EQ(::write(go[1], "g", 1), 1);
    ASSERT_EQ(::read(done[0], &byte, 1), 1);
    EXPECT_EQ(byte, 'y') << "the process moved itself into instance/supervisor";
    EXPECT_TRUE(exists(instance_path + "/supervisor"));

    auto enabled = enable_controllers_down_to(host_.v2_own, leaf->path(), {controller});
    EXPECT_TRUE(enabled) << enabled.error().describe();
    auto leaf_controllers = read_file(leaf->path() + "/cgroup.controllers");
    ASSERT_TRUE(leaf_controllers);
    EXPECT_NE(leaf_controllers->find(controller), std::string::npos) << *leaf_controllers;

    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    for (int fd : {go[0], go[1], done[0], done[1]}) ::close(fd);
    // Before removal: turn the controller off again on the host's own cgroup if we were the
    // ones who turned it on is not needed here: v2_own's subtree_control only lets our children
    // see the controller, and they are removed with the session.
}

TEST_F(LimitsTest, EnterSupervisorLeaf_RefusesADirectoryOutsideOurCgroup) {
    auto refused = enter_supervisor_leaf(host_, "/tmp/not-a-cgroup");
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().describe().find("not below our cgroup"), std::string::npos);
}

}  // namespace
}  // namespace corral
