// `corral run` killed before its job ended: the job and the run's cgroups end with it.
//
// Stop 44's operator probe: `corral run --timeout 2s -- sleep 304`, then SIGKILL to corral run
// (what a CI runner sends when it cancels a job), left sleep 304 running, reparented to PID 1,
// with no supervisor and no timeout, and its cgroup populated. The command leads its own session,
// so the runner's kill of corral run's process group did not reach it either. Here corral run is
// started in a process group of its own, as a CI step is, and the whole group gets SIGKILL.

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "isolation/cgroup.hpp"
#include "isolation/cgroup_placement.hpp"
#include "tests/support/temp_dir.hpp"

namespace fs = std::filesystem;

namespace corral {
namespace {

const std::string kCorral = std::string(CORRAL_BINARY_DIR) + "/supervisor/corral";

/// Pids whose command line is exactly `sleep <seconds>` (the test's own markers: the number is
/// made of this test process's pid, so no other process has it).
std::vector<pid_t> sleeping(const std::string& seconds) {
    const std::string wanted = std::string("sleep") + '\0' + seconds + '\0';
    std::vector<pid_t> found;
    std::error_code ignored;
    for (const auto& entry : fs::directory_iterator("/proc", ignored)) {
        const std::string name = entry.path().filename();
        if (name.find_first_not_of("0123456789") != std::string::npos) continue;
        // read(2), not a stream: a process that ends while it is read fails the read with ESRCH,
        // which libstdc++'s filebuf throws (a flake in the pure-v2 VM).
        const int fd = ::open((entry.path() / "cmdline").c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) continue;
        std::string cmdline;
        char buffer[256];
        for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) > 0;)
            cmdline.append(buffer, static_cast<size_t>(n));
        ::close(fd);
        if (cmdline == wanted) found.push_back(std::stoi(name));
    }
    return found;
}

/// Directories named `name` below `root`, at most `depth` levels down.
void find_named(const fs::path& root, const std::string& name, int depth,
                std::vector<fs::path>& out) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(root, ec)) {
        if (!entry.is_directory(ec) || entry.is_symlink(ec)) continue;
        if (entry.path().filename() == name) out.push_back(entry.path());
        if (depth > 1) find_named(entry.path(), name, depth - 1, out);
    }
}

template <class Check>
bool within(std::chrono::seconds bound, Check check) {
    const auto until = std::chrono::steady_clock::now() + bound;
    while (!check()) {
        if (std::chrono::steady_clock::now() >= until) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return true;
}

class CorralRunKilled : public ::testing::TestWithParam<const char*> {
  protected:
    void SetUp() override {
        if (::geteuid() != 0) GTEST_SKIP() << "needs root (cgroups and namespaces)";
        ASSERT_FALSE(dir_.path().empty());
        // The sandbox may reach the job directory as its own range (no idmapped mounts here).
        ASSERT_EQ(::chmod(dir_.path().c_str(), 0777), 0);
        auto host = discover_cgroup_host();
        ASSERT_TRUE(host) << host.error().describe();
        auto plan = plan_cgroup_placement(*host, observe_placement_facts(*host, {}));
        v2_own_ = plan.base.empty() ? host->v2_own : plan.base;
    }
    /// Whatever a failed run left is the test's to end: the markers by pid, the run's cgroups
    /// (made by this test's corral run) by their own cgroup.kill.
    void TearDown() override {
        for (const auto& marker : markers_)
            for (pid_t pid : sleeping(marker)) ::kill(pid, SIGKILL);
        if (corral_pid_ <= 0) return;
        for (const auto& dir : run_cgroups()) {
            std::ofstream(dir / "cgroup.kill") << "1";
            within(std::chrono::seconds(5), [&] {
                std::ifstream events(dir / "cgroup.events");
                std::string text((std::istreambuf_iterator<char>(events)), {});
                return text.find("populated 0") != std::string::npos;
            });
            (void)Cgroup::remove_empty_tree(dir.parent_path(), dir.filename());
        }
        for (const auto& dir : v1_cgroups()) ::rmdir(dir.c_str());
    }

    std::string run_name() const { return "corral-run-" + std::to_string(corral_pid_); }
    std::vector<fs::path> run_cgroups() const {
        std::vector<fs::path> found;
        if (fs::exists(v2_own_ + "/" + run_name())) found.push_back(v2_own_ + "/" + run_name());
        return found;
    }
    std::vector<fs::path> v1_cgroups() const {
        std::vector<fs::path> found;
        for (const char* controller : {"memory", "pids", "cpu,cpuacct", "blkio"})
            find_named(fs::path("/sys/fs/cgroup") / controller, run_name(), 4, found);
        return found;
    }

    test_support::TempDir dir_{"corral-run-killed"};
    std::string v2_own_;
    pid_t corral_pid_ = -1;
    std::vector<std::string> markers_;
};

TEST_P(CorralRunKilled, TheJobAndItsCgroupsEndWithCorralRunAndItsProcessGroup) {
    std::string policy = GetParam();
    if (policy == "limits") {  // v1 limit cgroups on a hybrid host, v2 controllers on pure v2
        std::ofstream(dir_.path() + "/limits.yaml")
            << "name: limits\nextends: default\nlimits: { memory: 256Mi, pids: 64 }\n";
        policy = dir_.path() + "/limits.yaml";
    }
    const std::string background = std::to_string(700000 + ::getpid() % 100000);
    const std::string foreground = std::to_string(800000 + ::getpid() % 100000);
    markers_ = {background, foreground};
    // A daemon-like child of the command and the command itself; a timeout that never comes.
    const std::string script = "sleep " + background + " & exec sleep " + foreground;

    corral_pid_ = ::fork();
    ASSERT_GE(corral_pid_, 0);
    if (corral_pid_ == 0) {
        ::setpgid(0, 0);  // a CI step: a process group of its own
        const int null = ::open("/dev/null", O_RDWR);
        ::dup2(null, 0);
        ::dup2(null, 1);
        ::dup2(null, 2);
        if (::chdir(dir_.path().c_str()) != 0) ::_exit(99);
        ::execl(kCorral.c_str(), "corral", "run", "--policy", policy.c_str(), "--timeout", "600s",
                "--", "sh", "-c", script.c_str(), static_cast<char*>(nullptr));
        ::_exit(98);
    }
    ::setpgid(corral_pid_, corral_pid_);
    ASSERT_TRUE(within(std::chrono::seconds(20), [&] {
        return !sleeping(background).empty() && !sleeping(foreground).empty();
    })) << "the job did not start";

    ASSERT_EQ(::kill(-corral_pid_, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(::waitpid(corral_pid_, &status, 0), corral_pid_);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

    EXPECT_TRUE(within(std::chrono::seconds(10), [&] {
        return sleeping(background).empty() && sleeping(foreground).empty();
    })) << "the job outlived corral run";
    EXPECT_TRUE(within(std::chrono::seconds(10), [&] { return run_cgroups().empty(); }))
        << "the run's cgroup " << v2_own_ << "/" << run_name() << " is still there";
    EXPECT_TRUE(within(std::chrono::seconds(10), [&] { return v1_cgroups().empty(); }))
        << "a v1 cgroup of the run is still there";
}

INSTANTIATE_TEST_SUITE_P(Policies, CorralRunKilled,
                         ::testing::Values("none", "default", "limits"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace corral
