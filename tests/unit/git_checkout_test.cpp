// git checkout requests: what a url may be, and the argv git gets (supervisor/daemon/git_checkout).
#include "supervisor/daemon/git_checkout.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "supervisor/daemon/json_fields.hpp"

namespace corral::daemon {
namespace {

GitCheckoutRequest parse(const nlohmann::json& body) {
    return parse_git_checkout(body.dump());
}

std::string refusal(const nlohmann::json& body) {
    try {
        parse(body);
    } catch (const ApiFailure& f) {
        return f.error.message;
    }
    return "";
}

TEST(GitCheckout, DefaultDirectoryIsTheUrlsLastComponentWithoutGit) {
    EXPECT_EQ(default_clone_dir("https://example.com/a/repo.git"), "repo");
    EXPECT_EQ(default_clone_dir("https://example.com/a/repo.git/"), "repo");
    EXPECT_EQ(default_clone_dir("/srv/repo/.git"), "repo");
    EXPECT_EQ(default_clone_dir("git@example.com:team/tool"), "tool");
    EXPECT_EQ(default_clone_dir("host:proj.git"), "proj");
    EXPECT_EQ(default_clone_dir("/srv/.."), "");
}

TEST(GitCheckout, ArgvEndsOptionsBeforeUrlAndDirectory) {
    const auto request = parse({{"url", "https://example.com/r.git"},
                                {"branch", "dev"},
                                {"depth", 2},
                                {"targetDir", "src/r"}});
    const auto argv = git_clone_argv(request);
    const auto dashes = std::find(argv.begin(), argv.end(), "--");
    ASSERT_NE(dashes, argv.end());
    EXPECT_EQ(std::vector<std::string>(dashes + 1, argv.end()),
              (std::vector<std::string>{"https://example.com/r.git", "src/r"}));
    EXPECT_NE(std::find(argv.begin(), argv.end(), "protocol.ext.allow=never"), argv.end());
    EXPECT_NE(std::find(argv.begin(), argv.end(), "core.hooksPath=/dev/null"), argv.end());
    EXPECT_NE(std::find(argv.begin(), dashes, "dev"), dashes);
    EXPECT_NE(std::find(argv.begin(), dashes, "2"), dashes);
    const auto env = git_environment();
    EXPECT_NE(std::find(env.begin(), env.end(),
                        std::pair<std::string, std::string>{"GIT_PROTOCOL_FROM_USER", "0"}),
              env.end());
}

// CVE-2017-1000117 (ssh://-oProxyCommand=), git's ext::/fd:: transports (protocol.allow "never"),
// CVE-2020-5260 (a newline in a url): refused with a message naming the field.
TEST(GitCheckout, RefusesUrlsThatAreOptionsCommandsOrControlCharacters) {
    EXPECT_NE(refusal({{"url", "ext::sh -c id"}}).find("TRANSPORT::ADDRESS"), std::string::npos);
    EXPECT_NE(refusal({{"url", "fd::0"}}), "");
    EXPECT_NE(refusal({{"url", "hg::https://example.com/x"}}), "");
    EXPECT_NE(refusal({{"url", "-uid"}}).find("`-`"), std::string::npos);
    EXPECT_NE(refusal({{"url", "ssh://-oProxyCommand=id/x"}}), "");
    EXPECT_NE(refusal({{"url", "https://e.com/\nx"}}).find("control"), std::string::npos);
    EXPECT_NE(refusal({{"url", "https://e.com/x"}, {"branch", "-b"}}).find("branch"),
              std::string::npos);
    EXPECT_NE(refusal({{"url", "https://e.com/x"}, {"depth", 0}}).find("depth"), std::string::npos);
    EXPECT_NE(refusal({{"url", "https://e.com/x"}, {"extra", 1}}), "");
    EXPECT_NE(refusal(nlohmann::json::object()).find("url"), std::string::npos);
    // Ordinary urls, including ones with "::" after a slash (an IPv6 literal) are fine.
    EXPECT_EQ(refusal({{"url", "https://[::1]/r.git"}}), "");
    EXPECT_EQ(refusal({{"url", "git@example.com:team/tool.git"}}), "");
    EXPECT_EQ(refusal({{"url", "file:///srv/r.git"}}), "");
}

}  // namespace
}  // namespace corral::daemon
