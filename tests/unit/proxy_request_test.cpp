// The egress proxy's request-head parser and the hosts-file override (no privileges): what is
// accepted, what is refused as ambiguous, and the origin-form head sent upstream.
#include "sessions/network/proxy_request.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "sessions/network/egress_hosts.hpp"
#include "tests/support/temp_dir.hpp"

namespace corral {
namespace {

using ::testing::HasSubstr;

TEST(ProxyRequest, ParsesConnect) {
    auto r = parse_proxy_request("CONNECT Registry.Example.Test:443 HTTP/1.1\r\n"
                                 "Host: registry.example.test:443\r\n\r\n");
    ASSERT_TRUE(r) << r.error().describe();
    EXPECT_TRUE(r->is_connect());
    EXPECT_EQ(r->authority.host, "registry.example.test");
    EXPECT_EQ(r->authority.port, 443);
    EXPECT_FALSE(r->authority.address);
}

TEST(ProxyRequest, ParsesAbsoluteUriAndRewritesToOriginForm) {
    auto r = parse_proxy_request("GET http://a.test/p?q=1#frag HTTP/1.1\r\nHost: a.test\r\n"
                                 "Proxy-Connection: keep-alive\r\nProxy-Authorization: x\r\n"
                                 "Accept: */*\r\n\r\n");
    ASSERT_TRUE(r) << r.error().describe();
    EXPECT_EQ(r->authority.port, 80);
    EXPECT_EQ(r->path, "/p?q=1");
    const std::string head = origin_request_head(*r);
    EXPECT_EQ(head.rfind("GET /p?q=1 HTTP/1.1\r\n", 0), 0u) << head;
    EXPECT_THAT(head, HasSubstr("Accept: */*\r\n"));
    EXPECT_THAT(head, HasSubstr("Connection: close\r\n\r\n"));
    EXPECT_EQ(head.find("Proxy-"), std::string::npos) << head;
}

TEST(ProxyRequest, AddsHostWhenMissingAndKeepsIpv6Brackets) {
    auto r = parse_proxy_request("GET http://[2001:db8::1]:8080 HTTP/1.0\r\n\r\n");
    ASSERT_TRUE(r) << r.error().describe();
    ASSERT_TRUE(r->authority.address);
    EXPECT_EQ(r->authority.text(), "[2001:db8::1]:8080");
    EXPECT_EQ(r->path, "/");
    EXPECT_THAT(origin_request_head(*r), HasSubstr("Host: [2001:db8::1]:8080\r\n"));
}

TEST(ProxyRequest, RefusesAmbiguousOrUnservedRequests) {
    struct Case {
        const char* head;
        const char* reason;
    } cases[] = {
        {"CONNECT a.test HTTP/1.1\r\n\r\n", "port is required"},
        {"CONNECT a.test:0 HTTP/1.1\r\n\r\n", "from 1 to 65535"},
        {"CONNECT a.test:443 HTTP/1.1\r\nHost: b.test:443\r\n\r\n", "does not match"},
        {"GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\nHost: b.test\r\n\r\n", "more than one Host"},
        {"GET http://u:p@a.test/ HTTP/1.1\r\n\r\n", "user information"},
        {"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n", "absolute http:// URL"},
        {"GET https://a.test/ HTTP/1.1\r\n\r\n", "CONNECT"},
        {"GET http://a.test/ HTTP/2\r\n\r\n", "unsupported version"},
        {"GET http://a.test/ HTTP/1.1\r\nX: 1\nY: 2\r\n\r\n", "bare LF"},
        {"GET http://a.test/ HTTP/1.1\r\nX: 1\rY: 2\r\n\r\n", "bare CR"},
        {"GET http://a.test/ HTTP/1.1\r\n folded\r\n\r\n", "obs-fold"},
        {"GET http://a.test/ HTTP/1.1\r\nX : 1\r\n\r\n", "header name"},
        {"GET http://a.test/ HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
         "both Content-Length and Transfer-Encoding"},
        {"GET http://a.test/ HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
         "more than one Content-Length"},
        {"GET http://*.a.test/ HTTP/1.1\r\n\r\n", "not a host name"},
        {"GET http://a%2etest/ HTTP/1.1\r\n\r\n", "not a host name"},
        {"GET  http://a.test/ HTTP/1.1\r\n\r\n", "request line"},
    };
    for (const auto& c : cases) {
        auto r = parse_proxy_request(c.head);
        ASSERT_FALSE(r) << c.head;
        EXPECT_THAT(r.error().message, HasSubstr(c.reason)) << c.head;
    }
}

TEST(EgressHostsFile, ParsesNamesCommentsAndRefusesGarbage) {
    auto hosts = parse_egress_hosts("# comment\n127.0.0.11 Registry.Example.Test alias.test\n"
                                    "\n::1 six.test # trailing\n");
    ASSERT_TRUE(hosts) << hosts.error().describe();
    ASSERT_TRUE(hosts->find("registry.example.test."));
    EXPECT_EQ(hosts->find("REGISTRY.example.test")->at(0).to_string(), "127.0.0.11");
    EXPECT_TRUE(hosts->find("alias.test"));
    EXPECT_EQ(hosts->find("six.test")->at(0).to_string(), "::1");
    EXPECT_FALSE(hosts->find("missing.test"));
    auto bad = parse_egress_hosts("127.0.0.1 ok.test\nnot-an-ip name.test\n");
    ASSERT_FALSE(bad);
    EXPECT_THAT(bad.error().message, HasSubstr("line 2"));
    EXPECT_FALSE(parse_egress_hosts("127.0.0.1\n"));
    EXPECT_FALSE(parse_egress_hosts("127.0.0.1 *.wild.test\n"));
}

// --egress-hosts-file is read by the daemon as root at start: a FIFO named by mistake must not
// hang it (the FIFO-policy precedent of issue 10), nor a huge file feed it without end.
TEST(EgressHostsFile, RefusesFifosDirectoriesAndOversizedFiles) {
    const test_support::TempDir dir("corral-hosts-test");  // removed however the test ends
    ASSERT_FALSE(dir.path().empty());
    const std::string& base = dir.path();
    ASSERT_EQ(::mkfifo((base + "/fifo").c_str(), 0600), 0);
    auto fifo = load_egress_hosts(base + "/fifo");
    ASSERT_FALSE(fifo);
    EXPECT_THAT(fifo.error().message, HasSubstr("not a regular file"));
    EXPECT_FALSE(load_egress_hosts(base));
    {
        std::ofstream big(base + "/big");
        big << std::string(kMaxHostsFileBytes + 1, '#');
    }
    auto too_big = load_egress_hosts(base + "/big");
    ASSERT_FALSE(too_big);
    EXPECT_EQ(too_big.error().code, EFBIG);
    {
        std::ofstream good(base + "/hosts");
        good << "127.0.0.11 registry.example.test\n";
    }
    auto good = load_egress_hosts(base + "/hosts");
    ASSERT_TRUE(good) << good.error().describe();
    EXPECT_TRUE(good->find("registry.example.test"));
    EXPECT_FALSE(load_egress_hosts(base + "/missing"));
}

}  // namespace
}  // namespace corral
