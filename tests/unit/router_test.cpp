#include "supervisor/daemon/router.hpp"

#include <gtest/gtest.h>

namespace corral::daemon {
namespace {

Router api_router() {
    Router r;
    r.add("GET", "/v1/health", 1);
    r.add("GET", "/v1/sessions", 2);
    r.add("POST", "/v1/sessions", 3);
    r.add("GET", "/v1/sessions/{sid}", 4);
    r.add("DELETE", "/v1/sessions/{sid}", 5);
    r.add("POST", "/v1/sessions/{sid}/files/mkdir", 6);
    r.add("GET", "/v1/sessions/{sid}/processes/{proc}/stream", 7);
    r.add("DELETE", "/v1/sessions/{sid}/ports/{port}", 8);
    return r;
}

TEST(Router, MatchesLiteralPath) {
    auto m = api_router().match("GET", "/v1/health");
    EXPECT_EQ(m.kind, RouteMatch::Kind::found);
    EXPECT_EQ(m.route_id, 1);
    EXPECT_TRUE(m.params.empty());
}

TEST(Router, CapturesPlaceholders) {
    auto m = api_router().match("GET", "/v1/sessions/s-1/processes/p7/stream");
    ASSERT_EQ(m.kind, RouteMatch::Kind::found);
    EXPECT_EQ(m.route_id, 7);
    EXPECT_EQ(m.params.at("sid"), "s-1");
    EXPECT_EQ(m.params.at("proc"), "p7");
}

TEST(Router, PercentDecodesPlaceholders) {
    auto m = api_router().match("GET", "/v1/sessions/a%2Db");
    ASSERT_EQ(m.kind, RouteMatch::Kind::found);
    EXPECT_EQ(m.params.at("sid"), "a-b");
}

TEST(Router, UnknownPathIsNotFound) {
    EXPECT_EQ(api_router().match("GET", "/v1/nope").kind, RouteMatch::Kind::not_found);
    EXPECT_EQ(api_router().match("GET", "/v1/sessions/x/y/z").kind, RouteMatch::Kind::not_found);
    EXPECT_EQ(api_router().match("GET", "/").kind, RouteMatch::Kind::not_found);
}

TEST(Router, EmptySegmentDoesNotMatchPlaceholder) {
    EXPECT_EQ(api_router().match("GET", "/v1/sessions/").kind, RouteMatch::Kind::not_found);
}

TEST(Router, WrongMethodIsMethodNotAllowedWithAllowList) {
    auto m = api_router().match("PUT", "/v1/sessions/s1");
    ASSERT_EQ(m.kind, RouteMatch::Kind::method_not_allowed);
    EXPECT_EQ(m.allowed, (std::vector<std::string>{"GET", "DELETE"}));
}

TEST(Router, LiteralRouteAddedFirstWinsOverPlaceholder) {
    Router r;
    r.add("GET", "/v1/sessions/{sid}/files/list", 1);
    r.add("GET", "/v1/sessions/{sid}/files/{x}", 2);
    EXPECT_EQ(r.match("GET", "/v1/sessions/s/files/list").route_id, 1);
    EXPECT_EQ(r.match("GET", "/v1/sessions/s/files/other").route_id, 2);
}

TEST(Router, MalformedEscapeInPlaceholderIsNotFound) {
    EXPECT_EQ(api_router().match("GET", "/v1/sessions/%zz").kind, RouteMatch::Kind::not_found);
    EXPECT_EQ(api_router().match("GET", "/v1/sessions/%00").kind, RouteMatch::Kind::not_found);
}

TEST(SplitTarget, SeparatesPathAndQuery) {
    auto [path, query] = split_target("/v1/x?path=a%2Fb&recursive=true");
    EXPECT_EQ(path, "/v1/x");
    EXPECT_EQ(query, "path=a%2Fb&recursive=true");
    auto [p2, q2] = split_target("/v1/x");
    EXPECT_EQ(p2, "/v1/x");
    EXPECT_TRUE(q2.empty());
}

TEST(ParseQuery, DecodesKeysAndValues) {
    auto q = parse_query("path=a%2Fb+c&recursive=true&flag&=ignored&path2=%2e%2e");
    EXPECT_EQ(q.at("path"), "a/b c");
    EXPECT_EQ(q.at("recursive"), "true");
    EXPECT_EQ(q.at("flag"), "");
    EXPECT_EQ(q.at("path2"), "..");
    EXPECT_EQ(q.count(""), 0u);
}

TEST(ParseQuery, DropsMalformedEscapes) {
    auto q = parse_query("a=%4&b=%zz&c=ok");
    EXPECT_EQ(q.count("a"), 0u);
    EXPECT_EQ(q.count("b"), 0u);
    EXPECT_EQ(q.at("c"), "ok");
}

TEST(CheckQuery, NamesTheParameterAnEscapeOfNulOrAMalformedOneWouldDrop) {
    EXPECT_FALSE(check_query("path=a%2Fb&recursive=true"));
    EXPECT_FALSE(check_query(""));
    auto nul = check_query("recursive=1&path=a%00b");
    ASSERT_TRUE(nul);
    EXPECT_EQ(nul->first, "nul_byte");
    EXPECT_NE(nul->second.find("`path`"), std::string::npos) << nul->second;
    auto bad = check_query("path=%zz");
    ASSERT_TRUE(bad);
    EXPECT_EQ(bad->first, "bad_query");
    auto truncated = check_query("a=1&path=x%4");
    ASSERT_TRUE(truncated);
    EXPECT_EQ(truncated->first, "bad_query");
    auto name = check_query("pa%00th=x");
    ASSERT_TRUE(name);
    EXPECT_EQ(name->first, "nul_byte");
    EXPECT_NE(name->second.find("name"), std::string::npos) << name->second;
}

TEST(PercentDecode, RefusesNulAndTruncatedEscapes) {
    EXPECT_FALSE(percent_decode("a%00b"));
    EXPECT_FALSE(percent_decode("a%"));
    EXPECT_FALSE(percent_decode("a%4"));
    EXPECT_EQ(*percent_decode("a%41"), "aA");
    EXPECT_EQ(*percent_decode("a+b"), "a+b");
    EXPECT_EQ(*percent_decode("a+b", true), "a b");
}

}  // namespace
}  // namespace corral::daemon
