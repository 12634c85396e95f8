// Error's text: what every failure reported to a client or an operator is made of.
#include "base/error.hpp"

#include <gtest/gtest.h>

#include <cerrno>

namespace corral {
namespace {

TEST(Error, ErrnoNamesAreTheKernelsAndUnknownCodesAreNumbered) {
    EXPECT_EQ(errno_name(ENOENT), "ENOENT");
    EXPECT_EQ(errno_name(EACCES), "EACCES");
    EXPECT_EQ(errno_name(9999), "E9999");  // no name: still one word an operator can grep for
}

TEST(Error, DescribeNamesTheCodeAndContextsComeFirst) {
    Error e = sys_error(ENOENT, "open `/x`");
    e.context("mount plan").context("session s1");
    EXPECT_EQ(e.describe(), "session s1: mount plan: open `/x`: ENOENT (No such file or directory)");
    EXPECT_EQ(plain_error("no code").describe(), "no code");
    EXPECT_TRUE(policy_refusal("filesystem.hidden: cannot hide `/`").invalid_policy);
    EXPECT_FALSE(plain_error("x").invalid_policy);
}

}  // namespace
}  // namespace corral
