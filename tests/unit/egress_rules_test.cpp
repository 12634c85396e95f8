// The egress decision (policies/egress_rules.hpp) and the `network.egress` policy keys, without
// privileges: CIDR and host pattern parsing, name and address verdicts in the three modes,
// deniedCIDRs winning, the protected ranges (cloud metadata) and line:column diagnostics.
#include "policies/egress_rules.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>

#include "policies/policy_parser.hpp"

namespace corral {
namespace {

using ::testing::HasSubstr;

IpAddress ip(const char* text) {
    auto address = IpAddress::parse(text);
    EXPECT_TRUE(address) << text;
    return address.value_or(IpAddress{});
}

EgressRules rules(EgressSpec spec, std::vector<std::string> allow = {}) {
    auto compiled = EgressRules::compile(spec, allow);
    EXPECT_TRUE(compiled) << compiled.error().describe();
    return compiled ? *compiled : *EgressRules::compile({});
}

TEST(EgressCidr, ParsesBlocksAndBareAddresses) {
    auto v4 = parse_cidr("10.0.0.0/8");
    ASSERT_TRUE(v4);
    EXPECT_TRUE(v4->contains(ip("10.200.1.2")));
    EXPECT_FALSE(v4->contains(ip("11.0.0.1")));
    auto bare = parse_cidr("192.0.2.7");
    ASSERT_TRUE(bare);
    EXPECT_EQ(bare->prefix, 32u);
    EXPECT_TRUE(bare->contains(ip("192.0.2.7")));
    EXPECT_FALSE(bare->contains(ip("192.0.2.8")));
    auto v6 = parse_cidr("2001:db8::/32");
    ASSERT_TRUE(v6);
    EXPECT_TRUE(v6->contains(ip("2001:db8:1::5")));
    EXPECT_FALSE(v6->contains(ip("10.0.0.1")));
    auto all = parse_cidr("0.0.0.0/0");
    ASSERT_TRUE(all);
    EXPECT_TRUE(all->contains(ip("203.0.113.9")));
}

TEST(EgressCidr, RefusesMalformedWithTheReason) {
    struct Case {
        const char* text;
        const char* reason;
    } cases[] = {{"10.0.0/8", "expected a CIDR"},
                 {"10.0.0.0/33", "from 0 to 32"},
                 {"10.0.0.0/", "from 0 to 32"},
                 {"10.0.0.0/8x", "from 0 to 32"},
                 {"fd00::/129", "from 0 to 128"},
                 {"10.1.2.3/8", "host bits"},
                 {"example.com/8", "expected a CIDR"},
                 {"", "expected a CIDR"}};
    for (const auto& c : cases) {
        auto parsed = parse_cidr(c.text);
        ASSERT_FALSE(parsed) << c.text;
        EXPECT_EQ(parsed.error().code, EINVAL);
        EXPECT_THAT(parsed.error().message, HasSubstr(c.reason)) << c.text;
        EXPECT_THAT(parsed.error().message, HasSubstr(std::string("`") + c.text + "`"));
    }
}

TEST(EgressCidr, Ipv4MappedIpv6IsJudgedAsIpv4) {
    auto mapped = IpAddress::parse("::ffff:169.254.169.254");
    ASSERT_TRUE(mapped);
    EXPECT_EQ(mapped->family, AF_INET);
    EXPECT_EQ(mapped->to_string(), "169.254.169.254");
}

// A block written in IPv4-mapped IPv6 notation counts its prefix on 128 bits; every address
// judged is normalised to IPv4 first, so the block must mean the IPv4 block it names. Before, a
// deniedCIDRs entry ::ffff:10.0.0.0/104 was refused ("0 to 32") and ::ffff:10.0.0.0/8 was
// silently read as the IPv4 10.0.0.0/8 (a different, narrower or wider, block than written).
TEST(EgressCidr, Ipv4MappedBlocksMeanTheIpv4BlockTheyName) {
    auto mapped = parse_cidr("::ffff:10.0.0.0/104");
    ASSERT_TRUE(mapped) << mapped.error().describe();
    EXPECT_EQ(mapped->prefix, 8u);
    EXPECT_TRUE(mapped->contains(ip("10.200.1.2")));
    EXPECT_TRUE(mapped->contains(ip("::ffff:10.1.1.1")));
    EXPECT_FALSE(mapped->contains(ip("11.0.0.1")));
    auto host = parse_cidr("::ffff:192.0.2.7");
    ASSERT_TRUE(host);
    EXPECT_EQ(host->prefix, 32u);
    EXPECT_TRUE(host->contains(ip("192.0.2.7")));
    auto bracketed = parse_cidr("[::ffff:192.0.2.0]/120");
    ASSERT_TRUE(bracketed);
    EXPECT_TRUE(bracketed->contains(ip("192.0.2.99")));

    for (const char* wide : {"::ffff:10.0.0.0/8", "::ffff:0.0.0.0/95"}) {
        auto refused = parse_cidr(wide);
        ASSERT_FALSE(refused) << wide;
        EXPECT_THAT(refused.error().message, HasSubstr("prefix from 96 to 128")) << wide;
    }
    auto host_bits = parse_cidr("::ffff:10.1.2.3/104");
    ASSERT_FALSE(host_bits);
    EXPECT_THAT(host_bits.error().message, HasSubstr("below the /104 prefix"));
    auto too_long = parse_cidr("::ffff:10.0.0.0/129");
    ASSERT_FALSE(too_long);
    EXPECT_THAT(too_long.error().message, HasSubstr("from 0 to 128"));

    // As a deniedCIDRs entry it wins over an allowed IPv4 block.
    auto r = rules({EgressMode::custom, {}, {"10.0.0.0/8"}, {"::ffff:10.9.0.0/112"}});
    EXPECT_FALSE(r.check_address(ip("10.9.1.1"), 80, false).allowed);
    EXPECT_TRUE(r.check_address(ip("10.8.1.1"), 80, false).allowed);
}

TEST(EgressHosts, ValidatesPatterns) {
    for (const char* good : {"registry.npmjs.org", "*.example.com", "Example.COM.", "a_b.test",
                             "localhost", "x-1.example.test"})
        EXPECT_EQ(check_host_pattern(good), "") << good;
    struct Case {
        const char* pattern;
        const char* reason;
    } bad[] = {{"*", "mode: allow-all"},
               {"foo.*.com", "whole first label"},
               {"*foo.com", "whole first label"},
               {"*.com", "two labels"},
               {"**.example.com", "whole first label"},
               {"10.0.0.1", "allowedCIDRs"},
               {"example.com:443", "no ports"},
               {"https://example.com", "no ports"},
               {"-bad.example.com", "starting or ending with -"},
               {"a..b", "empty label"},
               {"", "empty name"}};
    for (const auto& c : bad)
        EXPECT_THAT(check_host_pattern(c.pattern), HasSubstr(c.reason)) << c.pattern;
}

TEST(EgressHosts, WildcardMatchesSubdomainsOnly) {
    EXPECT_TRUE(host_matches("*.example.com", "a.example.com"));
    EXPECT_TRUE(host_matches("*.example.com", "a.b.EXAMPLE.com."));
    EXPECT_FALSE(host_matches("*.example.com", "example.com"));
    EXPECT_FALSE(host_matches("*.example.com", "badexample.com"));
    EXPECT_FALSE(host_matches("*.example.com", "example.com.evil.test"));
    EXPECT_TRUE(host_matches("Registry.Example.Test", "registry.example.test."));
    EXPECT_FALSE(host_matches("registry.example.test", "xregistry.example.test"));
}

TEST(EgressDecision, DenyAllRefusesNamesAndAddresses) {
    auto r = rules({EgressMode::deny_all, {"a.test"}, {"10.0.0.0/8"}, {}});
    EXPECT_FALSE(r.check_name("a.test").allowed);
    EXPECT_EQ(r.check_name("a.test").rule, "mode deny-all");
    EXPECT_FALSE(r.check_address(ip("10.0.0.1"), 80, true).allowed);
}

TEST(EgressDecision, AllowAllOpensPublicButNotProtected) {
    auto r = rules({EgressMode::allow_all, {}, {}, {}});
    EXPECT_TRUE(r.check_name("anything.test").allowed);
    EXPECT_TRUE(r.check_address(ip("203.0.113.5"), 443, true).allowed);
    for (const char* protected_address :
         {"169.254.169.254", "127.0.0.1", "0.0.0.0", "::1", "fe80::1", "fd00:ec2::254",
          "::ffff:127.0.0.1"}) {
        auto verdict = r.check_address(ip(protected_address), 80, true);
        EXPECT_FALSE(verdict.allowed) << protected_address;
        EXPECT_THAT(verdict.rule, HasSubstr("protected range")) << protected_address;
    }
}

TEST(EgressDecision, MetadataOpensOnlyWhenNamedExplicitly) {
    auto broad = rules({EgressMode::custom, {}, {"0.0.0.0/0", "::/0"}, {}});
    EXPECT_FALSE(broad.check_address(ip("169.254.169.254"), 80, false).allowed);
    EXPECT_FALSE(broad.check_address(ip("fd00:ec2::254"), 80, false).allowed);
    EXPECT_TRUE(broad.check_address(ip("198.51.100.1"), 80, false).allowed);
    auto named = rules({EgressMode::custom, {}, {"169.254.169.254/32"}, {}});
    auto verdict = named.check_address(ip("169.254.169.254"), 80, false);
    EXPECT_TRUE(verdict.allowed);
    EXPECT_EQ(verdict.rule, "allowedCIDRs 169.254.169.254/32");
}

TEST(EgressDecision, CustomNamesAndCidrs) {
    auto r = rules({EgressMode::custom, {"registry.example.test", "*.cdn.test"}, {"10.1.0.0/16"},
                    {}});
    EXPECT_TRUE(r.check_name("registry.example.test").allowed);
    EXPECT_TRUE(r.check_name("x.cdn.test").allowed);
    auto other = r.check_name("other.example.test");
    EXPECT_FALSE(other.allowed);
    EXPECT_THAT(other.rule, HasSubstr("not in allowedHosts"));
    // An allowed name reaches whatever (unprotected) address it resolves to...
    EXPECT_TRUE(r.check_address(ip("203.0.113.1"), 443, true).allowed);
    // ...a refused name only addresses allowedCIDRs opens.
    EXPECT_FALSE(r.check_address(ip("203.0.113.1"), 443, false).allowed);
    EXPECT_TRUE(r.check_address(ip("10.1.2.3"), 443, false).allowed);
    EXPECT_TRUE(r.names_reach_cidrs());
    EXPECT_FALSE(rules({EgressMode::custom, {"a.test"}, {}, {}}).names_reach_cidrs());
}

TEST(EgressDecision, DeniedCidrsWinOverBothAllowLists) {
    auto r = rules({EgressMode::custom, {"registry.example.test"}, {"10.0.0.0/8"},
                    {"10.9.0.0/16"}});
    auto verdict = r.check_address(ip("10.9.1.1"), 80, true);
    EXPECT_FALSE(verdict.allowed);
    EXPECT_EQ(verdict.rule, "deniedCIDRs 10.9.0.0/16");
    EXPECT_TRUE(r.check_address(ip("10.8.1.1"), 80, false).allowed);
    auto all = rules({EgressMode::allow_all, {}, {}, {"198.51.100.0/24"}});
    EXPECT_FALSE(all.check_address(ip("198.51.100.9"), 80, true).allowed);
    // Even an operator-pinned address (hosts file) stays denied.
    EXPECT_FALSE(r.check_address(ip("10.9.1.1"), 80, true, true).allowed);
}

TEST(EgressDecision, PinnedAddressesSkipOnlyTheProtectedRanges) {
    auto r = rules({EgressMode::custom, {"registry.example.test"}, {}, {}});
    EXPECT_FALSE(r.check_address(ip("127.0.0.5"), 80, true).allowed);
    EXPECT_TRUE(r.check_address(ip("127.0.0.5"), 80, true, true).allowed);
    EXPECT_FALSE(r.check_address(ip("127.0.0.5"), 80, false, true).allowed);
}

TEST(EgressDecision, NetworkAllowBecomesAddressAndPortRule) {
    auto r = rules({EgressMode::deny_all, {}, {}, {}}, {"127.0.0.1:5432", "localhost:6379"});
    auto verdict = r.check_address(ip("127.0.0.1"), 5432, false);
    EXPECT_TRUE(verdict.allowed);
    EXPECT_EQ(verdict.rule, "network.allow 127.0.0.1:5432");
    EXPECT_TRUE(r.check_address(ip("127.0.0.1"), 6379, false).allowed);
    EXPECT_FALSE(r.check_address(ip("127.0.0.1"), 5433, false).allowed);
}

TEST(EgressDecision, CompileRefusesBadEntriesNamingListAndIndex) {
    auto bad_cidr = EgressRules::compile({EgressMode::custom, {}, {"10.0.0.0/8", "nope"}, {}});
    ASSERT_FALSE(bad_cidr);
    EXPECT_THAT(bad_cidr.error().message, HasSubstr("allowedCIDRs[1]"));
    auto bad_host = EgressRules::compile({EgressMode::custom, {"foo.*.com"}, {}, {}});
    ASSERT_FALSE(bad_host);
    EXPECT_THAT(bad_host.error().message, HasSubstr("allowedHosts[0]"));
}

TEST(EgressDecision, ModesRoundTripWithTheSdkSpelling) {
    for (const char* name : {"allow-all", "deny-all", "custom"})
        EXPECT_EQ(to_string(*egress_mode_from(name)), name);
    EXPECT_FALSE(egress_mode_from("allow_all"));
}

// ---- the policy keys ----

void expect_error(const std::string& yaml, int line, int column, const std::string& key,
                  const std::string& part) {
    SCOPED_TRACE(yaml);
    auto result = parse_policy(yaml, "t.yaml");
    ASSERT_FALSE(result.ok());
    ASSERT_EQ(result.diagnostics.size(), 1u) << result.format_errors();
    const auto& d = result.diagnostics[0];
    EXPECT_EQ(d.line, line) << d.format();
    EXPECT_EQ(d.column, column) << d.format();
    EXPECT_EQ(d.key, key) << d.format();
    EXPECT_THAT(d.message, HasSubstr(part));
}

const std::string kIsolated = "namespaces: { network: isolated }\n";

TEST(EgressPolicy, ParsesAllKeys) {
    auto result = parse_policy(kIsolated +
                                   "network:\n  egress:\n    mode: custom\n"
                                   "    allowedHosts: [registry.example.test, '*.example.com']\n"
                                   "    allowedCIDRs: [10.0.0.0/8]\n"
                                   "    deniedCIDRs: [10.9.0.0/16]\n",
                               "t.yaml");
    ASSERT_TRUE(result.ok()) << result.format_errors();
    const EgressSpec& egress = result.policy->network.egress;
    EXPECT_EQ(egress.mode, EgressMode::custom);
    EXPECT_EQ(egress.allowed_hosts,
              (std::vector<std::string>{"registry.example.test", "*.example.com"}));
    EXPECT_EQ(egress.allowed_cidrs, (std::vector<std::string>{"10.0.0.0/8"}));
    EXPECT_EQ(egress.denied_cidrs, (std::vector<std::string>{"10.9.0.0/16"}));
}

TEST(EgressPolicy, DefaultIsDenyAll) {
    auto result = parse_policy(kIsolated, "t.yaml");
    ASSERT_TRUE(result.ok()) << result.format_errors();
    EXPECT_EQ(result.policy->network.egress.mode, EgressMode::deny_all);
}

TEST(EgressPolicy, ErrorsCarryLineAndColumn) {
    expect_error(kIsolated + "network:\n  egress:\n    mode: everything\n", 4, 11,
                 "network.egress.mode", "deny-all");
    expect_error(kIsolated + "network:\n  egress:\n    allowedCIDRs: [10.0.0.0/8, 300.1.1.1/8]\n",
                 4, 32, "network.egress.allowedCIDRs[1]", "expected a CIDR");
    expect_error(kIsolated + "network:\n  egress:\n    deniedCIDRs: [10.1.2.3/8]\n", 4, 19,
                 "network.egress.deniedCIDRs[0]", "host bits");
    expect_error(kIsolated + "network:\n  egress:\n    allowedHosts: ['foo.*.com']\n", 4, 20,
                 "network.egress.allowedHosts[0]", "whole first label");
    expect_error(kIsolated + "network:\n  egress:\n    allowedHosts: ['*']\n", 4, 20,
                 "network.egress.allowedHosts[0]", "allow-all");
    expect_error(kIsolated + "network:\n  egress:\n    allowedhosts: [a.test]\n", 4, 5,
                 "network.egress.allowedhosts", "");
}

TEST(EgressPolicy, NeedsAnIsolatedNetwork) {
    expect_error("network:\n  egress: { mode: allow-all }\n", 2, 3, "network.egress", "isolated");
}

// The daemon host's own addresses (sessions/network/host_addresses.hpp): refused like the
// protected ranges (stop 44's red-team finding: allow-all reached a host service on 0.0.0.0
// through an interface address), opened only by an allowedCIDRs entry naming the address itself.
TEST(EgressRules, TheHostsOwnAddressesAreRefusedUnlessAllowedCidrsNamesThemExactly) {
    auto all = rules({EgressMode::allow_all, {}, {}, {}});
    auto refused = all.check_address(ip("192.0.2.2"), 80, false, false, true);
    EXPECT_FALSE(refused.allowed);
    EXPECT_THAT(refused.rule, HasSubstr("an address of the daemon's host"));
    EXPECT_TRUE(all.check_address(ip("192.0.2.2"), 80, false, false, false).allowed);
    EXPECT_FALSE(all.check_address(ip("fd00::2"), 80, true, false, true).allowed);
    EXPECT_FALSE(all.check_address(ip("::ffff:192.0.2.2"), 80, false, false, true).allowed);

    auto range = rules({EgressMode::custom, {}, {"192.0.2.0/24", "0.0.0.0/0"}, {}});
    EXPECT_FALSE(range.check_address(ip("192.0.2.2"), 80, false, false, true).allowed)
        << "a range around the host's address must not open it";
    auto exact = rules({EgressMode::custom, {}, {"192.0.2.2/32"}, {}});
    EXPECT_TRUE(exact.check_address(ip("192.0.2.2"), 80, false, false, true).allowed);
    // The operator's hosts file is the operator's word, as for the protected ranges.
    EXPECT_TRUE(all.check_address(ip("192.0.2.2"), 80, true, true, true).allowed);
    // deniedCIDRs and deny-all still come first.
    auto denied = rules({EgressMode::custom, {}, {"192.0.2.2/32"}, {"192.0.2.0/24"}});
    EXPECT_THAT(denied.check_address(ip("192.0.2.2"), 80, false, false, true).rule,
                HasSubstr("deniedCIDRs"));
}

}  // namespace
}  // namespace corral
