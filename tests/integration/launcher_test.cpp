// The launcher against the real kernel (root): a process is in its leaf cgroup from its first
// instruction, setup failures come back as "step: errno", output flows through the given fds and
// exit codes and signals come back through the PidRef.
#include "isolation/launcher.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <thread>
#include <vector>

#include "base/file_io.hpp"
#include "base/pipe.hpp"
#include "isolation/cgroup.hpp"
#include "isolation/clone_vm.hpp"
#include "isolation/confinement.hpp"
#include "isolation/landlock.hpp"
#include "isolation/launch_message.hpp"
#include "isolation/launch_worker.hpp"
#include "isolation/launch_zygote.hpp"
#include "tests/integration/support/test_helpers.hpp"

namespace corral {
namespace {

using test_support::drain;
using test_support::exists;
using test_support::proc_text;
using test_support::unique_name;

class LauncherTest : public ::testing::Test {
  protected:
    void SetUp() override {
        if (::geteuid() != 0) GTEST_SKIP() << "needs root (creates cgroups)";
        auto host = discover_cgroup_host();
        ASSERT_TRUE(host) << host.error().describe();
        auto cgroup = Cgroup::create(host->v2_own, unique_name());
        ASSERT_TRUE(cgroup) << cgroup.error().describe();
        cgroup_ = std::move(*cgroup);
        cgroup_rel_ = cgroup_.path().substr(host->v2_mount.size());
    }
    void TearDown() override {
        stuck_procs_.reset();
        remove_leaf(stuck_);
        if (!cgroup_.valid()) return;
        auto status = cgroup_.remove();
        EXPECT_TRUE(status) << status.error().describe();
    }

    LaunchSpec spec(std::vector<std::string> argv) const {
        LaunchSpec s;
        s.argv = std::move(argv);
        s.env = {"PATH=/usr/local/bin:/usr/bin:/bin"};
        s.cwd = "/";
        s.cgroup_fd = cgroup_.dir_fd();
        return s;
    }

    /// Runs `argv` with stdout into a pipe; returns (output, status).
    std::pair<std::string, WaitStatus> run(LaunchSpec s) {
        int fds[2];
        EXPECT_EQ(::pipe2(fds, O_CLOEXEC), 0);
        UniqueFd read_end(fds[0]), write_end(fds[1]);
        s.stdout_fd = write_end.get();
        auto child = launch(s);
        write_end.reset();
        EXPECT_TRUE(child) << child.error().describe();
        if (!child) return {};
        std::string out = drain(read_end.get());
        auto status = child->wait();
        EXPECT_TRUE(status) << status.error().describe();
        return {out, status ? *status : WaitStatus{}};
    }

    /// Another leaf of ours, frozen: a child that joins it (its cgroup.procs is given as a "v1
    /// tasks file", which the child writes "0" to) stops there before execve, with the launcher
    /// suspended, however the launch is done.
    Cgroup frozen_leaf() {
        auto host = discover_cgroup_host();
        EXPECT_TRUE(host);
        auto leaf = Cgroup::create(host->v2_own, unique_name());
        EXPECT_TRUE(leaf) << leaf.error().describe();
        if (!leaf) return {};
        EXPECT_TRUE(write_file(leaf->path() + "/cgroup.freeze", "1"));
        return std::move(*leaf);
    }
    const std::string data_file_ = "/tmp/" + unique_name() + ".txt";
    /// Thaws, kills what is in it and removes `leaf`, even after a failed assertion.
    static void remove_leaf(Cgroup& leaf) {
        if (!leaf.valid()) return;
        (void)write_file(leaf.path() + "/cgroup.kill", "1");
        (void)write_file(leaf.path() + "/cgroup.freeze", "0");
        (void)leaf.wait_until_empty(std::chrono::seconds(10));
        auto removed = leaf.remove();
        EXPECT_TRUE(removed) << removed.error().describe();
    }
    /// Makes `s` a launch of `true` whose child stops before execve: it joins stuck_, a frozen
    /// leaf (see frozen_leaf) that TearDown removes even after a failed assertion. Call it in
    /// ASSERT_NO_FATAL_FAILURE.
    void spec_stuck_in_frozen_leaf(LaunchSpec& s) {
        stuck_ = frozen_leaf();
        ASSERT_TRUE(stuck_.valid());
        stuck_procs_ = UniqueFd(::openat(stuck_.dir_fd(), "cgroup.procs", O_WRONLY | O_CLOEXEC));
        ASSERT_TRUE(stuck_procs_.valid());
        s = spec({"true"});
        s.v1_join_fds = {stuck_procs_.get()};
    }

