// `corral run`'s options: parsed without side effects; --env resolved against a given environ.
#include "supervisor/cli/run_options.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "supervisor/cli/commands.hpp"

namespace corral::cli {
namespace {

using ::testing::HasSubstr;

TEST(RunOptions, EnvArgumentsAreKeptInOrderWithOrWithoutValue) {
    auto options = parse_run_options(
        {"--env", "CC=gcc", "-e", "MAKEFLAGS", "--env", "EMPTY=", "--env", "A=b=c", "make"});
    ASSERT_TRUE(options) << options.error().describe();
    ASSERT_EQ(options->env.size(), 4u);
    EXPECT_EQ(options->env[0].name, "CC");
    EXPECT_EQ(options->env[0].value, "gcc");
    EXPECT_EQ(options->env[1].name, "MAKEFLAGS");
    EXPECT_FALSE(options->env[1].value);
    EXPECT_EQ(options->env[2].value, "");
    EXPECT_EQ(options->env[3].value, "b=c");
    EXPECT_EQ(options->command, (std::vector<std::string>{"make"}));
}

TEST(RunOptions, BadEnvArgumentsNameWhatWasGiven) {
    for (const char* bad : {"=x", "1A=b", "A-B=c", ""}) {
        auto options = parse_run_options({"--env", bad, "true"});
        ASSERT_FALSE(options) << bad;
        EXPECT_THAT(options.error().describe(), HasSubstr(std::string("--env `") + bad + "`"));
    }
    auto missing = parse_run_options({"true", "--env"});
    EXPECT_TRUE(missing) << "after the command, --env belongs to the command";
    auto no_value = parse_run_options({"--env"});
    ASSERT_FALSE(no_value);
    EXPECT_THAT(no_value.error().describe(), HasSubstr("--env needs a value"));
}

TEST(RunOptions, EnvResolvesAgainstTheCallerAndLaterArgumentsWin) {
    char passed[] = "PASSED=from caller";
    char other[] = "OTHER=x";
    char* caller[] = {passed, other, nullptr};
    auto options = parse_run_options({"--env", "PASSED", "--env", "ABSENT", "--env", "CC=gcc",
                                      "--env", "CC=clang", "--env", "ABSENT=now", "true"});
    ASSERT_TRUE(options);
    std::map<std::string, std::string> set;
    std::vector<std::string> unset;
    resolve_env_arguments(options->env, caller, set, unset);
    EXPECT_EQ(set, (std::map<std::string, std::string>{
                       {"ABSENT", "now"}, {"CC", "clang"}, {"PASSED", "from caller"}}));
    EXPECT_TRUE(unset.empty());

    auto absent = parse_run_options({"--env", "ABSENT", "true"});
    set.clear();
    resolve_env_arguments(absent->env, caller, set, unset);
    EXPECT_TRUE(set.empty());
    EXPECT_EQ(unset, (std::vector<std::string>{"ABSENT"}));
}

TEST(RunOptions, EmptyCwdAndReportAreRefused) {
    EXPECT_FALSE(parse_run_options({"--cwd", "", "true"}));
    EXPECT_FALSE(parse_run_options({"--report", "", "true"}));
}

TEST(RunOptions, AnOptionsValueMayFollowAnEqualsSign) {
    auto options = parse_run_options({"--policy=none", "--timeout=30s", "--env=A=b", "--", "true"});
    ASSERT_TRUE(options) << options.error().describe();
    EXPECT_EQ(options->policy, "none");
    ASSERT_TRUE(options->timeout);
    EXPECT_EQ(options->timeout->count(), 30000);
    ASSERT_EQ(options->env.size(), 1u);
    EXPECT_EQ(options->env[0].name, "A");
    EXPECT_EQ(options->env[0].value, "b");
    EXPECT_FALSE(parse_run_options({"--bogus=1", "true"}));
}

// A run is its session's only command: timeouts.session bounds it too (stop 44's operator probe:
// `session: 1s` and `sleep 5` exited 0 after 5 s while `policy check` showed the key).
TEST(RunTimeout, TheShorterOfTheCommandsAndTheSessionsBoundsTheRun) {
    using std::chrono::milliseconds;
    Timeouts timeouts;
    EXPECT_EQ(run_timeout(std::nullopt, timeouts), milliseconds(0));
    timeouts.command = milliseconds(10000);
    EXPECT_EQ(run_timeout(std::nullopt, timeouts), milliseconds(10000));
    EXPECT_EQ(run_timeout(milliseconds(3000), timeouts), milliseconds(3000));
    timeouts.session = milliseconds(1000);
    EXPECT_EQ(run_timeout(std::nullopt, timeouts), milliseconds(1000));
    EXPECT_EQ(run_timeout(milliseconds(3000), timeouts), milliseconds(1000));
    EXPECT_EQ(run_timeout(milliseconds(500), timeouts), milliseconds(500));
    timeouts.command.reset();
    EXPECT_EQ(run_timeout(std::nullopt, timeouts), milliseconds(1000));
}

}  // namespace
}  // namespace corral::cli
