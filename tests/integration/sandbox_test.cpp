// The namespace holder against the real kernel (root): processes launched into a session's
// sandbox see only the session's pids, the policy's filesystem view (hidden /home, read-only
// /usr, a writable workdir), a network namespace with only `lo` (up), and the policy's hostname.
#include "isolation/sandbox.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>
#include <vector>

#include "base/file_io.hpp"
#include "base/pipe.hpp"
#include "isolation/child_report.hpp"
#include "isolation/holder_plan.hpp"
#include "isolation/id_range.hpp"
#include "isolation/launch_worker.hpp"
#include "isolation/launch_zygote.hpp"
#include "isolation/launcher.hpp"
#include "tests/integration/support/test_helpers.hpp"

namespace corral {
namespace {

using test_support::drain;
using test_support::exists;
using test_support::memory_holds;
using test_support::proc_text;
using test_support::status_field;
using test_support::unique_name;

/// Prints the file system type of the mount at `/` (the last one there: the visible one).
constexpr const char* kRootFsType =
    "awk '$5 == \"/\" { for (i = 7; i < NF; i++) if ($i == \"-\") t = $(i + 1) } END { print t }' "
    "/proc/self/mountinfo";

std::string root_fs_type_here() {
    auto mountinfo = read_file("/proc/self/mountinfo");
    std::string type;
    if (!mountinfo) return type;
    std::istringstream lines(*mountinfo);
    for (std::string line; std::getline(lines, line);) {
        std::istringstream fields(line);
        std::vector<std::string> f;
        for (std::string word; fields >> word;) f.push_back(word);
        auto dash = std::find(f.begin(), f.end(), "-");
        if (f.size() > 4 && f[4] == "/" && dash != f.end() && dash + 1 != f.end())
            type = *(dash + 1);
    }
    return type + "\n";
}

Policy default_like_policy() {
    Policy policy;
    policy.namespaces.pid = true;
    policy.namespaces.mount = true;
    policy.namespaces.ipc = true;
    policy.namespaces.uts = true;
    policy.namespaces.network = NetworkMode::isolated;
    policy.filesystem.read_only = {"/usr", "/lib", "/lib64", "/bin", "/etc"};
    policy.filesystem.hidden = {"/home", "/root"};
    policy.filesystem.tmpfs = {{"/tmp", 64u << 20}};
    policy.filesystem.hostname = "corral-test";
    return policy;
}

struct Output {
    std::string text;  ///< stdout and stderr together
    WaitStatus status;
};

class SandboxTest : public ::testing::Test {
  protected:
    void SetUp() override {
        if (::geteuid() != 0) GTEST_SKIP() << "needs root (namespaces, cgroups, mounts)";
        auto host = discover_cgroup_host();
        ASSERT_TRUE(host) << host.error().describe();
        auto session = Cgroup::create(host->v2_own, unique_name());
        ASSERT_TRUE(session) << session.error().describe();
        session_ = std::move(*session);
        auto holder = session_.create_child("holder");
        ASSERT_TRUE(holder) << holder.error().describe();
        holder_cgroup_ = std::move(*holder);
        char dir[] = "/var/tmp/corral-test-workdir-XXXXXX";
        ASSERT_NE(::mkdtemp(dir), nullptr);
        workdir_ = dir;
    }
    void TearDown() override {
        sandbox_.stop();
        if (session_.valid()) {
            auto status = session_.remove();
            EXPECT_TRUE(status) << status.error().describe();
        }
        if (!workdir_.empty()) {
            ::unlink((workdir_ + "/f").c_str());
            EXPECT_EQ(::rmdir(workdir_.c_str()), 0) << workdir_ << " left behind";
        }
    }

    /// `inside`: where the workdir appears. /workspace does not exist on the host, so the new
    /// root is corral's tmpfs with one bind per top-level entry; at the workdir's own host path
    /// every mount point exists and the root is one bind of the host's `/`.
    void start(const Policy& policy, std::string inside = "/workspace") {
        inside_ = std::move(inside);
        auto sandbox = Sandbox::create(policy, holder_cgroup_, {workdir_, inside_});
        ASSERT_TRUE(sandbox) << sandbox.error().describe();
        sandbox_ = std::move(*sandbox);
        ASSERT_TRUE(sandbox_.active());
    }

    /// A fresh leaf of the session for one process.
    int leaf() {
        auto child = session_.create_child("p" + std::to_string(leaves_.size()));
        EXPECT_TRUE(child) << child.error().describe();
        leaves_.push_back(std::move(*child));
        return leaves_.back().dir_fd();
    }

    LaunchSpec spec(std::vector<std::string> argv) {
        LaunchSpec s;
        s.argv = std::move(argv);
        s.env = {"PATH=/usr/bin:/bin"};
        s.cwd = inside_;
        s.cgroup_fd = leaf();
        s.namespace_holder_pidfd = sandbox_.holder_pidfd();
        s.namespace_flags = sandbox_.namespace_flags();
        return s;
    }

