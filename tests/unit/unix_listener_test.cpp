// corrald's Unix socket on disk (supervisor/daemon/unix_listener.hpp): born 0660 root:root, a
// live daemon's socket is never taken over, and a socket whose set-up failed after the bind is
// not left behind (a stale file would name a daemon that never listened).
#include "supervisor/daemon/unix_listener.hpp"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "tests/support/temp_dir.hpp"

namespace corral::daemon {
namespace {

namespace fs = std::filesystem;

class UnixListener : public ::testing::Test {
  protected:
    void SetUp() override {
        if (::geteuid() != 0) GTEST_SKIP() << "needs root (the socket is chowned to root)";
        ASSERT_FALSE(dir_.empty());
    }
    test_support::TempDir temp_{"corral-unix-listener"};
    const std::string dir_ = temp_.path();
};

TEST_F(UnixListener, SocketIsBorn0660RootOwned) {
    const std::string path = dir_ + "/corrald.sock";
    auto bound = bind_unix_socket(path);
    ASSERT_TRUE(bound) << bound.error().describe();
    struct stat st {};
    ASSERT_EQ(::lstat(path.c_str(), &st), 0);
    EXPECT_TRUE(S_ISSOCK(st.st_mode));
    EXPECT_EQ(st.st_mode & 07777, 0660u);
    EXPECT_EQ(st.st_uid, 0u);
    EXPECT_EQ(st.st_gid, 0u);
    // Listening, it is "in use": a second daemon must not take it over, nor remove it.
    ASSERT_EQ(::listen(bound->socket.get(), 1), 0);
    EXPECT_TRUE(unix_socket_in_use(path));
    auto second = bind_unix_socket(path);
    ASSERT_FALSE(second);
    EXPECT_EQ(second.error().code, EADDRINUSE) << second.error().describe();
    EXPECT_TRUE(fs::exists(path));
    // Closed, it is stale: the next start replaces it.
    bound->socket.reset();
    EXPECT_FALSE(unix_socket_in_use(path));
    auto third = bind_unix_socket(path);
    EXPECT_TRUE(third) << third.error().describe();
}

// The chown to root after the bind fails for a corrald that is not root (here: a child that
// became nobody, in a directory of its own): the error names the chown and the socket file is
// gone, so nothing on disk claims a daemon is there.
TEST_F(UnixListener, FailedChownAfterBindLeavesNoSocketFile) {
    constexpr uid_t kNobody = 65534;
    ASSERT_EQ(::chown(dir_.c_str(), kNobody, kNobody), 0);
    ASSERT_EQ(::chmod(dir_.c_str(), 0700), 0);
    const std::string path = dir_ + "/corrald.sock";
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        if (::setresgid(kNobody, kNobody, kNobody) != 0 || ::setresuid(kNobody, kNobody, kNobody))
            ::_exit(10);
        auto bound = bind_unix_socket(path);
        if (bound) ::_exit(11);  // chown to root worked as nobody?
        if (bound.error().describe().find("chown root:root") == std::string::npos) ::_exit(12);
        struct stat st {};
        ::_exit(::lstat(path.c_str(), &st) == 0 ? 13 : 0);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status)) << status;
    EXPECT_NE(WEXITSTATUS(status), 11) << "bind_unix_socket succeeded without chown rights";
    EXPECT_NE(WEXITSTATUS(status), 12) << "the error does not name the chown";
    EXPECT_EQ(WEXITSTATUS(status), 0) << "the socket file was left behind";
    EXPECT_FALSE(fs::exists(path));
}

}  // namespace
}  // namespace corral::daemon
