// The resolv.conf isolated sandboxes see (no privileges): what it says, that it is written
// read-only for everyone, and that a host without a regular /etc/resolv.conf to bind over is
// told apart (the sandboxes then keep the host's).
#include "sessions/network/session_resolv_conf.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace corral {
namespace {

class SessionResolvConf : public ::testing::Test {
  protected:
    void SetUp() override {
        char tmpl[] = "/tmp/corral-resolv-XXXXXX";
        dir_ = ::mkdtemp(tmpl);
        std::ofstream(dir_ + "/host-resolv.conf") << "nameserver 192.0.2.53\n";
    }
    void TearDown() override { std::filesystem::remove_all(dir_); }
    std::string dir_;
};

TEST_F(SessionResolvConf, NamesTheSessionResolverAndIsReadOnly) {
    auto path = write_session_resolv_conf(dir_, dir_ + "/host-resolv.conf");
    ASSERT_TRUE(path) << path.error().describe();
    EXPECT_EQ(*path, dir_ + "/resolv.conf");
    std::ifstream in(*path);
    const std::string text((std::istreambuf_iterator<char>(in)), {});
    EXPECT_EQ(text, session_resolv_conf_text());
    EXPECT_NE(text.find("\nnameserver 127.0.0.1\n"), std::string::npos);
    EXPECT_EQ(text.find("search"), std::string::npos);
    struct stat st {};
    ASSERT_EQ(::stat(path->c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0444u);
    // Written again over the old one (a daemon restart).
    EXPECT_TRUE(write_session_resolv_conf(dir_, dir_ + "/host-resolv.conf"));
}

TEST_F(SessionResolvConf, AHostSymlinkOrNoFileIsNotBoundOver) {
    ASSERT_EQ(::symlink("host-resolv.conf", (dir_ + "/stub").c_str()), 0);
    auto linked = write_session_resolv_conf(dir_, dir_ + "/stub");
    ASSERT_FALSE(linked);
    EXPECT_NE(linked.error().message.find("not a regular file"), std::string::npos);
    EXPECT_FALSE(write_session_resolv_conf(dir_, dir_ + "/missing"));
}

}  // namespace
}  // namespace corral
