// The listing the mount plan masks host sockets from (isolation/host_unix_sockets.hpp): names byte
// for byte with their files' identities, and each socket's file where it is now. The sandbox side
// of the same (that such sockets are masked) is tests/security/socket_mask_test.cpp.
#include "isolation/host_unix_sockets.hpp"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "base/unique_fd.hpp"
#include "tests/support/temp_dir.hpp"

namespace corral {
namespace {

namespace fs = std::filesystem;

class HostUnixSockets : public ::testing::Test {
  protected:
    void SetUp() override { ASSERT_FALSE(dir_.empty()); }
    void TearDown() override { sockets_.clear(); }
    /// A listening socket bound at `path` (any bytes but NUL), kept until the test ends.
    void listen_at(const std::string& path) {
        UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
        ASSERT_TRUE(fd.valid());
        sockaddr_un address{};
        address.sun_family = AF_UNIX;
        ASSERT_LT(path.size(), sizeof address.sun_path);
        std::memcpy(address.sun_path, path.data(), path.size());
        ASSERT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof address), 0)
            << path << ": " << std::strerror(errno);
        ASSERT_EQ(::listen(fd.get(), 1), 0);
        sockets_.push_back(std::move(fd));
    }
    static bool has(const std::vector<std::string>& files, const std::string& path) {
        return std::find(files.begin(), files.end(), path) != files.end();
    }

    test_support::TempDir temp_{"corral-unix-sockets"};
    const std::string dir_ = temp_.path();
    std::vector<UniqueFd> sockets_;
};

TEST_F(HostUnixSockets, ANameIsListedByteForByteWithItsFilesInode) {
    // /proc/net/unix's text split this name in two (round 2, stop 36).
    const std::string path = dir_ + "/new\nline and space";
    listen_at(path);
    if (HasFatalFailure()) return;
    struct stat st {};
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    const auto listed = bound_unix_sockets();
    auto it = std::find_if(listed.begin(), listed.end(),
                           [&](const BoundUnixSocket& s) { return s.name == path; });
    ASSERT_NE(it, listed.end()) << "not listed under its exact name";
    EXPECT_EQ(static_cast<uint32_t>(it->inode), static_cast<uint32_t>(st.st_ino));
    EXPECT_NE(it->socket_inode, 0u);
    EXPECT_TRUE(has(host_unix_socket_files(), path));
}

TEST_F(HostUnixSockets, ASocketRenamedInItsDirectoryIsFoundUnderItsNewName) {
    listen_at(dir_ + "/bound.tmp");
    if (HasFatalFailure()) return;
    ASSERT_EQ(::rename((dir_ + "/bound.tmp").c_str(), (dir_ + "/live.sock").c_str()), 0);
    const auto files = host_unix_socket_files();
    EXPECT_TRUE(has(files, dir_ + "/live.sock"));
    EXPECT_FALSE(has(files, dir_ + "/bound.tmp"));
}

TEST_F(HostUnixSockets, ASocketFileNowAtAListedNameIsTakenAndTheRenamedOneToo) {
    // A service replacing its socket: the first bound at "svc.new" and renamed to "svc", the next
    // bound at "svc.new" again. Both files are found: the one at the name (whichever socket it
    // is: masking one more is safe) and the first one's, by its inode, in the same directory.
    listen_at(dir_ + "/svc.new");
    if (HasFatalFailure()) return;
    ASSERT_EQ(::rename((dir_ + "/svc.new").c_str(), (dir_ + "/svc").c_str()), 0);
    listen_at(dir_ + "/svc.new");
    if (HasFatalFailure()) return;
    const auto files = host_unix_socket_files();
    EXPECT_TRUE(has(files, dir_ + "/svc"));
    EXPECT_TRUE(has(files, dir_ + "/svc.new"));
}

TEST_F(HostUnixSockets, ARelativeNameIsFoundFromItsHoldersWorkingDirectory) {
    const fs::path before = fs::current_path();
    ASSERT_EQ(::chdir(dir_.c_str()), 0);
    listen_at("relative.sock");
    ASSERT_EQ(::chdir(before.c_str()), 0);
    if (HasFatalFailure()) return;
    // Its holder (this process) is elsewhere now: not found from here...
    EXPECT_FALSE(has(host_unix_socket_files(), dir_ + "/relative.sock"));
    // ...and found once its holder's directory is the one it was bound in. (Each socket's holders
    // are looked up once while it exists, so this one is bound anew.)
    sockets_.clear();
    ASSERT_EQ(::chdir(dir_.c_str()), 0);
    ::unlink("relative.sock");
    listen_at("relative.sock");
    const auto files = host_unix_socket_files();
    ASSERT_EQ(::chdir(before.c_str()), 0);
    EXPECT_TRUE(has(files, dir_ + "/relative.sock"));
}

}  // namespace
}  // namespace corral
