// The resolv.conf isolated sandboxes see (no privileges): what it says, and that it is written
// read-only for everyone. Where the sandbox reads it (whatever the host has at /etc/resolv.conf)
// is the mount plan's part: tests/unit/mounts_test.cpp and tests/integration/egress_resolv_conf_test.cpp.
#include "sessions/network/session_resolv_conf.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tests/support/temp_dir.hpp"

namespace corral {
namespace {

class SessionResolvConf : public ::testing::Test {
  protected:
    void SetUp() override { ASSERT_FALSE(dir_.empty()); }
    test_support::TempDir temp_{"corral-resolv"};
    const std::string dir_ = temp_.path();
};

TEST_F(SessionResolvConf, NamesTheSessionResolverAndIsReadOnly) {
    auto path = write_session_resolv_conf(dir_);
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
    EXPECT_TRUE(write_session_resolv_conf(dir_));
}

}  // namespace
}  // namespace corral
