// Parsing of network.allow entries into loopback addresses (no privileges).
#include <gtest/gtest.h>
#include <sys/socket.h>

#include "policies/egress_destination.hpp"

namespace corral {
namespace {

TEST(EgressAllow, LocalhostBecomesIpv4Loopback) {
    auto parsed = parse_egress_destination("localhost:5432");
    ASSERT_TRUE(parsed) << parsed.error().describe();
    EXPECT_EQ(parsed->family, AF_INET);
    EXPECT_EQ(parsed->address, "127.0.0.1");
    EXPECT_EQ(parsed->port, 5432);
}

TEST(EgressAllow, AcceptsWholeLoopbackRangeAndBracketedIpv6) {
    auto v4 = parse_egress_destination("127.0.0.2:80");
    ASSERT_TRUE(v4);
    EXPECT_EQ(v4->address, "127.0.0.2");
    auto v6 = parse_egress_destination("[::1]:443");
    ASSERT_TRUE(v6);
    EXPECT_EQ(v6->family, AF_INET6);
    EXPECT_EQ(v6->address, "::1");
    EXPECT_EQ(v6->port, 443);
}

TEST(EgressAllow, RefusesNonLoopbackAndHostnames) {
    for (const char* entry : {"10.0.0.1:80", "example.com:443", "[2001:db8::1]:80", "0.0.0.0:80"}) {
        auto parsed = parse_egress_destination(entry);
        ASSERT_FALSE(parsed) << entry;
        EXPECT_EQ(parsed.error().code, EINVAL);
        EXPECT_NE(parsed.error().message.find(entry), std::string::npos);
    }
}

TEST(EgressAllow, RefusesMalformedEntries) {
    for (const char* entry :
         {"127.0.0.1", ":80", "127.0.0.1:0", "127.0.0.1:70000", "127.0.0.1:x", "::1:80"}) {
        EXPECT_FALSE(parse_egress_destination(entry)) << entry;
    }
}

}  // namespace
}  // namespace corral
