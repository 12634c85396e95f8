// corrald's API socket gives full rights without a token: its file mode and owner are the
// access control. The red team's second round: corrald set them by path after bind (chmod, then
// chown), so whoever could write the socket's directory could swap the fresh socket for a
// symlink in between and have root chmod 0660 / chown any file (CVE-2018-15664's
// symlink-exchange shape; CVE-2014-9357, Docker's chmod through a planted symlink). Now the
// socket is created 0660 (umask), owner and mode are checked and fixed through the directory's
// descriptor without following links, and a directory others may write is refused outright.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../integration/support/instance_leftovers.hpp"
#include "tests/support/exec_logged.hpp"

namespace corral {
namespace {

namespace fs = std::filesystem;

class DaemonSocket : public ::testing::Test {
  protected:
    void SetUp() override {
        if (::geteuid() != 0) GTEST_SKIP() << "needs root (corrald)";
        char tmpl[] = "/tmp/corral-sockdir-XXXXXX";
        ASSERT_NE(::mkdtemp(tmpl), nullptr);
        dir_ = tmpl;
        token_ = "corral-sock-" + std::to_string(::getpid());
        state_ = "/var/lib/" + token_;
    }
    void TearDown() override {
        stop();
        if (!token_.empty()) testing::remove_instance_leftovers(token_);
        std::error_code ignored;
        if (!dir_.empty()) fs::remove_all(dir_, ignored);
        if (!log_.empty()) fs::remove(log_, ignored);
        fs::remove_all(state_, ignored);
        fs::remove_all(state_ + "-policies", ignored);
    }
    /// Starts corrald on `socket`, its output into `log_`.
    void start(const fs::path& socket) {
        fs::create_directories(state_ + "-policies");
        log_ = dir_.parent_path() / (dir_.filename().string() + ".log");
        std::vector<std::string> args = {CORRAL_BINARY_DIR "/supervisor/corrald",
                                         "--socket",
                                         socket.string(),
                                         "--state-dir",
                                         state_,
                                         "--policy-dir",
                                         state_ + "-policies",
                                         "--instance",
                                         token_,
                                         "--port-range",
                                         "32760-32769"};
        pid_ = ::fork();
        if (pid_ == 0) {
            test_support::exec_logged(args, log_, test_support::LogOpen::truncate);
        }
    }
    /// Waits (bounded) for corrald to exit by itself; its exit status, or -1 if it keeps running.
    int wait_for_exit() {
        for (int i = 0; i < 1000; ++i) {
            int status = 0;
            if (::waitpid(pid_, &status, WNOHANG) == pid_) {
                pid_ = -1;
                return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        return -1;
    }
    /// Waits (bounded) for the socket to appear.
    bool wait_for_socket(const fs::path& socket) {
        for (int i = 0; i < 1000; ++i) {
            if (fs::is_socket(fs::symlink_status(socket))) return true;
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        return false;
    }
    void stop() {
        if (pid_ <= 0) return;
        ::kill(pid_, SIGTERM);
        for (int i = 0; i < 500; ++i) {
            if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
                pid_ = -1;
                return;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
        pid_ = -1;
    }
    std::string log() const {
        std::ifstream in(log_);
        std::stringstream text;
        text << in.rdbuf();
        return text.str();
    }

    fs::path dir_;
    fs::path log_;
    std::string token_;
    std::string state_;
    pid_t pid_ = -1;
};

TEST_F(DaemonSocket, ADirectoryOthersMayWriteIsRefused) {
    // 0777 without the sticky bit: anyone may rename or replace entries in it, the socket too.
    ASSERT_EQ(::chmod(dir_.c_str(), 0777), 0);
    start(dir_ / "corrald.sock");
    const int status = wait_for_exit();
    EXPECT_NE(status, -1) << "corrald served on a socket in a directory anyone may write";
    EXPECT_NE(status, 0);
    EXPECT_NE(log().find("may be written by others"), std::string::npos) << log();
}

TEST_F(DaemonSocket, TheSocketIsBornRootOwned0660) {
    const fs::path socket = dir_ / "corrald.sock";
    start(socket);
    ASSERT_TRUE(wait_for_socket(socket)) << log();
    struct stat st {};
    ASSERT_EQ(::lstat(socket.c_str(), &st), 0);
    EXPECT_TRUE(S_ISSOCK(st.st_mode));
    EXPECT_EQ(st.st_mode & 07777, 0660u);
    EXPECT_EQ(st.st_uid, 0u);
    EXPECT_EQ(st.st_gid, 0u);
    stop();
    EXPECT_FALSE(fs::exists(fs::symlink_status(socket))) << "the socket outlived corrald";
}

// A stop signal while corrald still sets its socket up takes the orderly way out: exit 0, the
// socket removed. corrald used to catch SIGTERM only once it was listening, so a signal soon
// after bind(2) killed it and left the socket (TheSocketIsBornRootOwned0660 failed so on the
// pure-v2 VM, whose slowness widens that moment). The test spins, so the signal lands then.
TEST_F(DaemonSocket, AStopSignalWhileTheSocketIsMadeStillRemovesIt) {
    const fs::path socket = dir_ / "corrald.sock";
    start(socket);
    struct stat st {};
    bool seen = false;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!(seen = ::lstat(socket.c_str(), &st) == 0) &&
           std::chrono::steady_clock::now() < until) {
    }
    ASSERT_TRUE(seen) << log();
    ASSERT_EQ(::kill(pid_, SIGTERM), 0);
    EXPECT_EQ(wait_for_exit(), 0) << log();
    EXPECT_FALSE(fs::exists(fs::symlink_status(socket))) << "the socket outlived corrald";
}

TEST_F(DaemonSocket, ALinkAtTheSocketPathIsNeitherFollowedNorChanged) {
    const fs::path victim = dir_ / "victim";
    std::ofstream(victim) << "precious\n";
    ASSERT_EQ(::chmod(victim.c_str(), 0600), 0);
    ASSERT_EQ(::symlink(victim.c_str(), (dir_ / "corrald.sock").c_str()), 0);
    start(dir_ / "corrald.sock");
    const int status = wait_for_exit();
    EXPECT_NE(status, -1) << "corrald replaced a link at its socket path";
    EXPECT_NE(status, 0);
    struct stat st {};
    ASSERT_EQ(::stat(victim.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0600u) << "the link's target was chmodded";
    EXPECT_TRUE(fs::is_symlink(dir_ / "corrald.sock"));
}

}  // namespace
}  // namespace corral