    Output run(LaunchSpec s) {
        int fds[2];
        EXPECT_EQ(::pipe2(fds, O_CLOEXEC), 0);
        UniqueFd read_end(fds[0]), write_end(fds[1]);
        s.stdout_fd = write_end.get();
        s.stderr_fd = write_end.get();
        auto child = launch(s);
        write_end.reset();
        EXPECT_TRUE(child) << child.error().describe();
        if (!child) return {};
        Output out{drain(read_end.get()), {}};
        auto status = child->wait();
        EXPECT_TRUE(status) << status.error().describe();
        if (status) out.status = *status;
        return out;
    }

    Output run_inside(const std::string& script) { return run(spec({"sh", "-c", script})); }

    /// Where the holder-from-a-small-process tests (launch worker, zygote) start: this process
    /// holds 300 descriptors of its own, none of which may reach the holder, and the policy is
    /// default-like with a user namespace (id maps written after the clone).
    struct ManyDescriptorsAndAUserNamespace {
        std::vector<UniqueFd> held;  ///< keep until the holder is made
        Policy policy;
    };
    static ManyDescriptorsAndAUserNamespace many_descriptors_and_a_user_namespace() {
        ManyDescriptorsAndAUserNamespace setup;
        for (int i = 0; i < 300; ++i)
            setup.held.emplace_back(::open("/dev/null", O_RDONLY | O_CLOEXEC));
        setup.policy = default_like_policy();
        setup.policy.namespaces.user = true;
        return setup;
    }

    /// The holder's setup ran as its plan says: hostname, hidden /home, read-only /usr.
    void expect_setup_as_planned() {
        auto s =
            spec({"sh", "-c", "hostname; ls /home | wc -l; touch /usr/x 2>/dev/null || echo ro"});
        s.cwd = "/";  // the workdir belongs to the host's root, not to the sandbox
        EXPECT_EQ(run(s).text, "corral-test\n0\nro\n");
    }

    Cgroup session_;
    Cgroup holder_cgroup_;
    std::vector<Cgroup> leaves_;
    std::string workdir_;
    std::string inside_;
    Sandbox sandbox_;
};

TEST_F(SandboxTest, Sandbox_PidNamespaceShowsOnlySessionProcesses) {
    start(default_like_policy());
    Output out = run_inside("ls /proc | grep -E '^[0-9]+$'");
    ASSERT_TRUE(out.status.exited && out.status.code == 0) << out.text;
    // The holder (1), the shell, ls and grep: a handful, not the host's hundreds.
    std::istringstream lines(out.text);
    std::string line;
    int count = 0;
    bool saw_init = false;
    while (std::getline(lines, line)) {
        ++count;
        saw_init |= line == "1";
    }
    EXPECT_TRUE(saw_init) << out.text;
    EXPECT_LE(count, 4) << out.text;
}

TEST_F(SandboxTest, Sandbox_HiddenHomeIsEmpty) {
    start(default_like_policy());
    Output out = run_inside("ls -A /home /root; echo done");
    EXPECT_EQ(out.text, "/home:\n\n/root:\ndone\n");
}

TEST_F(SandboxTest, Sandbox_WriteUnderUsrFailsReadOnly) {
    start(default_like_policy());
    std::string name = "/usr/" + unique_name();
    Output out = run_inside("touch " + name);
    EXPECT_FALSE(out.status.exited && out.status.code == 0);
    EXPECT_NE(out.text.find("Read-only file system"), std::string::npos) << out.text;
    struct stat st;
    EXPECT_NE(::stat(name.c_str(), &st), 0) << "file appeared on the host";
}

TEST_F(SandboxTest, Sandbox_WorkdirIsWritableAndSharedWithTheHost) {
    start(default_like_policy());
    Output out = run_inside("pwd; echo hi > f && cat /workspace/f");
    EXPECT_EQ(out.text, "/workspace\nhi\n");
    auto host = read_file(workdir_ + "/f");
    ASSERT_TRUE(host) << host.error().describe();
    EXPECT_EQ(*host, "hi\n");
}

TEST_F(SandboxTest, Sandbox_HostRootBindKeepsEveryRule) {
    Policy policy = default_like_policy();
    policy.filesystem.read_only = {"/"};
    start(policy, workdir_);
    std::string top = "/" + unique_name();
    Output out = run_inside("pwd; echo hi > f && cat f; ls -A /home /tmp; touch " + top +
                            " /usr/x 2>&1 | sed 's/.*: //'");
    EXPECT_EQ(out.text, workdir_ + "\nhi\n/home:\n\n/tmp:\nRead-only file system\n" +
                            "Read-only file system\n");
    EXPECT_FALSE(exists(top)) << "file appeared on the host";
    auto host = read_file(workdir_ + "/f");
    ASSERT_TRUE(host) << host.error().describe();
    EXPECT_EQ(*host, "hi\n");
    // The root is the host's own file system, bound once (not corral's tmpfs).
    EXPECT_EQ(run_inside(kRootFsType).text, root_fs_type_here());
}

TEST_F(SandboxTest, Sandbox_TopLevelMountPointTheHostLacksGetsACorralRoot) {
    start(default_like_policy());  // the workdir at /workspace, which the host does not have
    EXPECT_EQ(run_inside(kRootFsType).text, "tmpfs\n");
    EXPECT_FALSE(exists("/workspace")) << "corral created a mount point on the host";
}

TEST_F(SandboxTest, Sandbox_TmpIsAFreshTmpfs) {
    start(default_like_policy());
    Output out = run_inside("ls -A /tmp; echo x > /tmp/x && cat /tmp/x");
    EXPECT_EQ(out.text, "x\n");
}

TEST_F(SandboxTest, Sandbox_NetworkHasOnlyLoopbackAndItIsUp) {
    start(default_like_policy());
    Output out = run_inside("ls /sys/class/net; cat /sys/class/net/lo/flags");
    ASSERT_EQ(out.text.substr(0, 3), "lo\n") << out.text;
    unsigned long flags = std::stoul(out.text.substr(3), nullptr, 16);
    EXPECT_TRUE(flags & 0x1) << "lo is not IFF_UP: " << out.text;
}

TEST_F(SandboxTest, Sandbox_HostLoopbackListenerIsUnreachable) {
    UniqueFd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    ASSERT_TRUE(listener);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    ASSERT_EQ(::listen(listener.get(), 8), 0);
    socklen_t len = sizeof addr;
    ASSERT_EQ(::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&addr), &len), 0);
    std::string connect =
        "exec 3<>/dev/tcp/127.0.0.1/" + std::to_string(ntohs(addr.sin_port)) + " && echo connected";

