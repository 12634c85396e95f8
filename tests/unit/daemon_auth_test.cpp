#include <gtest/gtest.h>

#include "supervisor/daemon/auth.hpp"

namespace corral::daemon {
namespace {

Result<TokenGrant> lookup(std::string_view token) {
    if (token == "full-a") return TokenGrant{"a", TokenRights::full};
    if (token == "restricted-a") return TokenGrant{"a", TokenRights::restricted};
    return sys_error(EACCES, "unknown token");
}

Caller caller_of(Listener listener, std::string_view header) {
    auto c = authenticate(listener, header, lookup);
    EXPECT_TRUE(c.ok()) << c.error().describe();
    return c.ok() ? *c : Caller{};
}

TEST(DaemonAuth, UnixSocketWithoutTokenHasDaemonRights) {
    auto c = caller_of(Listener::unix_socket, "");
    EXPECT_TRUE(c.daemon_rights);
    EXPECT_FALSE(authorize(c, Access::daemon_admin, ""));
    EXPECT_FALSE(authorize(c, Access::session_admin, "anything"));
}

TEST(DaemonAuth, TcpWithoutTokenIsRefused) {
    EXPECT_FALSE(authenticate(Listener::tcp, "", lookup).ok());
}

TEST(DaemonAuth, UnknownTokenOrSchemeIsRefusedOnEveryListener) {
    EXPECT_FALSE(authenticate(Listener::unix_socket, "Bearer nope", lookup).ok());
    EXPECT_FALSE(authenticate(Listener::unix_socket, "Basic full-a", lookup).ok());
    EXPECT_FALSE(authenticate(Listener::tcp, "Bearer ", lookup).ok());
}

TEST(DaemonAuth, SchemeIsCaseInsensitive) {
    auto c = caller_of(Listener::tcp, "bearer full-a");
    ASSERT_TRUE(c.grant);
    EXPECT_EQ(c.grant->session_id, "a");
}

TEST(DaemonAuth, TokenIsHeldToItsRightsEvenOnTheUnixSocket) {
    auto c = caller_of(Listener::unix_socket, "Bearer restricted-a");
    EXPECT_FALSE(c.daemon_rights);
    EXPECT_FALSE(authorize(c, Access::session_use, "a"));
    auto refused = authorize(c, Access::session_admin, "a");
    ASSERT_TRUE(refused);
    EXPECT_EQ(refused->status, 403u);
    EXPECT_EQ(authorize(c, Access::daemon_admin, "")->status, 403u);
}

TEST(DaemonAuth, TokenOfOneSessionLooksLikeNoSessionElsewhere) {
    auto c = caller_of(Listener::tcp, "Bearer full-a");
    EXPECT_FALSE(authorize(c, Access::session_admin, "a"));
    auto refused = authorize(c, Access::session_use, "b");
    ASSERT_TRUE(refused);
    EXPECT_EQ(refused->status, 404u);
    EXPECT_EQ(refused->message, "no such session `b`");
}

TEST(BearerToken, ParsesHeader) {
    EXPECT_EQ(*bearer_token("Bearer abc"), "abc");
    EXPECT_EQ(*bearer_token("Bearer   abc  "), "abc");
    EXPECT_FALSE(bearer_token("Bearerabc"));
    EXPECT_FALSE(bearer_token("Token abc"));
    EXPECT_FALSE(bearer_token(""));
}

}  // namespace
}  // namespace corral::daemon
