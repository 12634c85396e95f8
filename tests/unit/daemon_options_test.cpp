// corrald's connection limit options (issue 12 item 4): values with units, bounded, errors naming
// the option.
#include "supervisor/daemon/daemon_options.hpp"

#include <gtest/gtest.h>

namespace corral::daemon {
namespace {

TEST(DaemonOptions, ConnectionLimitsDefaultAndParse) {
    auto defaults = parse_daemon_options({});
    ASSERT_TRUE(defaults) << defaults.error().describe();
    EXPECT_EQ(defaults->connections.max_connections, 512u);
    EXPECT_EQ(defaults->connections.header_timeout, std::chrono::seconds(10));
    EXPECT_EQ(defaults->connections.min_write_rate, 1024u * 1024u);
    auto set =
        parse_daemon_options({"--max-connections=3", "--header-timeout", "250ms",
                              "--body-timeout=2s", "--idle-timeout=1m", "--min-write-rate=64Ki"});
    ASSERT_TRUE(set) << set.error().describe();
    EXPECT_EQ(set->connections.max_connections, 3u);
    EXPECT_EQ(set->connections.header_timeout, std::chrono::milliseconds(250));
    EXPECT_EQ(set->connections.body_timeout, std::chrono::seconds(2));
    EXPECT_EQ(set->connections.idle_timeout, std::chrono::minutes(1));
    EXPECT_EQ(set->connections.min_write_rate, 64u * 1024u);
}

TEST(DaemonOptions, BadConnectionLimitsNameTheOption) {
    for (const char* bad : {"--max-connections=0", "--max-connections=-1", "--max-connections=x",
                            "--header-timeout=0", "--header-timeout=2h", "--body-timeout=10",
                            "--idle-timeout=soon", "--min-write-rate=0", "--min-write-rate=100",
                            "--min-write-rate=fast", "--min-write-rate=2Ti"}) {
        auto parsed = parse_daemon_options({bad});
        ASSERT_FALSE(parsed) << bad;
        const std::string option = std::string(bad).substr(0, std::string(bad).find('='));
        EXPECT_NE(parsed.error().message.find(option), std::string::npos)
            << parsed.error().message;
    }
}

// Issue 15 item 3: egress tunnels' idle limit, 10 minutes unless set, bounded.
// Stop 44's operator probe: `corrald --bogus` and `corrald --version` said "needs a value".
TEST(DaemonOptions, UnknownOptionsAreSaidSoAndVersionIsOne) {
    auto bogus = parse_daemon_options({"--bogus"});
    ASSERT_FALSE(bogus);
    EXPECT_NE(bogus.error().message.find("unknown option `--bogus`"), std::string::npos)
        << bogus.error().describe();
    auto bogus_value = parse_daemon_options({"--bogus=1"});
    ASSERT_FALSE(bogus_value);
    EXPECT_NE(bogus_value.error().message.find("unknown option"), std::string::npos);
    auto version = parse_daemon_options({"--version"});
    ASSERT_TRUE(version) << version.error().describe();
    EXPECT_TRUE(version->version);
    auto missing = parse_daemon_options({"--socket"});
    ASSERT_FALSE(missing);
    EXPECT_NE(missing.error().message.find("needs a value"), std::string::npos);
}

TEST(DaemonOptions, EgressIdleTimeout) {
    EXPECT_EQ(parse_daemon_options({})->egress_idle_timeout, std::chrono::minutes(10));
    EXPECT_EQ(parse_daemon_options({"--egress-idle-timeout=90s"})->egress_idle_timeout,
              std::chrono::seconds(90));
    for (const char* bad : {"--egress-idle-timeout=0", "--egress-idle-timeout=25h",
                            "--egress-idle-timeout=later"}) {
        auto parsed = parse_daemon_options({bad});
        ASSERT_FALSE(parsed) << bad;
        EXPECT_NE(parsed.error().message.find("--egress-idle-timeout"), std::string::npos);
    }
}

}  // namespace
}  // namespace corral::daemon

namespace corral::daemon {
namespace {

// Issue 18: --prepare POLICY=N, repeatable, off by default; N from 1 to kMaxPrepared; a policy
// name, never a path.
TEST(DaemonOptions, PrepareTakesNamedPoliciesWithABoundedCount) {
    auto defaults = parse_daemon_options({});
    ASSERT_TRUE(defaults);
    EXPECT_TRUE(defaults->prepare.empty());
    auto set = parse_daemon_options({"--prepare", "default=8", "--prepare=ci-job=64"});
    ASSERT_TRUE(set) << set.error().describe();
    EXPECT_EQ(set->prepare.at("default"), 8u);
    EXPECT_EQ(set->prepare.at("ci-job"), kMaxPrepared);
    for (const char* bad : {"default", "default=", "=3", "default=0", "default=65", "default=-1",
                            "default=x", "../x=1", "/etc/p=1", ".hidden=1"}) {
        auto parsed = parse_daemon_options({"--prepare", bad});
        ASSERT_FALSE(parsed) << bad;
        EXPECT_NE(parsed.error().message.find("--prepare"), std::string::npos)
            << parsed.error().message;
    }
    auto twice = parse_daemon_options({"--prepare", "none=1", "--prepare", "none=2"});
    ASSERT_FALSE(twice);
    EXPECT_NE(twice.error().message.find("twice"), std::string::npos);
}

}  // namespace
}  // namespace corral::daemon
