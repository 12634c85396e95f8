// Name-bound allowances and how the gate judges a direct connection with them (no privileges):
// expiry, the bound on entries, and that an allowance opens an address only as far as the rules
// in force still allow its name and the address itself (deniedCIDRs, protected ranges).
#include "sessions/network/name_allowances.hpp"

#include <gtest/gtest.h>

#include "sessions/network/egress_gate.hpp"

namespace corral {
namespace {

using namespace std::chrono_literals;
using Clock = NameAllowances::Clock;

IpAddress ip(const char* text) {
    return *IpAddress::parse(text);
}

TEST(NameAllowances, LastsUntilItsTimeAndIsRenewedByAnotherGrant) {
    NameAllowances table;
    const auto now = Clock::now();
    auto change = table.grant(ip("10.0.0.1"), "a.test", false, now + 60s);
    EXPECT_EQ(change.added.size(), 1u);
    ASSERT_NE(table.find(ip("10.0.0.1"), now + 59s), nullptr);
    EXPECT_EQ(table.find(ip("10.0.0.1"), now + 59s)->name, "a.test");
    EXPECT_EQ(table.find(ip("10.0.0.1"), now + 60s), nullptr);
    EXPECT_TRUE(table.grant(ip("10.0.0.1"), "b.test", false, now + 120s).added.empty());
    EXPECT_EQ(table.find(ip("10.0.0.1"), now + 90s)->name, "b.test");
    EXPECT_TRUE(table.expire(now + 100s).empty());
    EXPECT_EQ(table.expire(now + 120s), std::vector<IpAddress>{ip("10.0.0.1")});
    EXPECT_EQ(table.size(), 0u);
}

TEST(NameAllowances, BoundedDroppingTheSoonestToExpire) {
    NameAllowances table(2);
    const auto now = Clock::now();
    table.grant(ip("10.0.0.1"), "a.test", false, now + 30s);
    table.grant(ip("10.0.0.2"), "a.test", false, now + 10s);
    auto change = table.grant(ip("10.0.0.3"), "a.test", false, now + 20s);
    EXPECT_EQ(change.dropped, std::vector<IpAddress>{ip("10.0.0.2")});
    EXPECT_EQ(table.size(), 2u);
    EXPECT_EQ(table.find(ip("10.0.0.2"), now), nullptr);
}

TEST(EgressGateDirect, AllowanceOpensAnAddressOnlyWhileItsNameIsAllowed) {
    auto rules = EgressRules::compile({EgressMode::custom, {"registry.example.test"}, {}, {}});
    ASSERT_TRUE(rules);
    EgressGate gate("s", std::move(*rules), {});
    EXPECT_FALSE(gate.check_direct(ip("198.51.100.7"), 22).allowed);
    gate.allowances().grant(ip("198.51.100.7"), "registry.example.test", false, Clock::now() + 60s);
    EXPECT_TRUE(gate.check_direct(ip("198.51.100.7"), 22).allowed);
    // A PATCH that drops the name closes it, whatever the table still holds.
    auto other = EgressRules::compile({EgressMode::custom, {"other.example.test"}, {}, {}});
    gate.set_rules(std::move(*other));
    EXPECT_FALSE(gate.check_direct(ip("198.51.100.7"), 22).allowed);
}

TEST(EgressGateDirect, DeniedAndProtectedAddressesStayClosedDespiteAnAllowance) {
    auto rules = EgressRules::compile(
        {EgressMode::custom, {"registry.example.test"}, {}, {"198.51.100.0/24"}});
    ASSERT_TRUE(rules);
    EgressGate gate("s", std::move(*rules), {});
    const auto later = Clock::now() + 60s;
    gate.allowances().grant(ip("198.51.100.7"), "registry.example.test", false, later);
    gate.allowances().grant(ip("169.254.169.254"), "registry.example.test", false, later);
    gate.allowances().grant(ip("127.0.0.11"), "registry.example.test", false, later);
    EXPECT_EQ(gate.check_direct(ip("198.51.100.7"), 22).rule, "deniedCIDRs 198.51.100.0/24");
    EXPECT_FALSE(gate.check_direct(ip("169.254.169.254"), 80).allowed);
    EXPECT_FALSE(gate.check_direct(ip("127.0.0.11"), 80).allowed) << "loopback from DNS";
    // From the operator's hosts file (pinned), a loopback address is the operator's choice.
    gate.allowances().grant(ip("127.0.0.11"), "registry.example.test", true, later);
    EXPECT_TRUE(gate.check_direct(ip("127.0.0.11"), 80).allowed);
}

TEST(EgressGateLog, RefusalsAreAllCountedButTheLogIsBounded) {
    std::vector<std::string> lines;
    auto rules = EgressRules::compile({EgressMode::deny_all, {}, {}, {}});
    EgressGate gate("s", std::move(*rules),
                    {nullptr, [&](const std::string& l) { lines.push_back(l); }, {}});
    for (int i = 0; i < 1000; ++i) gate.refuse("x.test (DNS)", "mode deny-all");
    EXPECT_EQ(gate.refused(), 1000u);
    EXPECT_EQ(lines.size(), EgressGate::kLogBurst);
}

}  // namespace
}  // namespace corral
