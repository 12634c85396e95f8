// The launch zygote as its own program (isolation/launch_zygote.hpp, issue 18): corrald executes
// the corrald-launch it carries from a sealed memfd (isolation/sealed_executable.hpp). Here the
// build's copy of that image is given to LaunchZygote::start as corrald gives its own: it runs with
// a handful of mappings and nothing of ours, launches as the forked zygote does, and where it
// cannot run or would hold fewer capabilities than we do, a fork of ours serves instead.
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <gtest/gtest.h>
#include <linux/securebits.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "base/file_io.hpp"
#include "base/pipe.hpp"
#include "isolation/cgroup.hpp"
#include "isolation/confinement.hpp"
#include "isolation/launch_worker.hpp"
#include "isolation/launch_zygote.hpp"
#include "isolation/sealed_executable.hpp"
#include "tests/integration/support/test_helpers.hpp"

namespace corral {
namespace {

using test_support::drain;
using test_support::proc_text;
using test_support::unique_name;

size_t count_lines(const std::string& text) {
    size_t lines = 0;
    for (char c : text) lines += c == '\n';
    return lines;
}

size_t open_descriptors(pid_t pid) {
    size_t fds = 0;
    for ([[maybe_unused]] const auto& entry :
         std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd"))
        ++fds;
    return fds;
}

/// The image the build made for corrald to carry (supervisor/CMakeLists.txt).
const std::string kImagePath = std::string(CORRAL_BINARY_DIR) + "/supervisor/corrald-launch.image";

class ExecutedZygoteTest : public ::testing::Test {
  protected:
    void SetUp() override {
        if (::geteuid() != 0) GTEST_SKIP() << "needs root (creates cgroups)";
        if (!clone_into_cgroup_supported()) GTEST_SKIP() << "no zygote here (no CLONE_INTO_CGROUP)";
        worker_ = LaunchWorker::shared();
        ASSERT_NE(worker_, nullptr);
        auto host = discover_cgroup_host();
        ASSERT_TRUE(host) << host.error().describe();
        auto cgroup = Cgroup::create(host->v2_own, unique_name());
        ASSERT_TRUE(cgroup) << cgroup.error().describe();
        cgroup_ = std::move(*cgroup);
        auto compiled = compile_confinement(Policy{});
        ASSERT_TRUE(compiled) << compiled.error().describe();
        confinement_.emplace(std::move(*compiled));
        auto bytes = read_file(kImagePath);
        ASSERT_TRUE(bytes) << kImagePath << ": " << bytes.error().describe();
        auto image = sealed_executable(
            {reinterpret_cast<const unsigned char*>(bytes->data()), bytes->size()},
            "corrald-launch");
        ASSERT_TRUE(image) << image.error().describe();
        image_ = std::move(*image);
    }
    void TearDown() override {
        if (!cgroup_.valid()) return;
        (void)cgroup_.wait_until_empty(std::chrono::seconds(10));
        auto removed = cgroup_.remove();
        EXPECT_TRUE(removed) << removed.error().describe();
    }

    /// A fork launch (a confined spec: never one that shares our memory) of `argv` in our leaf.
    LaunchSpec forked_spec(std::vector<std::string> argv) const {
        LaunchSpec s;
        s.argv = std::move(argv);
        s.env = {"PATH=/usr/local/bin:/usr/bin:/bin"};
        s.cwd = "/";
        s.cgroup_fd = cgroup_.dir_fd();
        s.confinement = &*confinement_;
        return s;
    }

    /// What corrald does with a launch from the zygote: waits for its report, then (stdout read
    /// to its end) for the child. Returns whether it exec'd (or the setup's error), its output
    /// and its status.
    struct Ran {
        Result<bool> executed = false;
        std::string out;
        WaitStatus status;
    };
    Ran run_there(LaunchZygote& zygote, LaunchSpec s) {
        Ran ran;
        auto out = make_pipe();
        EXPECT_TRUE(out);
        if (!out) return ran;
        s.stdout_fd = out->write_end.get();
        auto started = zygote.launch_begin(s);
        out->write_end.reset();
        EXPECT_TRUE(started.has_value()) << "the zygote took no launch";
        if (!started) return ran;
        EXPECT_TRUE(*started) << started->error().describe();
        if (!*started) return ran;
        PendingLaunch& pending = **started;
        for (;;) {
            pollfd ready{pending.report.get(), POLLIN, 0};
            if (::poll(&ready, 1, 30000) != 1) {
                ran.executed = plain_error("no report");
                break;
            }
            ran.executed = read_launch_report(pending, nullptr);
            if (!ran.executed || *ran.executed) break;
        }
        ran.out = drain(out->read_end.get());
        auto status = pending.child.wait();
        EXPECT_TRUE(status) << status.error().describe();
        if (status) ran.status = *status;
        return ran;
    }

    LaunchWorker* worker_ = nullptr;
    Cgroup cgroup_;
    std::optional<Confinement> confinement_;
    UniqueFd image_;
};

// What the change is for: a clone copies the mappings of the process it clones, and the zygote is
// cloned for every command and holder. The executed one has a handful, no shared library, none of
// our environment (secrets a daemon was started with), and only stdio and its socket.
TEST_F(ExecutedZygoteTest, RunsTheCarriedProgramWithAHandfulOfMappingsAndNothingOfOurs) {
    auto zygote = LaunchZygote::start(*worker_, kSetupReportLimit, image_.get());
    ASSERT_TRUE(zygote) << zygote.error().describe();
    const pid_t pid = (*zygote)->pid();
    EXPECT_TRUE((*zygote)->executed());
    EXPECT_EQ(proc_text(pid, "comm"), "corrald-launch\n");
    std::error_code error;
    const auto exe = std::filesystem::read_symlink("/proc/" + std::to_string(pid) + "/exe", error);
    EXPECT_EQ(exe.string().rfind("/memfd:corrald-launch", 0), 0u) << exe;
    const std::string maps = proc_text(pid, "maps");
    EXPECT_LT(count_lines(maps), 30u) << maps;
    EXPECT_EQ(maps.find(".so"), std::string::npos) << "a shared library is mapped:\n" << maps;
    EXPECT_LT(count_lines(maps), count_lines(proc_text(::getpid(), "maps")) / 2);
    EXPECT_EQ(proc_text(pid, "environ"), "") << "our environment went to the zygote";
    EXPECT_LE(open_descriptors(pid), 4u) << "stdio and its socket";
    EXPECT_NE(proc_text(pid, "status").find("PPid:\t" + std::to_string(::getpid()) + "\n"),
              std::string::npos);
    // Position-independent (-static-pie), as corrald is: its code, which every holder and every
    // command until its execve shares, is not at a fixed address (a second zygote's differs).
    auto second = LaunchZygote::start(*worker_, kSetupReportLimit, image_.get());
    ASSERT_TRUE(second) << second.error().describe();
    const std::string other = proc_text((*second)->pid(), "maps");
    EXPECT_NE(maps.substr(0, maps.find('-')), other.substr(0, other.find('-')))
        << "two zygotes' programs at the same address:\n" << maps;
}

// It launches as the forked zygote does: the command is our child (CLONE_PARENT), gets its stdio
// and nothing else of any table (CVE-2024-21626: runc leaked a host directory descriptor), and a
// setup failure names its step.
TEST_F(ExecutedZygoteTest, ItsCommandsAreOursWithOnlyTheirStdioAndFailuresNameTheStep) {
    auto zygote = LaunchZygote::start(*worker_, kSetupReportLimit, image_.get());
    ASSERT_TRUE(zygote) << zygote.error().describe();
    ASSERT_TRUE((*zygote)->executed());
    Ran parent = run_there(**zygote, forked_spec({"sh", "-c", "echo $PPID; exit 3"}));
    EXPECT_EQ(parent.out, std::to_string(::getpid()) + "\n") << "the command's parent is us";
    EXPECT_TRUE(parent.status.exited);
    EXPECT_EQ(parent.status.code, 3);
    Ran listed = run_there(**zygote, forked_spec({"ls", "/proc/self/fd"}));
    EXPECT_EQ(listed.out, "0\n1\n2\n3\n");  // stdio and ls's own directory
    EXPECT_EQ(listed.status.code, 0);
    LaunchSpec missing = forked_spec({"true"});
    missing.cwd = "/nonexistent-" + unique_name();
    Ran failed = run_there(**zygote, missing);
    ASSERT_FALSE(failed.executed);
    EXPECT_EQ(failed.executed.error().code, ENOENT);
    EXPECT_NE(failed.executed.error().describe().find("chdir `" + missing.cwd + "`"),
              std::string::npos)
        << failed.executed.error().describe();
    EXPECT_EQ(failed.status.code, 127);
    EXPECT_EQ((*zygote)->launches(), 3u);
}

// An image that cannot run (here not a program at all; on a host with vm.memfd_noexec = 2, any
// memfd; under an LSM that refuses it) must not leave corrald without a zygote: a fork of ours
// serves, as before there was a program of its own.
TEST_F(ExecutedZygoteTest, AnImageThatCannotRunLeavesAForkOfOursServing) {
    const std::string text = "not a program\n";
    auto junk = sealed_executable({reinterpret_cast<const unsigned char*>(text.data()),
                                   text.size()},
                                  "not-corrald-launch");
    ASSERT_TRUE(junk) << junk.error().describe();
    auto zygote = LaunchZygote::start(*worker_, std::chrono::milliseconds(2000), junk->get());
    ASSERT_TRUE(zygote) << zygote.error().describe();
    EXPECT_FALSE((*zygote)->executed());
    Ran served = run_there(**zygote, forked_spec({"echo", "served"}));
    EXPECT_EQ(served.out, "served\n");
    EXPECT_EQ(served.status.code, 0);
}

/// Waits until `pid` (a child of ours) no longer runs: a zombie, which its zygote's bury reaps.
bool wait_until_dead(pid_t pid) {
    for (int i = 0; i < 500; ++i) {
        const std::string stat = proc_text(pid, "stat");
        if (stat.empty() || stat.find(") Z ") != std::string::npos) return true;
        ::usleep(20000);
    }
    return false;
}

// Stop 34: a dead executed zygote is started again by the launch that finds it dead, which the
// new one serves (nothing of it had started: the old one was gone before it took it). The new
// one is the carried program again, our child, and the dead one is reaped.
TEST_F(ExecutedZygoteTest, AKilledOneIsRestartedByTheNextLaunchWhichItServes) {
    auto zygote = LaunchZygote::start(*worker_, kSetupReportLimit, image_.get());
    ASSERT_TRUE(zygote) << zygote.error().describe();
    ASSERT_TRUE((*zygote)->executed());
    const pid_t first = (*zygote)->pid();
    ASSERT_EQ(::kill(first, SIGKILL), 0);
    ASSERT_TRUE(wait_until_dead(first));
    Ran served = run_there(**zygote, forked_spec({"echo", "served"}));
    EXPECT_EQ(served.out, "served\n");
    EXPECT_EQ(served.status.code, 0);
    EXPECT_EQ((*zygote)->restarts(), 1u);
    EXPECT_EQ((*zygote)->launches(), 1u) << "served by the new zygote";
    EXPECT_TRUE((*zygote)->alive());
    const pid_t second = (*zygote)->pid();
    EXPECT_NE(second, first);
    EXPECT_FALSE(std::filesystem::exists("/proc/" + std::to_string(first))) << "left a zombie";
    std::error_code error;
    const auto exe =
        std::filesystem::read_symlink("/proc/" + std::to_string(second) + "/exe", error);
    EXPECT_EQ(exe.string().rfind("/memfd:corrald-launch", 0), 0u) << exe;
    EXPECT_NE(proc_text(second, "status").find("PPid:\t" + std::to_string(::getpid()) + "\n"),
              std::string::npos);
    EXPECT_EQ(proc_text(second, "cgroup"), proc_text(::getpid(), "cgroup"));

    // Killed again within kRestartInterval: not restarted, the caller launches another way.
    ASSERT_EQ(::kill(second, SIGKILL), 0);
    ASSERT_TRUE(wait_until_dead(second));
    EXPECT_FALSE((*zygote)->launch_begin(forked_spec({"true"})).has_value());
    EXPECT_FALSE((*zygote)->alive());
    EXPECT_EQ((*zygote)->restarts(), 1u);
    EXPECT_FALSE(std::filesystem::exists("/proc/" + std::to_string(second))) << "left a zombie";
}

// A forked zygote is a copy of corrald as it was at start, before any session. Forked again now,
// it would be a copy of corrald with every session's token (issue 10.1, CVE-2019-5736: a
// sandboxed process reaching the runtime's memory), serving for as long as it lives: it is never
// restarted. (Here a junk image makes the fork serve, as vm.memfd_noexec = 2 would.)
TEST_F(ExecutedZygoteTest, AForkedOneIsNeverRestarted) {
    const std::string text = "not a program\n";
    auto junk = sealed_executable({reinterpret_cast<const unsigned char*>(text.data()),
                                   text.size()},
                                  "not-corrald-launch");
    ASSERT_TRUE(junk) << junk.error().describe();
    auto zygote = LaunchZygote::start(*worker_, std::chrono::milliseconds(2000), junk->get());
    ASSERT_TRUE(zygote) << zygote.error().describe();
    ASSERT_FALSE((*zygote)->executed());
    const pid_t pid = (*zygote)->pid();
    ASSERT_EQ(::kill(pid, SIGKILL), 0);
    ASSERT_TRUE(wait_until_dead(pid));
    for (int i = 0; i < 2; ++i) {
        EXPECT_FALSE((*zygote)->launch_begin(forked_spec({"true"})).has_value())
            << "launched by a zygote started after its death";
        EXPECT_FALSE((*zygote)->alive());
    }
    EXPECT_EQ((*zygote)->restarts(), 0u);
    EXPECT_FALSE(std::filesystem::exists("/proc/" + std::to_string(pid))) << "left a zombie";
}

/// Sets the worker thread's securebits (a thread's own credentials: run on that thread).
void set_worker_securebits(LaunchWorker& worker, int bits) {
    auto done = worker.run_in_small_table({}, [bits](std::span<const int>)
                                                  -> Result<std::vector<UniqueFd>> {
        if (::prctl(PR_SET_SECUREBITS, bits, 0, 0, 0) != 0) return sys_error("PR_SET_SECUREBITS");
        return std::vector<UniqueFd>{};
    });
    ASSERT_TRUE(done) << done.error().describe();
}

// A corrald whose root holds no capabilities through execve (systemd's SecureBits=noroot; the same
// for capabilities given as file capabilities) would start an executed zygote without them, and
// every launch from it would fail. The zygote says what it holds, and one that holds less than
// we do is not used: a fork of ours, which keeps them, serves.
TEST_F(ExecutedZygoteTest, OneThatWouldHoldFewerCapabilitiesThanWeDoIsNotUsed) {
    ASSERT_NO_FATAL_FAILURE(set_worker_securebits(*worker_, SECBIT_NOROOT));
    auto zygote = LaunchZygote::start(*worker_, kSetupReportLimit, image_.get());
    ASSERT_NO_FATAL_FAILURE(set_worker_securebits(*worker_, 0));
    ASSERT_TRUE(zygote) << zygote.error().describe();
    EXPECT_FALSE((*zygote)->executed()) << "an executed zygote without capabilities was used";
    Ran served = run_there(**zygote, forked_spec({"echo", "served"}));
    EXPECT_EQ(served.out, "served\n");
    EXPECT_EQ(served.status.code, 0);
}

// CVE-2019-5736 (a container overwrote runc's binary through /proc/<pid>/exe, and the next runc
// ran the attacker's code as root): the program every launch runs through is sealed before it is
// executed. No write, truncation or growth, neither on the descriptor nor on a new open of it
// through /proc, and the seals themselves cannot be lifted.
TEST_F(ExecutedZygoteTest, TheImageCannotBeChangedOnceSealed) {
    EXPECT_EQ(::fcntl(image_.get(), F_GET_SEALS),
              F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE);
    UniqueFd reopened(::open(("/proc/self/fd/" + std::to_string(image_.get())).c_str(),
                             O_RDWR | O_CLOEXEC));
    ASSERT_TRUE(reopened.valid()) << std::strerror(errno);
    EXPECT_EQ(::pwrite(reopened.get(), "x", 1, 0), -1);
    EXPECT_EQ(errno, EPERM);
    EXPECT_EQ(::ftruncate(reopened.get(), 1), -1);
    EXPECT_EQ(errno, EPERM);
    struct stat st {};
    ASSERT_EQ(::fstat(image_.get(), &st), 0);
    EXPECT_EQ(::ftruncate(reopened.get(), st.st_size + 4096), -1);
    EXPECT_EQ(errno, EPERM);
    EXPECT_EQ(::fcntl(reopened.get(), F_ADD_SEALS, F_SEAL_FUTURE_WRITE), -1);
    EXPECT_EQ(errno, EPERM);
    // And a running zygote's program cannot be opened for writing through its exe link. (While a
    // writable descriptor of it is open, it cannot be executed at all: ETXTBSY.)
    reopened.reset();
    auto zygote = LaunchZygote::start(*worker_, kSetupReportLimit, image_.get());
    ASSERT_TRUE(zygote) << zygote.error().describe();
    ASSERT_TRUE((*zygote)->executed());
    UniqueFd exe(::open(("/proc/" + std::to_string((*zygote)->pid()) + "/exe").c_str(),
                        O_WRONLY | O_CLOEXEC));
    if (exe.valid()) {
        EXPECT_EQ(::write(exe.get(), "x", 1), -1);
        EXPECT_EQ(errno, EPERM);
    } else {
        EXPECT_TRUE(errno == ETXTBSY || errno == EPERM || errno == EACCES) << std::strerror(errno);
    }
}

// A restart that cannot start the carried program (here it would hold fewer capabilities than we
// do, as after a change of our securebits; elsewhere vm.memfd_noexec raised, an LSM) must not
// fall back to a fork of ours as the first start does: that fork would be a copy of us with
// every session's token (issue 10.1, CVE-2019-5736). Nothing serves, the caller launches another
// way, and it is not tried again, even once kRestartInterval is over.
TEST_F(ExecutedZygoteTest, ARestartThatFailsNeverForksUsAndIsNotTriedAgain) {
    auto zygote = LaunchZygote::start(*worker_, kSetupReportLimit, image_.get());
    ASSERT_TRUE(zygote) << zygote.error().describe();
    ASSERT_TRUE((*zygote)->executed());
    const pid_t pid = (*zygote)->pid();
    ASSERT_EQ(::kill(pid, SIGKILL), 0);
    ASSERT_TRUE(wait_until_dead(pid));
    ASSERT_NO_FATAL_FAILURE(set_worker_securebits(*worker_, SECBIT_NOROOT));
    auto launched = (*zygote)->launch_begin(forked_spec({"true"}));
    ASSERT_NO_FATAL_FAILURE(set_worker_securebits(*worker_, 0));
    EXPECT_FALSE(launched.has_value()) << "launched by a zygote started after its death";
    EXPECT_FALSE((*zygote)->alive());
    EXPECT_EQ((*zygote)->restarts(), 0u);
    ::sleep(static_cast<unsigned>(LaunchZygote::kRestartInterval.count()) + 1);
    EXPECT_FALSE((*zygote)->launch_begin(forked_spec({"true"})).has_value())
        << "restarted after a restart that failed";
    EXPECT_FALSE((*zygote)->alive());
    EXPECT_EQ((*zygote)->restarts(), 0u);
}

}  // namespace
}  // namespace corral