    // Control: the same command outside the sandbox reaches the listener.
    LaunchSpec outside;
    outside.argv = {"bash", "-c", connect};
    outside.env = {"PATH=/usr/bin:/bin"};
    outside.cwd = "/";
    outside.cgroup_fd = leaf();
    Output control = run(outside);
    ASSERT_EQ(control.text, "connected\n") << "control failed; is bash missing?";

    start(default_like_policy());
    Output out = run(spec({"bash", "-c", connect}));
    EXPECT_EQ(out.text.find("connected\n"), std::string::npos) << out.text;
    EXPECT_FALSE(out.status.exited && out.status.code == 0);
}

TEST_F(SandboxTest, Sandbox_HostnameIsThePolicys) {
    start(default_like_policy());
    Output out = run_inside("cat /proc/sys/kernel/hostname");
    EXPECT_EQ(out.text, "corral-test\n");
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    EXPECT_NE(std::string(host), "corral-test") << "the host's hostname changed";
}

TEST_F(SandboxTest, Sandbox_TwoProcessesSeeEachOther) {
    start(default_like_policy());
    auto sleeper = launch(spec({"sleep", "60"}));
    ASSERT_TRUE(sleeper) << sleeper.error().describe();
    // NSpid: the host pid, then the pid inside the session's pid namespace.
    auto status = read_file("/proc/" + std::to_string(sleeper->pid()) + "/status");
    ASSERT_TRUE(status) << status.error().describe();
    size_t at = status->find("NSpid:");
    ASSERT_NE(at, std::string::npos);
    std::string nspid_line = status->substr(at, status->find('\n', at) - at);
    std::string inner = nspid_line.substr(nspid_line.rfind('\t') + 1);
    ASSERT_NE(inner, std::to_string(sleeper->pid()))
        << "not in a new pid namespace: " << nspid_line;

    Output out = run_inside("tr '\\0' ' ' < /proc/" + inner + "/cmdline");
    EXPECT_EQ(out.text, "sleep 60 ");
    ASSERT_TRUE(sleeper->send_signal(SIGKILL));
    auto ended = sleeper->wait();
    ASSERT_TRUE(ended);
    EXPECT_FALSE(ended->exited);
}

TEST_F(SandboxTest, Sandbox_HolderLivesInItsCgroupAndStopEndsIt) {
    start(default_like_policy());
    auto procs = read_file(holder_cgroup_.path() + "/cgroup.procs");
    ASSERT_TRUE(procs);
    EXPECT_EQ(*procs, std::to_string(sandbox_.holder_pid()) + "\n");
    sandbox_.stop();
    EXPECT_FALSE(sandbox_.active());
    auto populated = holder_cgroup_.populated();
    ASSERT_TRUE(populated);
    EXPECT_FALSE(*populated);
}

