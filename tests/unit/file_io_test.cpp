// read_regular_file: what the daemon and `corral policy check` use to read a file someone named.
// A FIFO must not block, a device must not be read, a large file must not be loaded, and a
// `beneath` path must not leave its directory (issue 10 item 2).
#include "base/file_io.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "base/unique_fd.hpp"
#include "tests/support/temp_dir.hpp"

namespace corral {
namespace {

namespace fs = std::filesystem;

class ReadRegularFile : public ::testing::Test {
  protected:
    void SetUp() override {
        ASSERT_FALSE(temp_.path().empty());
        dir_fd_ = UniqueFd(::open(dir_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    }
    std::string write(const std::string& name, const std::string& content) {
        std::ofstream(dir_ / name) << content;
        return (dir_ / name).string();
    }
    test_support::TempDir temp_{"corral-file-io"};
    const fs::path dir_ = temp_.path();
    UniqueFd dir_fd_;
};

TEST_F(ReadRegularFile, ReadsASmallRegularFile) {
    const std::string path = write("a.yaml", "name: a\n");
    auto text = read_regular_file(AT_FDCWD, path, 100);
    ASSERT_TRUE(text) << text.error().describe();
    EXPECT_EQ(*text, "name: a\n");
    auto beneath = read_regular_file(dir_fd_.get(), "a.yaml", 100, PathScope::beneath);
    ASSERT_TRUE(beneath) << beneath.error().describe();
    EXPECT_EQ(*beneath, "name: a\n");
}

TEST_F(ReadRegularFile, RefusesAFifoWithoutBlocking) {
    ASSERT_EQ(::mkfifo((dir_ / "fifo").c_str(), 0600), 0);
    auto text = read_regular_file(AT_FDCWD, (dir_ / "fifo").string(), 100);
    ASSERT_FALSE(text);
    EXPECT_EQ(text.error().code, EINVAL);
    EXPECT_NE(text.error().message.find("is a FIFO, not a regular file"), std::string::npos);
}

TEST_F(ReadRegularFile, RefusesDevicesSocketsAndDirectories) {
    auto zero = read_regular_file(AT_FDCWD, "/dev/zero", 100);
    ASSERT_FALSE(zero);
    EXPECT_NE(zero.error().message.find("character device"), std::string::npos);
    const std::string sock = (dir_ / "sock").string();
    UniqueFd listener(::socket(AF_UNIX, SOCK_STREAM, 0));
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, sock.c_str(), sizeof address.sun_path - 1);
    ASSERT_EQ(::bind(listener.get(), reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
    auto socket = read_regular_file(AT_FDCWD, sock, 100);
    ASSERT_FALSE(socket);
    EXPECT_NE(socket.error().message.find("a socket"), std::string::npos);
    auto dir = read_regular_file(AT_FDCWD, dir_.string(), 100);
    ASSERT_FALSE(dir);
    EXPECT_EQ(dir.error().code, EISDIR);
}

TEST_F(ReadRegularFile, RefusesFilesOverTheLimit) {
    const std::string path = write("big", std::string(101, 'x'));
    auto text = read_regular_file(AT_FDCWD, path, 100);
    ASSERT_FALSE(text);
    EXPECT_EQ(text.error().code, EFBIG);
    EXPECT_NE(text.error().message.find("more than the limit of 100 bytes"), std::string::npos);
    EXPECT_TRUE(read_regular_file(AT_FDCWD, path, 101));
}

TEST_F(ReadRegularFile, BeneathNeverLeavesTheDirectory) {
    write("inside", "ok");
    fs::create_symlink("inside", dir_ / "good-link");
    fs::create_symlink("/etc/passwd", dir_ / "absolute-link");
    fs::create_symlink("../../../../etc/passwd", dir_ / "climbing-link");
    EXPECT_TRUE(read_regular_file(dir_fd_.get(), "good-link", 100, PathScope::beneath));
    for (const char* path : {"absolute-link", "climbing-link", "../x", "/etc/passwd"}) {
        auto text = read_regular_file(dir_fd_.get(), path, 1 << 20, PathScope::beneath);
        ASSERT_FALSE(text) << path;
        EXPECT_EQ(text.error().code, EXDEV) << path << ": " << text.error().describe();
    }
    // Followed, a link to a device is still a device.
    fs::create_symlink("/dev/zero", dir_ / "zero");
    auto zero = read_regular_file(AT_FDCWD, (dir_ / "zero").string(), 100);
    ASSERT_FALSE(zero);
    EXPECT_NE(zero.error().message.find("character device"), std::string::npos);
}

}  // namespace
}  // namespace corral
