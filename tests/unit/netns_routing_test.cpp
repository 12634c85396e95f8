// The transparent egress plan and its nftables script (no privileges): what each mode routes,
// which SYNs are reset, and that the session's own loopback stays its own.
#include "sessions/network/netns_routing.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace corral {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::vector<std::string> texts(const std::vector<Cidr>& cidrs) {
    std::vector<std::string> out;
    for (const auto& cidr : cidrs) out.push_back(cidr.base.to_string() + "/" + std::to_string(cidr.prefix));
    return out;
}

// Issue 15: "a refused TCP connect fails fast (ECONNREFUSED) ... every refusal is counted and
// logged": every mode routes everything to lo, so no connect() fails with ENETUNREACH before the
// output hook, where deny-all resets (and logs, for the daemon to count) every SYN but loopback's.
TEST(TransparentPlan, DenyAllRoutesEverythingToARefusalThatIsLogged) {
    auto plan = plan_transparent_egress({EgressMode::deny_all, {}, {"10.0.0.0/8"}, {}}, 4000);
    EXPECT_EQ(texts(plan.routes), std::vector<std::string>{"0.0.0.0/0"});
    EXPECT_TRUE(plan.open.empty());
    const std::string script = nft_script(plan);
    EXPECT_THAT(script, HasSubstr("ip daddr != @name_bound ip daddr 127.0.0.0/8 return\n"
                                  "    ip daddr != @name_bound tcp flags & (syn|ack) == syn log "
                                  "group 7117 prefix \"corral-egress\" reject with tcp reset\n"));
    // No nat chain where nothing can be relayed: it would turn on connection tracking in the
    // namespace, a host-wide table that any UDP the sandbox sends fills, uncharged to its
    // cgroup (issue 15, red-team review of the direct-TCP refusals, finding 1).
    EXPECT_THAT(script, Not(HasSubstr("type nat")));
    EXPECT_THAT(script, Not(HasSubstr("redirect")));
    EXPECT_THAT(nft_script(plan_transparent_egress({EgressMode::custom, {}, {}, {}}, 4000)),
                Not(HasSubstr("type nat")));
    EXPECT_EQ(nft_script(TransparentPlan{}),
              "table ip corral_egress {}\ndelete table ip corral_egress\n")
        << "the empty plan drops the table";
    // A namespace that never had the table gets it without the replacing delete (whose pending
    // destruction a later close of the nftables socket would wait for).
    EXPECT_EQ(nft_script(plan, false).rfind("table ip corral_egress {\n  set name_bound", 0), 0u);
    EXPECT_EQ(nft_script(plan, true).rfind("table ip corral_egress {}\ndelete table", 0), 0u);
}

TEST(TransparentPlan, AllowAllRoutesEverythingButResetsDeniedAndProtected) {
    auto plan = plan_transparent_egress({EgressMode::allow_all, {}, {}, {"198.51.100.0/24"}}, 4000);
    EXPECT_EQ(texts(plan.routes), std::vector<std::string>{"0.0.0.0/0"});
    const std::string script = nft_script(plan);
    EXPECT_THAT(script, HasSubstr("ip daddr { 198.51.100.0/24 } tcp flags & (syn|ack) == syn log "
                                  "group 7117 prefix \"corral-egress\" reject with tcp reset"));
    EXPECT_THAT(script, Not(HasSubstr("ip daddr != @name_bound tcp flags")))
        << "allow-all refuses only what is denied or protected";
    EXPECT_THAT(script, HasSubstr("ip daddr { 0.0.0.0/8, 169.254.0.0/16 } tcp flags"));
    EXPECT_THAT(script, HasSubstr("ip daddr 127.0.0.0/8 return"));
    EXPECT_THAT(script, HasSubstr("meta l4proto tcp redirect to :4000"));
}

TEST(TransparentPlan, CustomOpensItsIpv4CidrsOnlyAndRefusesTheRest) {
    auto plan = plan_transparent_egress(
        {EgressMode::custom,
         {"a.test"},
         {"10.1.0.0/16", "2001:db8::/32", "169.254.169.254/32", "10.1.2.0/24"},
         {}},
        4000);
    EXPECT_EQ(texts(plan.routes), std::vector<std::string>{"0.0.0.0/0"});
    EXPECT_EQ(texts(plan.open),
              (std::vector<std::string>{"10.1.0.0/16", "169.254.169.254/32", "10.1.2.0/24"}));
    EXPECT_EQ(texts(plan.protected_open), std::vector<std::string>{"169.254.169.254/32"});
    const std::string script = nft_script(plan);
    EXPECT_THAT(script, HasSubstr("ip daddr { 169.254.169.254/32 } return"));
    // A range inside another is left out: nftables refuses overlapping intervals in a set.
    EXPECT_THAT(script, HasSubstr("ip daddr != @name_bound ip daddr != { 10.1.0.0/16, "
                                  "169.254.169.254/32 } tcp flags & (syn|ack) == syn log"));
}

TEST(TransparentPlan, NamedHostLoopbackAddressesButNever127001) {
    auto plan = plan_transparent_egress(
        {EgressMode::custom, {}, {"127.0.0.14/32", "127.0.0.0/24", "127.0.0.0/8"}, {}}, 4000);
    EXPECT_EQ(texts(plan.loopback_open), std::vector<std::string>{"127.0.0.14/32"});
    const std::string script = nft_script(plan);
    EXPECT_THAT(script, HasSubstr("ip daddr != { 127.0.0.14/32 } ip daddr 127.0.0.0/8 return"));
    EXPECT_THAT(script, Not(HasSubstr("127.0.0.0/24")));
}

// Names the DNS resolver hands out (name_allowances.hpp) are redirected through the set
// `name_bound`, even inside loopback: so the table exists as soon as names may be allowed, and a
// re-created table keeps the addresses already handed out.
TEST(TransparentPlan, AllowedHostsKeepATableForNameBoundAddresses) {
    auto plain = plan_transparent_egress({EgressMode::custom, {}, {"10.1.0.0/16"}, {}}, 4000);
    EXPECT_FALSE(plain.named);
    auto plan = plan_transparent_egress({EgressMode::custom, {"registry.example.test"}, {}, {}}, 4000);
    EXPECT_TRUE(plan.named);
    EXPECT_TRUE(plan.open.empty());
    plan.named_addresses = {*IpAddress::parse("127.0.0.11"), *IpAddress::parse("2001:db8::1")};
    const std::string script = nft_script(plan);
    EXPECT_THAT(script, HasSubstr("set name_bound {\n    type ipv4_addr;\n    elements = { 127.0.0.11 }\n"));
    EXPECT_THAT(script, HasSubstr("ip daddr != @name_bound ip daddr 127.0.0.0/8 return"));
    EXPECT_THAT(script, HasSubstr("ip daddr { 0.0.0.0/8, 169.254.0.0/16 } tcp flags"));
    EXPECT_THAT(script, HasSubstr("meta l4proto tcp redirect to :4000"));
    EXPECT_TRUE(plan_transparent_egress({EgressMode::allow_all, {}, {}, {}}, 4000).named);
    EXPECT_FALSE(plan_transparent_egress({EgressMode::deny_all, {"a.test"}, {}, {}}, 4000).named);
}

}  // namespace
}  // namespace corral