    Cgroup cgroup_;
    std::string cgroup_rel_;  ///< e.g. "/corral-test-1-0", as /proc/<pid>/cgroup shows it
    Cgroup stuck_;
    UniqueFd stuck_procs_;
};

TEST_F(LauncherTest, Launch_ProcessIsInItsLeafCgroupFromItsFirstInstruction) {
    // The command reads its own cgroup as its very first action: no window where it ran
    // elsewhere.
    auto [out, status] = run(spec({"cat", "/proc/self/cgroup"}));
    EXPECT_TRUE(status.exited);
    EXPECT_EQ(status.code, 0);
    EXPECT_NE(out.find("0::" + cgroup_rel_ + "\n"), std::string::npos) << out;
}

TEST_F(LauncherTest, Launch_StdoutIsCapturedThroughThePipe) {
    auto [out, status] = run(spec({"/bin/echo", "hello", "corral"}));
    EXPECT_EQ(out, "hello corral\n");
    EXPECT_TRUE(status.exited);
}

TEST_F(LauncherTest, Launch_ReportsExitCodeAndSignal) {
    auto [out, status] = run(spec({"sh", "-c", "exit 7"}));
    EXPECT_TRUE(status.exited);
    EXPECT_EQ(status.code, 7);

    auto [out2, killed] = run(spec({"sh", "-c", "kill -TERM $$"}));
    EXPECT_FALSE(killed.exited);
    EXPECT_EQ(killed.code, SIGTERM);
}

TEST_F(LauncherTest, Launch_MissingCwdFailsNamingChdirAndEnoent) {
    auto s = spec({"true"});
    s.cwd = "/nonexistent-corral-dir";
    auto child = launch(s);
    ASSERT_FALSE(child);
    EXPECT_EQ(child.error().code, ENOENT);
    EXPECT_NE(child.error().message.find("chdir `/nonexistent-corral-dir`"), std::string::npos)
        << child.error().describe();
}

TEST_F(LauncherTest, Launch_MissingProgramFailsNamingExecveAndEnoent) {
    auto child = launch(spec({"corral-no-such-program"}));
    ASSERT_FALSE(child);
    EXPECT_EQ(child.error().code, ENOENT);
    EXPECT_NE(child.error().message.find("execve `corral-no-such-program`"), std::string::npos)
        << child.error().describe();
}

TEST_F(LauncherTest, Launch_ResolvesArgv0ThroughThePathOfItsOwnEnvironment) {
    auto s = spec({"sh", "-c", "echo ok"});
    s.env = {"PATH=/nonexistent:/bin"};
    auto [out, status] = run(s);
    EXPECT_EQ(out, "ok\n");

    s.env = {"PATH=/nonexistent"};
    auto child = launch(s);
    ASSERT_FALSE(child);
    EXPECT_EQ(child.error().code, ENOENT);
}

TEST_F(LauncherTest, Launch_StdinDefaultsToDevNullAndEnvIsExact) {
    auto s = spec({"sh", "-c", "cat; echo \"[$FOO]\"; env | wc -l"});
    s.env = {"PATH=/bin:/usr/bin", "FOO=bar"};
    auto [out, status] = run(s);
    // sh adds PWD (and maybe SHLVL/_): at most a few variables, none of the test runner's.
    EXPECT_EQ(out.substr(0, 6), "[bar]\n") << out;
    EXPECT_LE(std::stoi(out.substr(6)), 5) << out;
}

TEST_F(LauncherTest, Launch_DoesNotLeakDescriptorsIntoTheCommand) {
    // An fd of ours without CLOEXEC must still not reach the command.
    int leaky = ::open("/dev/null", O_RDONLY);
    ASSERT_GE(leaky, 3);
    UniqueFd guard(leaky);
    auto [out, status] = run(spec({"ls", "/proc/self/fd"}));
    // ls itself opens one fd for the directory; stdio 0 1 2 plus that one.
    EXPECT_EQ(out.find(std::to_string(leaky) + "\n"), std::string::npos) << out;
    EXPECT_EQ(out, "0\n1\n2\n3\n");
}

TEST_F(LauncherTest, Launch_NewSessionDetachesFromOurSession) {
    auto s = spec({"sh", "-c", "ps -o sid= -p $$"});
    auto [out, status] = run(s);
    ASSERT_FALSE(out.empty());
    // The command leads its own session: its sid is its own pid, not ours.
    EXPECT_NE(std::stoi(out), ::getsid(0));
}

TEST_F(LauncherTest, Launch_ResetsIgnoredSignals) {
    struct sigaction ignore {
    }, old{};
    ignore.sa_handler = SIG_IGN;
    ASSERT_EQ(::sigaction(SIGINT, &ignore, &old), 0);
    auto [out, status] = run(spec({"sh", "-c", "kill -INT $$; exit 3"}));
    ::sigaction(SIGINT, &old, nullptr);
    EXPECT_FALSE(status.exited) << "SIGINT stayed ignored in the child";
    EXPECT_EQ(status.code, SIGINT);
}

TEST_F(LauncherTest, Launch_AppliesConfinementBeforeExec) {
    Policy policy;
    policy.user.inherit = false;
    policy.user.uid = 65534;
    policy.user.gid = 65534;
    policy.limits.open_files = 77;
    auto confinement = compile_confinement(policy);
    ASSERT_TRUE(confinement) << confinement.error().describe();
    auto s = spec({"sh", "-c", "id -u; id -g; ulimit -n; grep CapEff /proc/self/status"});
    s.confinement = &*confinement;
    auto [out, status] = run(s);
    EXPECT_EQ(out, "65534\n65534\n77\nCapEff:\t0000000000000000\n");
}

// Issue 12 item 1: launch() ran on corrald's loop and waited for the child's exec report for as
// long as it took, so a child stopped or frozen before execve froze every session's API. Born
// into a frozen cgroup (what a SIGSTOP before exec would do, without a race to catch it), the
// child never reports; after setup_limit it is killed and reaped and launch() says why.
TEST_F(LauncherTest, Launch_ChildThatNeverReachesExecIsKilledAfterTheSetupLimit) {
    ASSERT_TRUE(write_file(cgroup_.path() + "/cgroup.freeze", "1"));
    LaunchSpec s = spec({"true"});
    s.setup_limit = std::chrono::milliseconds(500);
    const auto asked = std::chrono::steady_clock::now();
    auto child = launch(s);
    const auto took = std::chrono::steady_clock::now() - asked;
    ASSERT_FALSE(child) << "a frozen child reported its exec";
    EXPECT_EQ(child.error().code, ETIMEDOUT) << child.error().describe();
    EXPECT_NE(child.error().describe().find("did not reach execve within 500 ms"),
              std::string::npos)
        << child.error().describe();
    EXPECT_LT(took, std::chrono::seconds(30));  // a hang, not a timing: the limit is 0.5 s
    auto procs = read_file(cgroup_.path() + "/cgroup.procs");
    ASSERT_TRUE(procs);
    EXPECT_EQ(*procs, "") << "the child was left behind";
    ASSERT_TRUE(write_file(cgroup_.path() + "/cgroup.freeze", "0"));
    // Without a limit (corral run) an unfrozen child launches as before.
    auto [out, status] = run(spec({"echo", "ok"}));
    EXPECT_EQ(out, "ok\n");
}

TEST(LauncherProbe, CloneIntoCgroupIsSupportedOnThisKernel) {
    // Kernel 5.7+ has it; this machine runs a current kernel, so a false here is a probe bug.
    EXPECT_TRUE(clone_into_cgroup_supported());
}

// ---- corrald's launch worker (isolation/launch_worker.hpp, issue 18) ----

/// What corrald does with a launch: the worker starts it, the caller waits for its report on the
/// channel the worker passed back, then for the child through the pidfd it passed back.
std::pair<Result<bool>, PendingLaunch> launch_through_worker(const LaunchSpec& s) {
    LaunchWorker* worker = LaunchWorker::shared();
    EXPECT_NE(worker, nullptr);
    if (worker == nullptr) return {Result<bool>(plain_error("no worker")), PendingLaunch{}};
    auto pending = worker->launch_begin(s);
    if (!pending) return {Result<bool>(std::move(pending.error())), PendingLaunch{}};
    for (;;) {
        pollfd ready{pending->report.get(), POLLIN, 0};
        int n;
        do {
            n = ::poll(&ready, 1, 30000);
        } while (n < 0 && errno == EINTR);
        if (n != 1) return {Result<bool>(plain_error("no report")), std::move(*pending)};
        auto executed = read_launch_report(*pending, nullptr);
        if (!executed || *executed) return {std::move(executed), std::move(*pending)};
    }
}

/// Opens `count` more descriptors (raising RLIMIT_NOFILE as corrald does); closed with the vector.
std::vector<UniqueFd> hold_descriptors(int count) {
    rlimit limit{};
    ::getrlimit(RLIMIT_NOFILE, &limit);
    // Room for them whatever the host's hard limit (the pure-v2 guest's is ~1,100): root may
    // raise it, as corrald's start does.
    rlim_t open_now = 0;
    for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd"))
        ++open_now;
    const rlim_t wanted = open_now + static_cast<rlim_t>(count) + 64;
    if (limit.rlim_max < wanted) limit.rlim_max = wanted;
    limit.rlim_cur = limit.rlim_max;
    EXPECT_EQ(::setrlimit(RLIMIT_NOFILE, &limit), 0) << std::strerror(errno);
    std::vector<UniqueFd> held;
    for (int i = 0; i < count; ++i) {
        const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (fd < 0) break;
        held.emplace_back(fd);
    }
    EXPECT_EQ(held.size(), static_cast<size_t>(count));
    return held;
}

// Issue 18: with 1,000 sessions corrald holds ~12,000 descriptors, and every child copied them
// all and closed them one by one before execve (a third of a `run`'s CPU in a profile). The
// worker's table holds only stdio and its socket, however many corrald opened before it started
// or opens after.
TEST_F(LauncherTest, LaunchWorker_ItsTableStaysSmallWhateverTheDaemonHolds) {
    auto before = hold_descriptors(3000);
    LaunchWorker* worker = LaunchWorker::shared();
    ASSERT_NE(worker, nullptr);
    auto count = worker->open_descriptors();
    ASSERT_TRUE(count) << count.error().describe();
    EXPECT_LE(*count, 4) << "stdio and the worker's socket only";
    auto after = hold_descriptors(2000);
    // A launch in between leaves nothing behind in it either, and the command gets stdio only:
    // no descriptor of corrald's (CVE-2024-21626: runc leaked a host cgroup directory
    // descriptor into the container, whose process reached the host's files through it).
    int fds[2];
    ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
    UniqueFd read_end(fds[0]), write_end(fds[1]);
    LaunchSpec s = spec({"ls", "/proc/self/fd"});
    s.stdout_fd = write_end.get();
    auto [executed, pending] = launch_through_worker(s);
    write_end.reset();
    ASSERT_TRUE(executed) << executed.error().describe();
    EXPECT_EQ(drain(read_end.get()), "0\n1\n2\n3\n");  // stdio and ls's own directory
    auto status = pending.child.wait();
    ASSERT_TRUE(status) << status.error().describe();
    EXPECT_TRUE(status->exited);
    auto again = worker->open_descriptors();
    ASSERT_TRUE(again);
    EXPECT_EQ(*again, *count);
}

// Every descriptor a spec names is the caller's number in the caller's table; the worker must
// launch with its own copies of each (stdin, stdout, stderr, the extra fd 3, the cgroup, the
// Landlock ruleset of the confinement), and pass back a pidfd and report channel that work in
// the caller's table.
TEST_F(LauncherTest, LaunchWorker_LaunchesWithEveryDescriptorOfTheSpec) {
    auto held = hold_descriptors(500);  // the spec's numbers are high, the worker's low
    auto in_pipe = make_pipe(), out_pipe = make_pipe(), err_pipe = make_pipe(),
         extra_pipe = make_pipe();
    ASSERT_TRUE(in_pipe && out_pipe && err_pipe && extra_pipe);
    Pipe& in = *in_pipe;
    Pipe& out = *out_pipe;
    Pipe& err = *err_pipe;
    Pipe& extra = *extra_pipe;
    ASSERT_EQ(::write(in.write_end.get(), "from stdin\n", 11), 11);
    in.write_end.reset();
    Policy policy;
    const bool landlock = landlock_abi_version() > 0;
    const std::string allowed = std::filesystem::temp_directory_path() / unique_name();
    std::filesystem::create_directory(allowed);
    if (landlock) {
        policy.landlock.read = {"/usr", "/bin", "/lib", "/lib64", "/etc", "/proc", "/dev"};
        policy.landlock.write = {allowed, "/dev/null"};
    }
    auto confinement = compile_confinement(policy);
    ASSERT_TRUE(confinement) << confinement.error().describe();
    LaunchSpec s = spec({"sh", "-c",
                         "cat; echo to-stderr >&2; echo to-fd3 >&3; "
                         "cat /proc/self/cgroup; "
                         "touch " + allowed + "/ok && echo wrote-allowed; "
                         "touch /var/tmp/corral-landlock-probe 2>/dev/null && echo wrote-outside "
                         "|| echo refused-outside"});
    s.stdin_fd = in.read_end.get();
    s.stdout_fd = out.write_end.get();
    s.stderr_fd = err.write_end.get();
    s.extra_fd = extra.write_end.get();
    s.confinement = &*confinement;
    auto [executed, pending] = launch_through_worker(s);
    out.write_end.reset();
    err.write_end.reset();
    extra.write_end.reset();
    ASSERT_TRUE(executed) << executed.error().describe();
    ASSERT_GE(pending.child.pidfd(), 0) << "the pidfd came back";
    const std::string stdout_text = drain(out.read_end.get());
    EXPECT_EQ(drain(err.read_end.get()), "to-stderr\n");
    EXPECT_EQ(drain(extra.read_end.get()), "to-fd3\n");
    auto status = pending.child.wait();  // through the pidfd passed back
    ASSERT_TRUE(status) << status.error().describe();
    EXPECT_TRUE(status->exited);
    EXPECT_EQ(stdout_text.rfind("from stdin\n", 0), 0u) << stdout_text;
    EXPECT_NE(stdout_text.find("0::" + cgroup_rel_ + "\n"), std::string::npos) << stdout_text;
    EXPECT_NE(stdout_text.find("wrote-allowed\n"), std::string::npos) << stdout_text;
    if (landlock) {  // the ruleset the worker received was the one applied
        EXPECT_NE(stdout_text.find("refused-outside\n"), std::string::npos) << stdout_text;
    }
    ::unlink("/var/tmp/corral-landlock-probe");
    std::filesystem::remove_all(allowed);
}

// A setup failure comes back through the worker as it does from launch(): step and errno.
TEST_F(LauncherTest, LaunchWorker_SetupFailureNamesTheStep) {
    LaunchSpec s = spec({"true"});
    s.cwd = "/nope-" + unique_name();
    auto [executed, pending] = launch_through_worker(s);
    ASSERT_FALSE(executed);
    EXPECT_EQ(executed.error().code, ENOENT);
    EXPECT_NE(executed.error().describe().find("chdir"), std::string::npos)
        << executed.error().describe();
    auto status = pending.child.wait();
    ASSERT_TRUE(status);
    EXPECT_EQ(status->code, 127);
}

// ---- Launches that share our memory (CLONE_VM | CLONE_VFORK; issue 18) ----

// Issue 18: the rule of launcher.hpp. Only a child that keeps our credentials, user and pid
// namespace up to execve, and needs no seccomp listener served before it, may suspend the
// launcher; every other spec forks as before.
TEST(LaunchMayShareMemory, AdmitsOnlyChildrenThatNothingButOurCredentialsCanStop) {
    LaunchSpec none;  // a `none` session's process: no namespaces, no confinement to speak of
    none.argv = {"true"};
    none.cgroup_fd = 3;
    EXPECT_TRUE(launch_may_share_memory(none, 0));
    EXPECT_TRUE(launch_may_share_memory(none, 2));
    Confinement inherit;  // `user: inherit`, `capabilities: inherit`: rlimits, no_new_privs only
    inherit.drop_capabilities = false;
    inherit.change_ids = false;
    none.confinement = &inherit;
    EXPECT_TRUE(launch_may_share_memory(none, 0));

    // suid_dumpable 1: a credential change the kernel makes on the child's behalf would make our
    // mm dumpable (commit_creds sets it from suid_dumpable); unknown counts as 1.
    EXPECT_FALSE(launch_may_share_memory(none, 1));
    EXPECT_FALSE(launch_may_share_memory(none, -1));

    LaunchSpec holder = none;  // joins a session's namespaces (maybe a user namespace)
    holder.namespace_holder_pidfd = 4;
    holder.namespace_flags = CLONE_NEWPID | CLONE_NEWNS;
    EXPECT_FALSE(launch_may_share_memory(holder, 0));
    holder.namespace_flags = CLONE_NEWNET;
    EXPECT_FALSE(launch_may_share_memory(holder, 0));
    // A `none` session's output keeper is its holder, with no namespace to join.
    holder.namespace_flags = 0;
    EXPECT_TRUE(launch_may_share_memory(holder, 0));
    LaunchSpec userns = none;
    userns.namespace_flags = CLONE_NEWUSER;
    EXPECT_FALSE(launch_may_share_memory(userns, 0));

    Confinement other_user = {};
    other_user.drop_capabilities = false;
    other_user.change_ids = true;  // `user: {uid: 65534}`
    other_user.uid = 65534;
    LaunchSpec changes_ids = none;
    changes_ids.confinement = &other_user;
    EXPECT_FALSE(launch_may_share_memory(changes_ids, 0));
    Confinement fewer_caps = {};
    fewer_caps.drop_capabilities = true;
    LaunchSpec drops_caps = none;
    drops_caps.confinement = &fewer_caps;
    EXPECT_FALSE(launch_may_share_memory(drops_caps, 0));

    // A seccomp listener handed over before execve: its refused calls wait for the launcher.
    Confinement counted = {};
    counted.drop_capabilities = false;
    counted.seccomp_filter = {sock_filter{0x06, 0, 0, 0x7fff0000}};
    counted.seccomp_notifying_filter = counted.seccomp_filter;
    SeccompRefusals refusals(nullptr);
    LaunchSpec listener = none;
    listener.confinement = &counted;
    listener.refusals = &refusals;
    EXPECT_FALSE(launch_may_share_memory(listener, 0));
    listener.refusals = nullptr;  // the same filter without a listener: nothing to serve
    EXPECT_TRUE(launch_may_share_memory(listener, 0));

    LaunchSpec opted_out = none;
    opted_out.may_share_memory = false;
    EXPECT_FALSE(launch_may_share_memory(opted_out, 0));
}

class SharedMemoryLaunchTest : public LauncherTest {
  protected:
    void SetUp() override {
        LauncherTest::SetUp();
        if (IsSkipped() || HasFatalFailure()) return;
        if (!clone_on_stack_available())
            GTEST_SKIP() << "no clone3_on_stack in this build (x86_64 only, not under ASan)";
        if (!launch_may_share_memory(spec({"true"})))
            GTEST_SKIP() << "this host's suid_dumpable keeps launches forking";
    }
};

/// Descriptors open in this process now.
int open_descriptor_count() {
    int count = 0;
    for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
        (void)entry;
        ++count;
    }
    return count - 1;  // the iterator's own
}

// Issue 18: a child sharing our memory reports a failed step (step name and errno) exactly as a
// forked one does; only the way it was started differs.
TEST_F(SharedMemoryLaunchTest, SetupFailuresReportTheStepAndErrnoAsTheForkPathDoes) {
    {  // mode 0644: execve says EACCES
        UniqueFd file(::open(data_file_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
        ASSERT_TRUE(file.valid());
    }
    struct Cleanup {
        const std::string& path;
        ~Cleanup() { ::unlink(path.c_str()); }
    } cleanup{data_file_};
    for (bool share : {true, false}) {
        SCOPED_TRACE(share ? "sharing memory" : "forked");
        LaunchSpec bad_cwd = spec({"true"});
        bad_cwd.cwd = "/nonexistent-corral-dir";
        bad_cwd.may_share_memory = share;
        auto child = launch(bad_cwd);
        ASSERT_FALSE(child);
        EXPECT_EQ(child.error().code, ENOENT);
        EXPECT_EQ(child.error().message, "chdir `/nonexistent-corral-dir`");

        LaunchSpec not_executable = spec({data_file_});
        not_executable.may_share_memory = share;
        child = launch(not_executable);
        ASSERT_FALSE(child);
        EXPECT_EQ(child.error().code, EACCES);
        EXPECT_EQ(child.error().message, "execve `" + data_file_ + "`");
        ASSERT_TRUE(exec_failure_exit_code(child.error()));
        EXPECT_EQ(*exec_failure_exit_code(child.error()), 126);

        LaunchSpec missing = spec({"corral-no-such-program"});
        missing.may_share_memory = share;
        child = launch(missing);
        ASSERT_FALSE(child);
        EXPECT_EQ(child.error().code, ENOENT);
        EXPECT_EQ(child.error().message, "execve `corral-no-such-program`");
    }
    auto [out, status] = run(spec({"echo", "still fine"}));
    EXPECT_EQ(out, "still fine\n");
}

// Issue 18: a launch that shared our memory is known to have exec'd when launch_begin() returns
// without a failure report (we resumed at its exec or exit), so corrald skips watching its
// report channel; a failed step must never be taken for an exec. Both through the worker, as
// corrald launches, and directly; a forked launch never claims to know.
TEST_F(SharedMemoryLaunchTest, AnExecIsKnownAtReturnAndAFailureNeverIs) {
    for (bool through_worker : {false, true}) {
        SCOPED_TRACE(through_worker ? "through the launch worker" : "direct");
        auto begin = [&](const LaunchSpec& s) {
            return through_worker ? LaunchWorker::shared()->launch_begin(s) : launch_begin(s);
        };
        auto exec_reached = [&](const LaunchSpec& s, std::optional<Error>* failure) {
            auto pending = begin(s);
            EXPECT_TRUE(pending) << pending.error().describe();
            if (!pending) return false;
            const bool known = pending->exec_reached;
            if (!known) {
                pollfd ready{pending->report.get(), POLLIN, 0};
                EXPECT_EQ(::poll(&ready, 1, 10000), 1);
                auto executed = read_launch_report(*pending, nullptr);
                if (!executed && failure) *failure = executed.error();
            }
            (void)pending->child.wait();  // reaped either way
            return known;
        };
        LaunchSpec good = spec({"true"});
        EXPECT_TRUE(exec_reached(good, nullptr));

        std::optional<Error> failure;
        LaunchSpec missing = spec({"corral-no-such-program"});
        EXPECT_FALSE(exec_reached(missing, &failure));
        ASSERT_TRUE(failure);
        EXPECT_EQ(failure->message, "execve `corral-no-such-program`");

        failure.reset();
        LaunchSpec bad_cwd = spec({"true"});
        bad_cwd.cwd = "/nonexistent-corral-dir";
        EXPECT_FALSE(exec_reached(bad_cwd, &failure));
        ASSERT_TRUE(failure);
        EXPECT_EQ(failure->code, ENOENT);

        LaunchSpec forked = spec({"true"});
        forked.may_share_memory = false;
        EXPECT_FALSE(exec_reached(forked, nullptr));
    }
}

// CVE-2019-5736 (runc: /proc/<pid>/exe of a not-yet-exec'd child opened from inside the
// container) and issue 10.1 are why a forked child makes itself non-dumpable. A child sharing our
// memory must not: the flag is the mm's, so it would change ours for good. Our own flag is what
// it was after many shared launches, whichever it was.
TEST_F(SharedMemoryLaunchTest, LeavesTheCallersDumpableFlagAsItWas) {
    const int before = ::prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
    for (int dumpable : {1, 0}) {
        ASSERT_EQ(::prctl(PR_SET_DUMPABLE, dumpable, 0, 0, 0), 0);
        for (int i = 0; i < 20; ++i) {
            auto [out, status] = run(spec({"true"}));
            EXPECT_TRUE(status.exited && status.code == 0);
        }
        EXPECT_EQ(::prctl(PR_GET_DUMPABLE, 0, 0, 0, 0), dumpable);
    }
    ::prctl(PR_SET_DUMPABLE, before, 0, 0, 0);
}

std::atomic<int> signals_received{0};
void count_signal(int) {
    signals_received.fetch_add(1, std::memory_order_relaxed);
}

// The hazards of a child on our memory, as glibc met them when posix_spawn moved to CLONE_VM |
// CLONE_VFORK on a stack of its own (sourceware bug 10354, and the signal-handler and stack
// fixes that followed): while one thread hammers the allocator (whose locks a child calling
// malloc could find held) and another keeps signalling the process (whose handlers must never
// run in the child), 2,000 launches through the worker all start, all exit with the status
// their command chose, and leave no descriptor behind.
TEST_F(SharedMemoryLaunchTest, TwoThousandLaunchesBesideMallocAndSignalStorms) {
    LaunchWorker* worker = LaunchWorker::shared();
    ASSERT_NE(worker, nullptr);
    struct sigaction handler {
    }, previous{};
    handler.sa_handler = count_signal;
    sigemptyset(&handler.sa_mask);
    handler.sa_flags = SA_RESTART;
    ASSERT_EQ(::sigaction(SIGUSR1, &handler, &previous), 0);
    std::atomic<bool> stop{false};
    struct Storm {  // joins the threads and restores SIGUSR1 even after a failed assertion
        std::atomic<bool>& stop;
        struct sigaction previous;
        std::vector<std::thread> threads;
        ~Storm() {
            stop = true;
            for (auto& t : threads) t.join();
            ::sigaction(SIGUSR1, &previous, nullptr);
        }
    } storm{stop, previous, {}};
    const int descriptors_before = open_descriptor_count();
    storm.threads.emplace_back([&stop] {
        std::vector<void*> blocks(64, nullptr);
        for (unsigned i = 0; !stop; ++i) {
            void*& block = blocks[i % blocks.size()];
            std::free(block);
            block = std::malloc(16 + (i * 7919) % 65536);
        }
        for (void* block : blocks) std::free(block);
    });
    storm.threads.emplace_back([&stop] {
        while (!stop) {
            ::kill(::getpid(), SIGUSR1);
            std::this_thread::sleep_for(std::chrono::microseconds(50));
        }
    });
    for (int i = 0; i < 2000; ++i) {
        const int code = i % 7;
        LaunchSpec s = spec({"/bin/sh", "-c", "exit " + std::to_string(code)});
        auto [executed, pending] = launch_through_worker(s);
        ASSERT_TRUE(executed) << "launch " << i << ": " << executed.error().describe();
        auto status = pending.child.wait();
        ASSERT_TRUE(status) << status.error().describe();
        ASSERT_TRUE(status->exited) << "launch " << i << " died of signal " << status->code;
        ASSERT_EQ(status->code, code) << "launch " << i;
    }
    stop = true;
    EXPECT_GT(signals_received.load(), 0);
    EXPECT_EQ(open_descriptor_count(), descriptors_before);
}

// Issue 18 (and issue 12 item 1): a child that dies before execve without a report (killed by
// another thread, as a same-credentials process could) is the launch's failure, not a command
// that ran; the worker, suspended until then, goes on launching.
TEST_F(SharedMemoryLaunchTest, AChildKilledBeforeExecFailsTheLaunchAndTheWorkerGoesOn) {
    LaunchSpec s;
    ASSERT_NO_FATAL_FAILURE(spec_stuck_in_frozen_leaf(s));
    std::atomic<bool> killed{false};
    std::thread killer([&] {
        const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        while (std::chrono::steady_clock::now() < give_up) {
            auto listed = read_file(stuck_.path() + "/cgroup.procs");
            if (listed && !listed->empty()) {
                killed = ::kill(std::stoi(*listed), SIGKILL) == 0;
                return;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
    });
    auto [executed, pending] = launch_through_worker(s);
    killer.join();
    ASSERT_TRUE(killed) << "the child never reached the frozen leaf";
    ASSERT_FALSE(executed) << "a child killed before execve passed for one that ran";
    EXPECT_EQ(executed.error().code, ECANCELED) << executed.error().describe();
    EXPECT_NE(executed.error().message.find("killed by signal 9 before execve"), std::string::npos)
        << executed.error().describe();
    LaunchSpec next = spec({"/bin/sh", "-c", "exit 3"});
    auto [ran, after] = launch_through_worker(next);
    ASSERT_TRUE(ran) << ran.error().describe();
    auto status = after.child.wait();
    ASSERT_TRUE(status);
    EXPECT_TRUE(status->exited && status->code == 3);
}

// Issue 12 item 1 for a suspended launcher: a child stopped before execve is killed by the setup
// watchdog after its limit, and the launch fails as a forked one does, in about that time.
TEST_F(SharedMemoryLaunchTest, AChildStuckBeforeExecIsKilledAfterTheSetupLimit) {
    LaunchSpec s;
    ASSERT_NO_FATAL_FAILURE(spec_stuck_in_frozen_leaf(s));
    s.setup_limit = std::chrono::milliseconds(300);
    const auto asked = std::chrono::steady_clock::now();
    auto [executed, pending] = launch_through_worker(s);
    const auto took = std::chrono::steady_clock::now() - asked;
    ASSERT_FALSE(executed);
    EXPECT_EQ(executed.error().code, ETIMEDOUT) << executed.error().describe();
    EXPECT_NE(executed.error().describe().find("did not reach execve within 300 ms"),
              std::string::npos)
        << executed.error().describe();
    EXPECT_LT(took, std::chrono::seconds(30));  // a hang, not a timing
    auto listed = read_file(stuck_.path() + "/cgroup.procs");
    ASSERT_TRUE(listed);
    EXPECT_EQ(*listed, "") << "the child was left behind";
}

// ---- corrald's launch zygote (isolation/launch_zygote.hpp, issue 18) ----

/// Launches that fork start in the zygote: a spec that may not share our memory (capabilities
/// dropped, as every confined session's are).
class ZygoteLaunchTest : public LauncherTest {
  protected:
    void SetUp() override {
        LauncherTest::SetUp();
        if (IsSkipped() || HasFatalFailure()) return;
        worker_ = LaunchWorker::shared();
        ASSERT_NE(worker_, nullptr);
        zygote_ = worker_->zygote();
        if (zygote_ == nullptr) GTEST_SKIP() << "no zygote here (no CLONE_INTO_CGROUP)";
        auto compiled = compile_confinement(Policy{});
        ASSERT_TRUE(compiled) << compiled.error().describe();
        confinement_.emplace(std::move(*compiled));
    }
    LaunchSpec forked_spec(std::vector<std::string> argv) {
        LaunchSpec s = spec(std::move(argv));
        s.confinement = &*confinement_;
        EXPECT_FALSE(launch_may_share_memory(s));
        return s;
    }
    /// Runs `s` through the worker (the zygote, for a forked spec) with stdout into a pipe.
    std::pair<std::string, WaitStatus> run_through_worker(LaunchSpec s) {
        auto out = make_pipe();
        EXPECT_TRUE(out);
        if (!out) return {};
        s.stdout_fd = out->write_end.get();
        auto [executed, pending] = launch_through_worker(s);
        out->write_end.reset();
        EXPECT_TRUE(executed) << executed.error().describe();
        if (!executed) return {};
        std::string text = drain(out->read_end.get());
        auto status = pending.child.wait();
        EXPECT_TRUE(status) << status.error().describe();
        return {text, status ? *status : WaitStatus{}};
    }
    /// AKilledZygoteIsReapedAndLaunchesGoOn's checks.
    void kill_the_zygote_and_launch() {
        const pid_t pid = zygote_->pid();
        ASSERT_EQ(::kill(pid, SIGKILL), 0);
        const uint64_t before = zygote_->launches();
        auto [out, status] = run_through_worker(forked_spec({"echo", "still"}));
        EXPECT_EQ(out, "still\n");
        EXPECT_EQ(status.code, 0);
        EXPECT_FALSE(zygote_->alive());
        EXPECT_EQ(zygote_->launches(), before);
        EXPECT_FALSE(exists("/proc/" + std::to_string(pid))) << "left a zombie";
        auto again = run_through_worker(forked_spec({"true"}));
        EXPECT_EQ(again.second.code, 0);
    }
    LaunchWorker* worker_ = nullptr;
    LaunchZygote* zygote_ = nullptr;
    std::optional<Confinement> confinement_;
};

// The zygote is forked by the worker's thread, so what it starts with CLONE_PARENT is our child,
// as a launch from the worker was: the caller waits for it and reads its reports. Launches that
// share our memory stay on the worker (nothing to copy there).
TEST_F(ZygoteLaunchTest, ForkLaunchesStartThereAndTheirChildrenAreOurs) {
    EXPECT_EQ(proc_text(zygote_->pid(), "comm"), "corrald-launch\n");
    EXPECT_NE(proc_text(zygote_->pid(), "status").find("PPid:\t" + std::to_string(::getpid()) +
                                                        "\n"),
              std::string::npos);
    const uint64_t before = zygote_->launches();
    auto [out, status] = run_through_worker(forked_spec({"sh", "-c", "echo $PPID; exit 3"}));
    EXPECT_EQ(out, std::to_string(::getpid()) + "\n") << "the command's parent is us";
    EXPECT_TRUE(status.exited);
    EXPECT_EQ(status.code, 3);
    EXPECT_EQ(zygote_->launches(), before + 1);
    if (clone_on_stack_available() && launch_may_share_memory(spec({"true"}))) {
        auto shared = run_through_worker(spec({"true"}));
        EXPECT_EQ(shared.second.code, 0);
        EXPECT_EQ(zygote_->launches(), before + 1) << "a launch that shares memory went there";
    }
}

// CVE-2024-21626 (runc leaked a host directory descriptor into the container): whatever the
// daemon holds, the zygote's table is stdio and its socket, and a command it starts gets stdio.
TEST_F(ZygoteLaunchTest, TheCommandGetsOnlyItsStdioWhateverTheDaemonHolds) {
    auto held = hold_descriptors(3000);
    auto [out, status] = run_through_worker(forked_spec({"ls", "/proc/self/fd"}));
    EXPECT_EQ(out, "0\n1\n2\n3\n");  // stdio and ls's own directory
    EXPECT_EQ(status.code, 0);
    // Once it is back waiting for a request: it sends its answer with the child's pidfd and
    // report channel attached and closes them just after, which a loaded machine can show us
    // (6 descriptors, seen under ctest -j2).
    auto zygote_fds = [&] {
        size_t count = 0;
        for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(
                 "/proc/" + std::to_string(zygote_->pid()) + "/fd"))
            ++count;
        return count;
    };
    for (int i = 0; i < 200 && zygote_fds() > 4; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_LE(zygote_fds(), 4u) << "stdio and its socket";
}

// A setup failure comes back from the zygote as from launch(): the step, its errno, exit 127.
TEST_F(ZygoteLaunchTest, ASetupFailureNamesTheStep) {
    LaunchSpec s = forked_spec({"true"});
    s.cwd = "/nope-" + unique_name();
    auto [executed, pending] = launch_through_worker(s);
    ASSERT_FALSE(executed);
    EXPECT_EQ(executed.error().code, ENOENT);
    EXPECT_NE(executed.error().describe().find("chdir `" + s.cwd + "`"), std::string::npos)
        << executed.error().describe();
    auto status = pending.child.wait();
    ASSERT_TRUE(status);
    EXPECT_EQ(status->code, 127);
}

// Issue 12 item 1: a child a session's process stops before execve (here: born in a frozen
// cgroup) must stall nobody. The zygote never waits for its children: the next launch runs.
TEST_F(ZygoteLaunchTest, AChildStuckBeforeExecStallsNoOtherLaunch) {
    LaunchSpec stuck;
    ASSERT_NO_FATAL_FAILURE(spec_stuck_in_frozen_leaf(stuck));
    stuck.confinement = &*confinement_;
    auto pending = worker_->launch_begin(stuck);
    ASSERT_TRUE(pending) << pending.error().describe();
    auto [out, status] = run_through_worker(forked_spec({"echo", "next"}));
    EXPECT_EQ(out, "next\n");
    EXPECT_EQ(status.code, 0);
    pollfd report{pending->report.get(), POLLIN, 0};
    EXPECT_EQ(::poll(&report, 1, 0), 0) << "the stuck child reported or exec'd";
    ASSERT_TRUE(pending->child.send_signal(SIGKILL));
    auto killed = pending->child.wait();
    ASSERT_TRUE(killed) << killed.error().describe();
    EXPECT_FALSE(killed->exited);
}

// A zygote killed (by an operator, the OOM killer) is reaped, not left a zombie, and launches go
// on from the worker's thread as before the zygote. In a process of its own (a "threadsafe" death
// test runs the test again in a fresh process): the zygote it kills is the worker's, this
// process's only one, which stays dead (a forked zygote is never restarted), so every later test
// of a run of the whole binary failed on it.
TEST_F(ZygoteLaunchTest, AKilledZygoteIsReapedAndLaunchesGoOn) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(
        {
            kill_the_zygote_and_launch();
            TearDown();  // this process's cgroup: its fixture is never destroyed
            std::_Exit(HasFailure() ? 1 : 0);
        },
        ::testing::ExitedWithCode(0), "");
}

// A zygote that stops answering (stopped, stuck) holds a launch for its limit at most, then is
// killed and reaped; the caller launches another way.
TEST_F(ZygoteLaunchTest, AZygoteThatStopsAnsweringIsGivenUpAfterItsLimit) {
    auto own = LaunchZygote::start(*worker_, std::chrono::milliseconds(300));
    ASSERT_TRUE(own) << own.error().describe();
    const pid_t pid = (*own)->pid();
    ASSERT_EQ(::kill(pid, SIGSTOP), 0);
    const auto asked = std::chrono::steady_clock::now();
    auto launched = (*own)->launch_begin(forked_spec({"true"}));
    EXPECT_FALSE(launched.has_value()) << "a stopped zygote launched";
    EXPECT_LT(std::chrono::steady_clock::now() - asked, std::chrono::seconds(30));
    EXPECT_FALSE((*own)->alive());
    EXPECT_FALSE(exists("/proc/" + std::to_string(pid))) << "left a zombie";
}

// A spec goes to the zygote in one message: one that is too large for it (an environment of
// megabytes) launches from the worker, and the zygote stays; one that fits goes there whole.
TEST_F(ZygoteLaunchTest, ASpecTooLargeForOneMessageLaunchesFromTheWorker) {
    const uint64_t before = zygote_->launches();
    LaunchSpec fits = forked_spec({"sh", "-c", "printf %s \"$LAST\""});
    for (int i = 0; i < 8; ++i) fits.env.push_back("BIG" + std::to_string(i) + "=" +
                                                     std::string(100 * 1024, 'x'));
    fits.env.push_back("LAST=arrived");
    auto [out, status] = run_through_worker(fits);
    EXPECT_EQ(out, "arrived");
    EXPECT_EQ(zygote_->launches(), before + 1);
    LaunchSpec huge = forked_spec({"true"});
    for (int i = 0; i < 100; ++i) huge.env.push_back("BIG" + std::to_string(i) + "=" +
                                                       std::string(120 * 1024, 'x'));
    auto [executed, pending] = launch_through_worker(huge);
    ASSERT_FALSE(executed) << "12 MB of environment exec'd";
    EXPECT_EQ(executed.error().code, E2BIG) << executed.error().describe();
    (void)pending.child.wait();
    EXPECT_EQ(zygote_->launches(), before + 1) << "it went to the zygote";
    EXPECT_TRUE(zygote_->alive());
}

// A zygote that took a request and then gave no answer may have started the command, which
// would be a child of ours nobody watches. Once the zygote is reaped, whatever is in the spec's
// (fresh) cgroup is killed and reaped, and the launch fails rather than run a second time from
// the worker. (Here a process of the test's stands for the command the zygote started.)
TEST_F(ZygoteLaunchTest, AnUnansweredLaunchThatStartedSomethingFailsAndEndsIt) {
    auto own = LaunchZygote::start(*worker_, std::chrono::milliseconds(300));
    ASSERT_TRUE(own) << own.error().describe();
    const test_support::PausingChild child;
    const pid_t started = child.pid();
    ASSERT_GE(started, 0);
    ASSERT_TRUE(cgroup_.attach(started));
    ASSERT_EQ(::kill((*own)->pid(), SIGSTOP), 0);
    auto launched = (*own)->launch_begin(forked_spec({"true"}));
    ASSERT_TRUE(launched.has_value()) << "launched another way: it would have run twice";
    ASSERT_FALSE(*launched);
    EXPECT_EQ(launched->error().code, ECANCELED) << launched->error().describe();
    EXPECT_FALSE((*own)->alive());
    errno = 0;
    EXPECT_EQ(::waitpid(started, nullptr, WNOHANG), -1) << "not reaped";
    EXPECT_EQ(errno, ECHILD);
}

// Before it joins anything of the session, a child keeps only the spec's descriptors and its
// report channel: not the zygote's socket to corrald (nor the worker's), which a process of the
// session could otherwise take from it (pidfd_getfd) while it is briefly dumpable after a
// credential change on a host with fs.suid_dumpable 1. Seen on a child stopped before execve.
TEST_F(ZygoteLaunchTest, AChildBeforeExecKeepsOnlyTheSpecsDescriptors) {
    LaunchSpec stuck;
    ASSERT_NO_FATAL_FAILURE(spec_stuck_in_frozen_leaf(stuck));
    stuck.confinement = &*confinement_;
    auto pending = worker_->launch_begin(stuck);
    ASSERT_TRUE(pending) << pending.error().describe();
    // Frozen when it writes the frozen leaf's cgroup.procs: its table is final by then.
    const std::string fd_dir = "/proc/" + std::to_string(pending->child.pid()) + "/fd";
    std::vector<std::string> sockets;
    std::string listing;
    size_t count = 0;
    for (int tries = 0; tries < 500; ++tries) {
        auto state = proc_text(pending->child.pid(), "cgroup");
        if (state.find(stuck_.path().substr(stuck_.path().rfind('/'))) != std::string::npos)
            break;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    for (const auto& entry : std::filesystem::directory_iterator(fd_dir)) {
        ++count;
        std::error_code error;
        const std::string target = std::filesystem::read_symlink(entry.path(), error).string();
        if (target.rfind("socket:", 0) == 0) sockets.push_back(entry.path().filename().string());
        listing += entry.path().filename().string() + " -> " + target + "\n";
    }
    EXPECT_TRUE(sockets.empty()) << "a socket in the child's table: fd " << sockets.front();
    // Stdio, the spec's descriptors as the zygote received them (its stdout and stderr, the v1
    // tasks file; the cgroup's is not kept) and the report pipe.
    EXPECT_LE(count, 3 + launch_descriptors(stuck).size() + 1) << listing;
    ASSERT_TRUE(pending->child.send_signal(SIGKILL));
    (void)pending->child.wait();
}

}  // namespace
}  // namespace corral
