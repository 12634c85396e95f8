#include "supervisor/daemon/http_errors.hpp"

#include <gtest/gtest.h>

namespace corral::daemon {
namespace {

TEST(HttpErrors, MapsErrnoToStatus) {
    EXPECT_EQ(api_error(sys_error(ENOENT, "open `a`")).status, 404u);
    EXPECT_EQ(api_error(sys_error(EEXIST, "mkdir `a`")).status, 409u);
    EXPECT_EQ(api_error(sys_error(EXDEV, "path `../x`")).status, 403u);
    EXPECT_EQ(api_error(sys_error(EINVAL, "x")).status, 400u);
    EXPECT_EQ(api_error(sys_error(EACCES, "x")).status, 403u);
    EXPECT_EQ(api_error(sys_error(EPERM, "x")).status, 403u);
    EXPECT_EQ(api_error(sys_error(EIO, "x")).status, 500u);
    EXPECT_EQ(api_error(plain_error("no errno")).status, 500u);
}

TEST(HttpErrors, EscapeKeepsThePathInTheMessage) {
    auto e = api_error(sys_error(EXDEV, "path `../../etc/passwd` escapes the session root"));
    EXPECT_EQ(e.code, "path_escape");
    EXPECT_NE(e.message.find("../../etc/passwd"), std::string::npos);
}

TEST(HttpErrors, BodyHasCodeAndMessage) {
    auto body = bad_request("bad_json", "body is not JSON").to_json();
    EXPECT_EQ(body["error"]["code"], "bad_json");
    EXPECT_EQ(body["error"]["message"], "body is not JSON");
    EXPECT_FALSE(body["error"].contains("diagnostics"));
}

TEST(HttpErrors, NoSuchSessionNamesTheId) {
    auto e = no_such_session("abc");
    EXPECT_EQ(e.status, 404u);
    EXPECT_EQ(e.message, "no such session `abc`");
}

TEST(HttpErrors, PolicyErrorListsEveryDiagnostic) {
    std::vector<PolicyDiagnostic> d = {{"<inline>", 3, 5, "limits.memory", "bad size"},
                                       {"<inline>", 7, 1, "bogus", "unknown key"}};
    auto e = policy_error(d);
    EXPECT_EQ(e.status, 422u);
    auto body = e.to_json();
    ASSERT_EQ(body["error"]["diagnostics"].size(), 2u);
    EXPECT_EQ(body["error"]["diagnostics"][0]["line"], 3);
    EXPECT_EQ(body["error"]["diagnostics"][1]["key"], "bogus");
}

}  // namespace
}  // namespace corral::daemon
