// Name-bound allowances and how the gate judges a direct connection with them (no privileges):
// expiry, the bound on entries, and that an allowance opens an address only as far as the rules
// in force still allow its name and the address itself (deniedCIDRs, protected ranges).
#include "sessions/network/name_allowances.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "sessions/network/egress_gate.hpp"

namespace corral {
namespace {

using namespace std::chrono_literals;
using Clock = NameAllowances::Clock;

IpAddress ip(const char* text) {
    return *IpAddress::parse(text);
}

/// The names `address` is live for at `now`, in grant order.
std::vector<std::string> names(const NameAllowances& table, const char* address,
                               Clock::time_point now) {
    std::vector<std::string> out;
    for (const auto* allowance : table.find(ip(address), now)) out.push_back(allowance->name);
    return out;
}

TEST(NameAllowances, LastsUntilItsTimeAndIsRenewedByAnotherGrant) {
    NameAllowances table;
    const auto now = Clock::now();
    auto change = table.grant(ip("10.0.0.1"), "a.test", false, now + 60s);
    EXPECT_EQ(change.added.size(), 1u);
    EXPECT_EQ(names(table, "10.0.0.1", now + 59s), std::vector<std::string>{"a.test"});
    EXPECT_TRUE(table.find(ip("10.0.0.1"), now + 60s).empty());
    EXPECT_EQ(table.next_expiry(), now + 60s);
    EXPECT_TRUE(table.grant(ip("10.0.0.1"), "a.test", false, now + 120s).added.empty());
    EXPECT_EQ(names(table, "10.0.0.1", now + 90s), std::vector<std::string>{"a.test"});
    EXPECT_EQ(table.next_expiry(), now + 120s);
    EXPECT_TRUE(table.expire(now + 100s).empty());
    EXPECT_EQ(table.expire(now + 120s), std::vector<IpAddress>{ip("10.0.0.1")});
    EXPECT_EQ(table.size(), 0u);
    EXPECT_EQ(table.next_expiry(), std::nullopt);
}

// Issue 15: two names sharing one address kept only the last one granted, so dropping or
// expiring that one closed an address another allowed name still held.
TEST(NameAllowances, OneAddressKeepsEveryNameEachWithItsOwnTime) {
    NameAllowances table;
    const auto now = Clock::now();
    EXPECT_EQ(table.grant(ip("10.0.0.1"), "a.test", false, now + 30s).added.size(), 1u);
    EXPECT_TRUE(table.grant(ip("10.0.0.1"), "b.test", false, now + 90s).added.empty());
    EXPECT_EQ(names(table, "10.0.0.1", now), (std::vector<std::string>{"a.test", "b.test"}));
    EXPECT_EQ(table.next_expiry(), now + 30s);
    // a.test's time ends: the address stays, for b.test.
    EXPECT_TRUE(table.expire(now + 30s).empty());
    EXPECT_EQ(names(table, "10.0.0.1", now + 31s), std::vector<std::string>{"b.test"});
    EXPECT_EQ(table.next_expiry(), now + 90s);
    // Dropping a name that is not the last leaves the address; the last one closes it.
    table.grant(ip("10.0.0.1"), "c.test", false, now + 90s);
    EXPECT_TRUE(table.remove_if([](const NameAllowance& a) { return a.name == "b.test"; }).empty());
    EXPECT_EQ(table.remove_if([](const NameAllowance& a) { return a.name == "c.test"; }),
              std::vector<IpAddress>{ip("10.0.0.1")});
}

TEST(NameAllowances, NamesPerAddressAreBounded) {
    NameAllowances table;
    const auto now = Clock::now();
    for (size_t i = 0; i < NameAllowances::kMaxNamesPerAddress + 4; ++i)
        table.grant(ip("10.0.0.1"), "n" + std::to_string(i) + ".test", false,
                    now + std::chrono::seconds(10 + i));
    const auto live = names(table, "10.0.0.1", now);
    EXPECT_EQ(live.size(), NameAllowances::kMaxNamesPerAddress);
    EXPECT_EQ(live.back(), "n" + std::to_string(NameAllowances::kMaxNamesPerAddress + 3) + ".test");
    EXPECT_EQ(std::count(live.begin(), live.end(), "n0.test"), 0);  // the soonest made room
}

TEST(NameAllowances, BoundedDroppingTheSoonestToExpire) {
    NameAllowances table(2);
    const auto now = Clock::now();
    table.grant(ip("10.0.0.1"), "a.test", false, now + 30s);
    table.grant(ip("10.0.0.2"), "a.test", false, now + 10s);
    table.grant(ip("10.0.0.2"), "b.test", false, now + 15s);
    auto change = table.grant(ip("10.0.0.3"), "a.test", false, now + 20s);
    EXPECT_EQ(change.dropped, std::vector<IpAddress>{ip("10.0.0.2")});
    EXPECT_EQ(table.size(), 2u);
    EXPECT_TRUE(table.find(ip("10.0.0.2"), now).empty());
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

TEST(EgressGateDirect, AnAddressStaysOpenWhileAnyOfItsNamesIsAllowed) {
    auto rules = EgressRules::compile(
        {EgressMode::custom, {"a.example.test", "b.example.test"}, {}, {}});
    ASSERT_TRUE(rules);
    EgressGate gate("s", std::move(*rules), {});
    const auto later = Clock::now() + 60s;
    gate.allowances().grant(ip("198.51.100.7"), "a.example.test", false, later);
    gate.allowances().grant(ip("198.51.100.7"), "b.example.test", false, later);
    // A PATCH drops a.example.test: b.example.test still holds the address.
    gate.set_rules(std::move(*EgressRules::compile({EgressMode::custom, {"b.example.test"}, {}, {}})));
    EXPECT_TRUE(gate.check_direct(ip("198.51.100.7"), 22).allowed);
    gate.set_rules(std::move(*EgressRules::compile({EgressMode::custom, {"c.example.test"}, {}, {}})));
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