// Issue 12 item 1: wait_until_ready() blocked corrald's loop for as long as the holder took, so a
// holder stopped, frozen or stuck in a mount froze every session's API. Born into a frozen cgroup
// here, the holder never reports; after the limit it is killed and reaped and the error says why.
TEST_F(SandboxTest, Sandbox_HolderThatNeverReportsItsSetupIsKilledAfterTheLimit) {
    ASSERT_TRUE(write_file(holder_cgroup_.path() + "/cgroup.freeze", "1"));
    auto sandbox = Sandbox::start(default_like_policy(), holder_cgroup_, {workdir_, "/workspace"});
    ASSERT_TRUE(sandbox) << sandbox.error().describe();
    const auto asked = std::chrono::steady_clock::now();
    Status ready = sandbox->wait_until_ready(std::chrono::milliseconds(500));
    const auto took = std::chrono::steady_clock::now() - asked;
    ASSERT_FALSE(ready) << "a frozen holder reported its setup";
    EXPECT_EQ(ready.error().code, ETIMEDOUT) << ready.error().describe();
    EXPECT_NE(ready.error().describe().find("setup report did not come within 500 ms"),
              std::string::npos)
        << ready.error().describe();
    EXPECT_LT(took, std::chrono::seconds(30));  // a hang, not a timing: the limit is 0.5 s
    EXPECT_FALSE(sandbox->active());
    auto populated = holder_cgroup_.populated();
    ASSERT_TRUE(populated);
    EXPECT_FALSE(*populated) << "the holder was left behind";
    EXPECT_TRUE(write_file(holder_cgroup_.path() + "/cgroup.freeze", "0"));
}

TEST_F(SandboxTest, Sandbox_NoNamespacesMeansNoHolder) {
    Policy policy;
    auto sandbox = Sandbox::create(policy, holder_cgroup_, {workdir_, "/workspace"});
    ASSERT_TRUE(sandbox) << sandbox.error().describe();
    EXPECT_FALSE(sandbox->active());
}

TEST_F(SandboxTest, Sandbox_MissingReadWriteSourceIsAnErrorNamingIt) {
    Policy policy = default_like_policy();
    policy.filesystem.read_write = {"/nonexistent-corral-path"};
    auto sandbox = Sandbox::create(policy, holder_cgroup_, {workdir_, "/workspace"});
    ASSERT_FALSE(sandbox);
    EXPECT_EQ(sandbox.error().code, ENOENT);
    EXPECT_NE(sandbox.error().message.find("/nonexistent-corral-path"), std::string::npos)
        << sandbox.error().describe();
}

TEST_F(SandboxTest, Sandbox_DevIsMinimalAndUsable) {
    start(default_like_policy());
    Output out = run_inside(
        "ls /dev | tr '\\n' ' '; echo; echo x > /dev/null && head -c 4 /dev/zero | wc -c");
    EXPECT_EQ(out.text,
              "fd full null ptmx pts random shm stderr stdin stdout tty urandom zero \n4\n");
}

}  // namespace
}  // namespace corral

namespace corral {
namespace {

// DESIGN.md "Identity" (issue 10): started by root, a user namespace maps inside 0..65535 to a
// range of host ids leased to this sandbox alone, never to the host's own ids; the policy's user
// is an id inside it (strict's nobody is 65534 inside, the range's base + 65534 outside).
TEST_F(SandboxTest, Sandbox_UserNamespaceMapsInsideIdsToALeasedHostRange) {
    Policy policy = default_like_policy();
    policy.namespaces.user = true;
    policy.user.inherit = false;
    policy.user.uid = 65534;
    policy.user.gid = 65534;
    start(policy);
    auto identity = sandbox_.host_identity();
    ASSERT_TRUE(identity);
    EXPECT_TRUE(is_corral_range_id(identity->uid)) << identity->uid;
    EXPECT_EQ((identity->uid - kIdRangeFirst) % kIdRangeSize, 65534u);
    auto s = spec({"sh", "-c", "id -u; cat /proc/self/uid_map | tr -s ' '"});
    s.cwd = "/";  // the workdir belongs to the host's root, not to the sandbox
    Output out = run(s);
    EXPECT_EQ(out.text, "0\n 0 " + std::to_string(identity->uid - 65534) + " 65536\n");
}

// ---- Holders cloned from the launch worker's small descriptor table (issue 18) ----

/// The pids /proc lists as children of this process's main thread (where orphans go).
std::vector<pid_t> main_thread_children() {
    std::vector<pid_t> pids;
    std::ifstream children("/proc/self/task/" + std::to_string(::getpid()) + "/children");
    for (pid_t pid; children >> pid;) pids.push_back(pid);
    return pids;
}

/// The descriptor numbers open in process `pid`.
std::vector<int> open_descriptors_of(pid_t pid) {
    std::vector<int> fds;
    for (const auto& entry :
         std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd"))
        fds.push_back(std::stoi(entry.path().filename().string()));
    std::sort(fds.begin(), fds.end());
    return fds;
}

/// The holder's table once it is `expected`, or as it is after a bounded wait: it lets go of
/// what it inherited just after its ready report (off the session's creation path,
/// holder_main), so a test waits for that rather than race it.
std::vector<int> settled_descriptors(pid_t holder, const std::vector<int>& expected) {
    std::vector<int> kept = open_descriptors_of(holder);
    for (int i = 0; i < 500 && kept != expected; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        kept = open_descriptors_of(holder);
    }
    return kept;
}

// corrald clones holders on its launch worker: the holder's table starts as the worker's few
// descriptors, not corrald's thousands, and ends as what the holder keeps (stdio on /dev/null,
// the id range's lock as 3 with a user namespace) — nothing of the caller's (CVE-2024-21626:
// runc leaked a host cgroup directory's descriptor into the container). It is not a child of the
// main thread, whose children the orphan reaper walks (sessions/child_reaper.hpp). With a user
// namespace too, whose id maps are written after the clone.
TEST_F(SandboxTest, Sandbox_HolderFromTheSmallTableKeepsNothingOfTheCallersAndWorks) {
    const auto setup = many_descriptors_and_a_user_namespace();
    SandboxOptions options;
    options.clone_from_small_table = true;
    inside_ = "/workspace";
    auto sandbox = Sandbox::create(setup.policy, holder_cgroup_, {workdir_, inside_}, {}, options);
    ASSERT_TRUE(sandbox) << sandbox.error().describe();
    sandbox_ = std::move(*sandbox);
    ASSERT_TRUE(sandbox_.active());
    const pid_t holder = sandbox_.holder_pid();
    EXPECT_EQ(settled_descriptors(holder, {0, 1, 2, 3}), (std::vector<int>{0, 1, 2, 3}));
    const auto children = main_thread_children();
    EXPECT_EQ(std::find(children.begin(), children.end(), holder), children.end())
        << "the holder is a child of the main thread: the launch worker did not clone it";
    // Its setup ran as the plan says: mounts, hostname, the processes that join it.
    expect_setup_as_planned();
    sandbox_.stop();  // reaps it: a child of another of our threads
    EXPECT_FALSE(std::filesystem::exists("/proc/" + std::to_string(holder)));
}

/// Resident kB of process `pid`'s [heap] mapping (its brk heap), -1 when it has none.
long heap_resident_kb(pid_t pid) {
    std::ifstream smaps("/proc/" + std::to_string(pid) + "/smaps");
    bool in_heap = false;
    for (std::string line; std::getline(smaps, line);) {
        if (line.find(" [heap]") != std::string::npos) in_heap = true;
        else if (in_heap && line.rfind("Rss:", 0) == 0) return std::stol(line.substr(4));
    }
    return -1;
}

// A holder cloned on the launch worker drops its copy of the caller's heap once set up (issue
// 18: beside 800 sessions ~25 MB each holder kept shared with corrald, copied at corrald's
// every write; and it held every session's records), and keeps working: processes join it, the
// pid namespace's orphans are reaped, SIGKILL ends it.
TEST_F(SandboxTest, Sandbox_HolderFromTheSmallTableDropsItsCopyOfTheHeap) {
    std::vector<std::unique_ptr<char[]>> filler;  // small blocks: the brk heap, not mmap
    for (int i = 0; i < 100000; ++i) {
        filler.emplace_back(new char[96]);
        std::memset(filler.back().get(), 1, 96);
    }
    ASSERT_GT(heap_resident_kb(::getpid()), 8 * 1024);
    SandboxOptions options;
    options.clone_from_small_table = true;
    inside_ = "/workspace";
    auto sandbox =
        Sandbox::create(default_like_policy(), holder_cgroup_, {workdir_, inside_}, {}, options);
    ASSERT_TRUE(sandbox) << sandbox.error().describe();
    sandbox_ = std::move(*sandbox);
    const pid_t holder = sandbox_.holder_pid();
    long resident = -1;
    for (int i = 0; i < 200; ++i) {  // it drops the copy right after reporting ready
        resident = heap_resident_kb(holder);
        if (resident >= 0 && resident < 512) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_GE(resident, 0) << "no [heap] in the holder";
    EXPECT_LT(resident, 512) << "the holder kept its copy of the heap";
    // An orphan of the namespace (its parent exits at once) is the holder's to reap.
    Output out = run(spec({"sh", "-c", "sh -c 'sleep 0.1 &'; hostname"}));
    EXPECT_EQ(out.text, "corral-test\n");
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the orphan has ended
    out = run(spec({"sh", "-c", "cat /proc/[0-9]*/stat 2>/dev/null | grep -c ') Z ' || true"}));
    EXPECT_EQ(out.text, "0\n") << "an orphan stayed a zombie: the holder stopped reaping";
    auto status = read_file("/proc/" + std::to_string(holder) + "/status");
    ASSERT_TRUE(status) << "the holder died";
    EXPECT_EQ(status->find("State:\tZ"), std::string::npos) << "the holder died";
}

// The direct clone (corral run, tests) is what it was: the caller's child.
TEST_F(SandboxTest, Sandbox_HolderClonedDirectlyIsTheCallingThreadsChild) {
    start(default_like_policy());
    const auto children = main_thread_children();
    EXPECT_NE(std::find(children.begin(), children.end(), sandbox_.holder_pid()), children.end());
}

// ---- holders cloned in corrald's launch zygote (launch_zygote.hpp, issue 18) ----

/// A holder cloned where corrald clones it (clone_from_small_table) once the zygote is started:
/// in the zygote.
class ZygoteHolderTest : public SandboxTest {
  protected:
    void SetUp() override {
        SandboxTest::SetUp();
        if (IsSkipped() || HasFatalFailure()) return;
        worker_ = LaunchWorker::shared();
        ASSERT_NE(worker_, nullptr);
        zygote_ = worker_->zygote();
        if (zygote_ == nullptr) GTEST_SKIP() << "no zygote here (no CLONE_INTO_CGROUP)";
    }
    Status create(const Policy& policy, SandboxOptions options = {}) {
        options.clone_from_small_table = true;
        inside_ = "/workspace";
        auto sandbox = Sandbox::create(policy, holder_cgroup_, {workdir_, inside_}, {}, options);
        if (!sandbox) return std::move(sandbox.error());
        sandbox_ = std::move(*sandbox);
        return {};
    }
    /// Sandbox_AKilledZygoteIsReapedAndTheHolderComesFromTheWorker's checks.
    void kill_the_zygote_and_create() {
        const pid_t zygote = zygote_->pid();
        ASSERT_EQ(::kill(zygote, SIGKILL), 0);
        const uint64_t before = zygote_->holders();
        ASSERT_TRUE(create(default_like_policy()));
        EXPECT_EQ(zygote_->holders(), before);
        EXPECT_FALSE(zygote_->alive());
        EXPECT_FALSE(exists("/proc/" + std::to_string(zygote))) << "left a zombie";
        auto procs = read_file(holder_cgroup_.path() + "/cgroup.procs");
        ASSERT_TRUE(procs);
        EXPECT_EQ(*procs, std::to_string(sandbox_.holder_pid()) + "\n") << "one holder, no other";
        EXPECT_EQ(run_inside("hostname").text, "corral-test\n");
    }
    LaunchWorker* worker_ = nullptr;
    LaunchZygote* zygote_ = nullptr;
};

/// The socket inodes ("socket:[123]") open in `pid`.
std::vector<std::string> sockets_of(pid_t pid) {
    std::vector<std::string> sockets;
    for (const auto& entry :
         std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd")) {
        std::error_code error;
        const std::string target = std::filesystem::read_symlink(entry.path(), error).string();
        if (target.rfind("socket:", 0) == 0) sockets.push_back(target);
    }
    return sockets;
}

// The holder is a copy of the zygote, yet our child as before (CLONE_PARENT: reaped by our
// waits, its end seen by Sandbox as ever), not the zygote's; its table ends as exactly what it
// keeps, with no socket of the zygote's (CVE-2024-21626: runc leaked a host descriptor into the
// container); and it is non-dumpable (CVE-2019-5736: a container process reaching the runtime
// through /proc/<pid>/exe and its memory), also after its credential change in its user
// namespace. Its setup ran as the plan says.
TEST_F(ZygoteHolderTest, Sandbox_HolderFromTheZygoteIsOursKeepsOnlyItsDescriptorsAndIsNotDumpable) {
    const auto setup = many_descriptors_and_a_user_namespace();
    const uint64_t before = zygote_->holders();
    SandboxOptions options;
    options.keep_output = true;
    ASSERT_TRUE(create(setup.policy, options));
    ASSERT_TRUE(sandbox_.active());
    EXPECT_EQ(zygote_->holders(), before + 1) << "not cloned in the zygote";
    const pid_t holder = sandbox_.holder_pid();
    EXPECT_EQ(status_field(holder, "PPid"), std::to_string(::getpid()))
        << "the zygote is " << zygote_->pid();
    EXPECT_EQ(proc_text(holder, "comm"), proc_text(::getpid(), "comm"))
        << "named as a holder cloned from us, not as the zygote";
    EXPECT_EQ(settled_descriptors(holder, {0, 1, 2, 3, 4, 5, 6}),
              (std::vector<int>{0, 1, 2, 3, 4, 5, 6}))
        << "stdio, the id range's lock, the store's two ends, its signalfd for SIGCHLD";
    const auto zygote_sockets = sockets_of(zygote_->pid());
    ASSERT_FALSE(zygote_sockets.empty());
    for (const auto& socket : sockets_of(holder))
        EXPECT_EQ(std::find(zygote_sockets.begin(), zygote_sockets.end(), socket),
                  zygote_sockets.end())
            << "the holder has the zygote's " << socket;
    // /proc/<pid>/status of a dumpable process belongs to its euid (here the leased host uid,
    // root of its namespace), of a non-dumpable one to root (task_dump_owner; /proc/<pid>
    // itself always shows the euid).
    auto host = sandbox_.host_identity();
    ASSERT_TRUE(host);
    ASSERT_NE(host->uid, 0u);
    EXPECT_NE(status_field(holder, "Uid").find(std::to_string(host->uid)), std::string::npos);
    struct stat st {};
    ASSERT_EQ(::stat(("/proc/" + std::to_string(holder) + "/status").c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, 0u) << "the holder is dumpable";
    expect_setup_as_planned();
    sandbox_.stop();  // reaps it: our child
    EXPECT_FALSE(std::filesystem::exists("/proc/" + std::to_string(holder)));
}

// Issue 10.1 / CVE-2019-5736 (a sandboxed process reaching the memory of the runtime that
// started it) and warm-pool reuse bugs (one tenant's secrets left in a process the next one
// gets): a holder was a copy of corrald with every session's tokens, in its heap (dropped once
// set up) and in its other mappings (kept for the session's life). Cloned in the zygote, it is a
// copy of a process that never saw them. Here secrets made after the zygote started stand for
// the tokens of sessions made since: one in the brk heap, one large enough for malloc to mmap.
TEST_F(ZygoteHolderTest, Sandbox_HolderFromTheZygoteHoldsNoSecretOfTheCaller) {
    const std::string small = "small-secret-" + unique_name() + "-of-another-session";
    const std::string large_mark = "large-secret-" + unique_name() + "-of-another-session";
    auto small_copy = std::make_unique<std::string>(small);
    auto large = std::make_unique<std::string>(std::string(512 * 1024, 'x') + large_mark);
    ASSERT_EQ(memory_holds(::getpid(), large_mark), std::optional<bool>(true)) << "the scan works";
    ASSERT_TRUE(create(default_like_policy()));
    const pid_t holder = sandbox_.holder_pid();
    EXPECT_EQ(memory_holds(holder, large_mark), std::optional<bool>(false));
    EXPECT_EQ(memory_holds(holder, small), std::optional<bool>(false));
    EXPECT_EQ(memory_holds(zygote_->pid(), large_mark), std::optional<bool>(false));
}

// A zygote killed (OOM killer, an operator) before a holder's clone is reaped, and the holder is
// cloned from the worker as before it: one holder in its cgroup, no zygote left a zombie.
// In a process of its own (a "threadsafe" death test runs the test again in a fresh process):
// the zygote it kills is the worker's, this process's only one, which stays dead (a forked zygote
// is never restarted), so every later test of a run of the whole binary failed on it.
TEST_F(ZygoteHolderTest, Sandbox_AKilledZygoteIsReapedAndTheHolderComesFromTheWorker) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(
        {
            kill_the_zygote_and_create();
            TearDown();  // this process's cgroups and workdir: its fixture is never destroyed
            std::_Exit(HasFailure() ? 1 : 0);
        },
        ::testing::ExitedWithCode(0), "");
}

/// The smallest plan a holder runs: a pid namespace, a report pipe.
struct SmallPlan {
    HolderPlan plan;
    Pipe report;
};
std::unique_ptr<SmallPlan> small_plan() {
    auto small = std::make_unique<SmallPlan>();
    auto report = make_pipe();
    EXPECT_TRUE(report);
    if (report) small->report = std::move(*report);
    small->plan.flags = CLONE_NEWPID;
    small->plan.report_fd = small->report.write_end.get();
    return small;
}

// Before its setup, while it waits for corrald's go (its id maps), a holder cloned in the zygote
// already has no socket of the zygote's: the descriptor that reaches corrald's zygote, which a
// process of the session could take (pidfd_getfd) from a holder made dumpable by its credential
// change on an fs.suid_dumpable=1 host (CVE-2024-21626: a leaked descriptor of the runtime's).
TEST_F(ZygoteHolderTest, Sandbox_AHolderWaitingForItsGoHasNoSocketOfTheZygotes) {
    auto small = small_plan();
    auto go = make_pipe();
    ASSERT_TRUE(go);
    small->plan.go_fd = go->read_end.get();
    auto cloned = zygote_->clone_holder(small->plan, holder_cgroup_.dir_fd());
    ASSERT_TRUE(cloned.has_value());
    ASSERT_TRUE(*cloned) << cloned->error().describe();
    const pid_t holder = (*cloned)->pid();
    std::string wchan;
    for (int i = 0; i < 500 && wchan.find("pipe_read") == std::string::npos; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        wchan = proc_text(holder, "wchan");  // anon_pipe_read since 6.14
    }
    EXPECT_NE(wchan.find("pipe_read"), std::string::npos) << "not waiting for its go: " << wchan;
    const auto zygote_sockets = sockets_of(zygote_->pid());
    ASSERT_FALSE(zygote_sockets.empty());
    for (const auto& socket : sockets_of(holder))
        EXPECT_EQ(std::find(zygote_sockets.begin(), zygote_sockets.end(), socket),
                  zygote_sockets.end())
            << "the holder has the zygote's " << socket;
    go->write_end.reset();  // corrald gave up: the holder ends without a step
    auto status = (*cloned)->wait();
    ASSERT_TRUE(status) << status.error().describe();
    EXPECT_EQ(status->code, 127);
}

// A zygote that stops answering during a holder's clone is given up after its limit (killed,
// reaped); as it cloned nothing (the holder's fresh cgroup is empty), the caller may clone
// another way, and nothing is left behind.
TEST_F(ZygoteHolderTest, Sandbox_ASilentZygoteIsGivenUpAndNothingIsLeftInTheHoldersCgroup) {
    auto own = LaunchZygote::start(*worker_, std::chrono::milliseconds(300));
    ASSERT_TRUE(own) << own.error().describe();
    const pid_t pid = (*own)->pid();
    ASSERT_EQ(::kill(pid, SIGSTOP), 0);
    auto small = small_plan();
    auto cloned = (*own)->clone_holder(small->plan, holder_cgroup_.dir_fd());
    EXPECT_FALSE(cloned.has_value()) << "a stopped zygote cloned a holder";
    EXPECT_FALSE((*own)->alive());
    EXPECT_FALSE(exists("/proc/" + std::to_string(pid))) << "left a zombie";
    auto procs = read_file(holder_cgroup_.path() + "/cgroup.procs");
    ASSERT_TRUE(procs);
    EXPECT_EQ(*procs, "");
}

// A zygote that took a holder's request and then gave no answer may have cloned it: once the
// zygote is reaped, what is in the holder's cgroup is ended and the clone fails, never made a
// second time (here a process of ours stands for the holder it cloned).
TEST_F(ZygoteHolderTest, Sandbox_AnUnansweredCloneThatStartedSomethingFailsAndEndsIt) {
    auto own = LaunchZygote::start(*worker_, std::chrono::milliseconds(300));
    ASSERT_TRUE(own) << own.error().describe();
    const test_support::PausingChild child;
    const pid_t started = child.pid();
    ASSERT_GE(started, 0);
    ASSERT_TRUE(holder_cgroup_.attach(started));
    ASSERT_EQ(::kill((*own)->pid(), SIGSTOP), 0);
    auto small = small_plan();
    auto cloned = (*own)->clone_holder(small->plan, holder_cgroup_.dir_fd());
    ASSERT_TRUE(cloned.has_value()) << "cloned another way: there would be two holders";
    ASSERT_FALSE(*cloned);
    EXPECT_EQ(cloned->error().code, ECANCELED) << cloned->error().describe();
    errno = 0;
    EXPECT_EQ(::waitpid(started, nullptr, WNOHANG), -1) << "not reaped";
    EXPECT_EQ(errno, ECHILD);
}

// The zygote reads a holder's plan as it reads a launch: a field it cannot take is refused with
// its name, nothing is cloned, and the zygote serves on.
TEST_F(ZygoteHolderTest, Sandbox_AMalformedHolderRequestIsRefusedNamingTheField) {
    auto small = small_plan();
    MountOp bad;
    bad.kind = static_cast<MountOp::Kind>(0x7777);
    bad.step = "no such op";
    small->plan.flags |= CLONE_NEWNS;
    small->plan.mounts.ops.push_back(bad);
    const uint64_t before = zygote_->holders();
    auto cloned = zygote_->clone_holder(small->plan, holder_cgroup_.dir_fd());
    ASSERT_TRUE(cloned.has_value());
    ASSERT_FALSE(*cloned) << "a holder was cloned with op kind 0x7777";
    EXPECT_EQ(cloned->error().code, EPROTO);
    EXPECT_NE(cloned->error().describe().find("mount op kind out of range"), std::string::npos)
        << cloned->error().describe();
    EXPECT_TRUE(zygote_->alive());
    EXPECT_EQ(zygote_->holders(), before);
    auto procs = read_file(holder_cgroup_.path() + "/cgroup.procs");
    ASSERT_TRUE(procs);
    EXPECT_EQ(*procs, "");
    // And the next one is cloned there.
    auto good = small_plan();
    auto next = zygote_->clone_holder(good->plan, holder_cgroup_.dir_fd());
    ASSERT_TRUE(next.has_value());
    ASSERT_TRUE(*next) << next->error().describe();
    good->report.write_end.reset();
    auto report = read_report(good->report.read_end.get());
    ASSERT_TRUE(report) << report.error().describe();
    ASSERT_TRUE(*report);
    EXPECT_EQ((*report)->kind, ChildReport::ready);
    ASSERT_TRUE((*next)->send_signal(SIGKILL));
    EXPECT_TRUE((*next)->wait());
}

}  // namespace
}  // namespace corral
