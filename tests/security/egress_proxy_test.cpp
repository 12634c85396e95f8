// Misusing the egress proxy (root): raw requests from inside a network namespace of the test's
// own to a real HttpEgressProxy, trying to reach what the rules do not allow. The origins stand
// on host loopback 127.0.0.21 (allowed) and 127.0.0.22 (not allowed); no other address is ever
// contacted — refusals happen before any connect, which the origins' accept counts prove.
//
// Precedents: SSRF to the cloud metadata service (169.254.169.254) is how the Capital One breach
// of 2019 obtained its credentials; parsers that disagree on the host of
// "http://allowed@evil/" are Orange Tsai's "A New Era of SSRF" (Black Hat 2017); request
// smuggling through framing ambiguity is CVE-2019-16276 (Go net/http) and CVE-2020-11724 (nginx).
#include <gtest/gtest.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_log.h>
#include <linux/netlink.h>

#include <sstream>

#include "sessions/network/http_proxy.hpp"
#include "sessions/network/transparent_relay.hpp"
#include "tests/integration/netns_fixture.hpp"
#include "tests/integration/support/origin_server.hpp"

namespace corral {
namespace {

using namespace nettest;
using corral::testing::OriginServer;

class EgressProxyAbuse : public ::testing::Test {
  protected:
    void SetUp() override {
        if (::geteuid() != 0) GTEST_SKIP() << "needs root (network namespaces)";
        auto ns = new_network_namespace();
        ASSERT_TRUE(ns) << ns.error().describe();
        auto thread = NetnsRunner::start(std::move(*ns));
        ASSERT_TRUE(thread) << thread.error().describe();
        netns_ = std::move(*thread);
        allowed_ = std::make_unique<OriginServer>("127.0.0.21", "allowed");
        other_ = std::make_unique<OriginServer>("127.0.0.22", "other");
        auto hosts = parse_egress_hosts("127.0.0.21 registry.example.test\n"
                                        "127.0.0.22 evil.example.test\n");
        ASSERT_TRUE(hosts);
        hosts_ = std::make_shared<const EgressHosts>(std::move(*hosts));
    }
    void TearDown() override {
        if (proxy_)
            loop_.call([&] {
                proxy_.reset();
                return 0;
            });
        if (netns_) netns_->stop();
    }
    void start(EgressSpec spec, HttpProxyLimits limits = {}) {
        auto rules = EgressRules::compile(spec);
        ASSERT_TRUE(rules) << rules.error().describe();
        gate_ = std::make_shared<EgressGate>("abuse", std::move(*rules),
                                             EgressEnvironment{hosts_, nullptr});
        auto made =
            loop_.call([&] { return HttpEgressProxy::start(loop_.io, netns_, gate_, limits); });
        ASSERT_TRUE(made) << made.error().describe();
        proxy_ = std::move(*made);
    }
    /// Sends `request` from inside the namespace; returns everything the proxy answered.
    std::string send(const std::string& request) {
        auto socket = netns_->tcp_socket(AF_INET);
        EXPECT_TRUE(socket);
        if (connect_loopback(socket->get(), proxy_->port()) != 0) return "connect failed";
        write_all(socket->get(), request);
        return read_to_eof(socket->get());
    }
    std::string registry() const {
        return "registry.example.test:" + std::to_string(allowed_->port());
    }
    std::string evil() const { return "evil.example.test:" + std::to_string(other_->port()); }
    static EgressSpec registry_only() {
        return {EgressMode::custom, {"registry.example.test"}, {}, {}};
    }

    Loop loop_;
    std::shared_ptr<NetnsRunner> netns_;
    std::unique_ptr<OriginServer> allowed_, other_;
    std::shared_ptr<const EgressHosts> hosts_;
    std::shared_ptr<EgressGate> gate_;
    std::unique_ptr<HttpEgressProxy> proxy_;
};

TEST_F(EgressProxyAbuse, Control_AllowedNameIsServed) {
    start(registry_only());
    const std::string answer = send("GET http://" + registry() + "/x HTTP/1.1\r\nHost: " +
                                    registry() + "\r\n\r\n");
    EXPECT_NE(answer.find("hello from allowed"), std::string::npos) << answer;
    EXPECT_EQ(allowed_->last_request_line(), "GET /x HTTP/1.1");
}

// Capital One 2019: the metadata service answers any local HTTP client with credentials.
TEST_F(EgressProxyAbuse, MetadataAddressRefusedEvenUnderAllowAll) {
    start({EgressMode::allow_all, {}, {}, {}});
    for (const std::string target :
         {"GET http://169.254.169.254/latest/meta-data/iam/ HTTP/1.1\r\n\r\n",
          "CONNECT 169.254.169.254:80 HTTP/1.1\r\n\r\n",
          "CONNECT [::ffff:169.254.169.254]:80 HTTP/1.1\r\n\r\n",
          "CONNECT [fd00:ec2::254]:80 HTTP/1.1\r\n\r\n",
          "GET http://[::ffff:a9fe:a9fe]/ HTTP/1.1\r\n\r\n"}) {
        const std::string answer = send(target);
        EXPECT_EQ(answer.rfind("HTTP/1.1 403", 0), 0u) << target << answer;
        EXPECT_NE(answer.find("protected range"), std::string::npos) << answer;
    }
    EXPECT_EQ(gate_->refused(), 5u);
}

TEST_F(EgressProxyAbuse, AbsoluteUriToADeniedAddressLiteral) {
    start(registry_only());
    const std::string port = std::to_string(other_->port());
    const std::string answer = send("GET http://127.0.0.22:" + port + "/ HTTP/1.1\r\n\r\n");
    EXPECT_EQ(answer.rfind("HTTP/1.1 403", 0), 0u) << answer;
    EXPECT_EQ(other_->accepted(), 0);
}

TEST_F(EgressProxyAbuse, HostHeaderThatDisagreesWithTheTargetIsRefused) {
    start(registry_only());
    for (const std::string& request :
         {"CONNECT " + registry() + " HTTP/1.1\r\nHost: " + evil() + "\r\n\r\n",
          "GET http://" + registry() + "/ HTTP/1.1\r\nHost: " + evil() + "\r\n\r\n",
          "GET http://" + registry() + "/ HTTP/1.1\r\nHost: " + registry() + "\r\nHost: " +
              evil() + "\r\n\r\n"}) {
        const std::string answer = send(request);
        EXPECT_EQ(answer.rfind("HTTP/1.1 400", 0), 0u) << request << answer;
    }
    EXPECT_EQ(allowed_->accepted(), 0);
    EXPECT_EQ(other_->accepted(), 0);
}

// "A New Era of SSRF": one parser takes the part before @ as the host, another the part after.
TEST_F(EgressProxyAbuse, UserinfoInTheTargetIsRefused) {
    start(registry_only());
    const std::string answer =
        send("GET http://registry.example.test@" + evil() + "/ HTTP/1.1\r\n\r\n");
    EXPECT_EQ(answer.rfind("HTTP/1.1 400", 0), 0u) << answer;
    EXPECT_EQ(other_->accepted(), 0);
}

TEST_F(EgressProxyAbuse, PipelinedSecondRequestNeverReachesAnotherHost) {
    start(registry_only());
    const std::string answer = send("GET http://" + registry() + "/ HTTP/1.1\r\nHost: " +
                                    registry() + "\r\n\r\nGET http://" + evil() +
                                    "/ HTTP/1.1\r\nHost: " + evil() + "\r\n\r\n");
    EXPECT_NE(answer.find("hello from allowed"), std::string::npos) << answer;
    // A CONNECT whose tunnel carries a request for another host: the tunnel goes where it was
    // judged to go, whatever the bytes inside say.
    const std::string tunnel = send("CONNECT " + registry() + " HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\n"
                                    "Host: " + evil() + "\r\n\r\n");
    EXPECT_NE(tunnel.find("200 Connection established"), std::string::npos) << tunnel;
    EXPECT_NE(tunnel.find("hello from allowed"), std::string::npos) << tunnel;
    EXPECT_EQ(other_->accepted(), 0);
    EXPECT_EQ(allowed_->accepted(), 2);
}

TEST_F(EgressProxyAbuse, AmbiguousFramingIsRefused) {
    start(registry_only());
    const std::string head = "POST http://" + registry() + "/ HTTP/1.1\r\nHost: " + registry();
    for (const std::string& request :
         {head + "\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n",
          head + "\r\nContent-Length: 4\r\nContent-Length: 40\r\n\r\n",
          head + "\r\nX-A: 1\n\r\n\r\n", head + "\r\nX-A : 1\r\n\r\n",
          head + "\r\n folded\r\n\r\n",
          "GET http://" + registry() + "/ HTTP/1.1 extra\r\n\r\n",
          "GET http://" + registry() + "/" + std::string(1, '\0') + " HTTP/1.1\r\n\r\n"}) {
        const std::string answer = send(request);
        EXPECT_EQ(answer.rfind("HTTP/1.1 400", 0), 0u) << request << answer;
    }
    EXPECT_EQ(allowed_->accepted(), 0);
}

// DNS answers are judged too: a name on the list that resolves (here through the daemon's own
// getaddrinfo, /etc/hosts) into a protected range is refused — what DNS rebinding relies on.
TEST_F(EgressProxyAbuse, AllowedNameResolvingToLoopbackIsRefused) {
    start({EgressMode::custom, {"localhost"}, {}, {}});
    const std::string answer =
        send("CONNECT localhost:" + std::to_string(allowed_->port()) + " HTTP/1.1\r\n\r\n");
    EXPECT_EQ(answer.rfind("HTTP/1.1 403", 0), 0u) << answer;
    EXPECT_NE(answer.find("resolves to"), std::string::npos) << answer;
}

TEST_F(EgressProxyAbuse, OriginFormAndHttpsWithoutConnectAreNotProxied) {
    start({EgressMode::allow_all, {}, {}, {}});
    EXPECT_EQ(send("GET / HTTP/1.1\r\nHost: " + registry() + "\r\n\r\n").rfind("HTTP/1.1 400", 0),
              0u);
    EXPECT_EQ(send("GET https://" + registry() + "/ HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 400", 0),
              0u);
}

TEST_F(EgressProxyAbuse, OversizedHeadSlowHeadAndTooManyConnectionsAreBounded) {
    HttpProxyLimits limits;
    limits.max_head_bytes = 4096;
    limits.head_timeout = std::chrono::milliseconds(300);
    limits.max_connections = 2;
    start(registry_only(), limits);
    const std::string big = send("GET http://" + registry() + "/ HTTP/1.1\r\nX-Big: " +
                                 std::string(8192, 'a') + "\r\n\r\n");
    EXPECT_EQ(big.rfind("HTTP/1.1 431", 0), 0u) << big.substr(0, 100);
    // A client that never finishes its head is cut off (408), not kept forever.
    EXPECT_EQ(send("GET http://" + registry()).rfind("HTTP/1.1 408", 0), 0u);
    // Two silent clients hold the cap; the third is turned away at once.
    auto a = netns_->tcp_socket(AF_INET), b = netns_->tcp_socket(AF_INET);
    ASSERT_EQ(connect_loopback(a->get(), proxy_->port()), 0);
    ASSERT_EQ(connect_loopback(b->get(), proxy_->port()), 0);
    write_all(a->get(), "G");
    write_all(b->get(), "G");
    bool busy = false;
    for (int attempt = 0; attempt < 50 && !busy; ++attempt)
        busy = send("GET http://" + registry() + "/ HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 503", 0) == 0;
    EXPECT_TRUE(busy);
    EXPECT_EQ(allowed_->accepted(), 0);
}

// The transparent relay is a listener inside the sandbox's namespace too. Root inside a session
// may own that namespace's nftables and routes: whatever it redirects to the relay is judged by
// the daemon's rules again, so rewriting them gains it nothing.
class TransparentRelayAbuse : public EgressProxyAbuse {
  protected:
    void start_relay(EgressSpec spec) {
        auto rules = EgressRules::compile(spec);
        ASSERT_TRUE(rules) << rules.error().describe();
        gate_ = std::make_shared<EgressGate>("abuse", std::move(*rules), EgressEnvironment{});
        auto made = loop_.call([&] { return TransparentRelay::start(loop_.io, netns_, gate_); });
        ASSERT_TRUE(made) << made.error().describe();
        relay_ = std::move(*made);
    }
    void TearDown() override {
        if (relay_)
            loop_.call([&] {
                relay_.reset();
                return 0;
            });
        EgressProxyAbuse::TearDown();
    }
    /// Connects from inside to `address`:`port`; "" on connect failure, else what was read
    /// after sending a request (EOF or reset ends it).
    std::string dial(const char* address, uint16_t port, int* error) {
        auto socket = netns_->tcp_socket(AF_INET);
        sockaddr_in in{};
        in.sin_family = AF_INET;
        in.sin_port = htons(port);
        ::inet_pton(AF_INET, address, &in.sin_addr);
        bound_io(socket->get());
        if (::connect(socket->get(), reinterpret_cast<sockaddr*>(&in), sizeof in) != 0) {
            *error = errno;
            return "";
        }
        // The reset may come before the request is written: then the write reports it.
        if (!write_all(socket->get(), "GET / HTTP/1.1\r\nHost: x\r\n\r\n")) {
            *error = errno;
            return "";
        }
        return read_to_eof(socket->get(), error);
    }
    std::unique_ptr<TransparentRelay> relay_;
};

TEST_F(TransparentRelayAbuse, Control_AllowedAddressIsRelayed) {
    start_relay({EgressMode::custom, {}, {"127.0.0.21/32"}, {}});
    int error = 0;
    EXPECT_NE(dial("127.0.0.21", allowed_->port(), &error).find("hello from allowed"),
              std::string::npos);
}

TEST_F(TransparentRelayAbuse, DiallingTheRelayPortItselfIsReset) {
    start_relay({EgressMode::custom, {}, {"127.0.0.21/32"}, {}});
    int error = 0;
    EXPECT_EQ(dial("127.0.0.1", relay_->port(), &error), "");
    EXPECT_TRUE(error == ECONNRESET || error == EPIPE) << std::strerror(error);
    EXPECT_EQ(allowed_->accepted(), 0);
}

TEST_F(TransparentRelayAbuse, SandboxRedirectingMoreToTheRelayGainsNothing) {
    start_relay({EgressMode::custom, {}, {"127.0.0.21/32"}, {}});
    // What root inside could do: open 127.0.0.22 in the namespace's own rules.
    TransparentPlan forged = plan_transparent_egress(
        {EgressMode::custom, {}, {"127.0.0.21/32", "127.0.0.22/32"}, {}}, relay_->port());
    const TransparentPlan daemons =
        plan_transparent_egress({EgressMode::custom, {}, {"127.0.0.21/32"}, {}}, relay_->port());
    auto applied = netns_->run([&]() -> Result<UniqueFd> {
        if (auto status = apply_transparent_egress(daemons, forged); !status)
            return std::move(status.error());
        return UniqueFd();
    });
    ASSERT_TRUE(applied) << applied.error().describe();
    int error = 0;
    EXPECT_EQ(dial("127.0.0.22", other_->port(), &error), "");
    EXPECT_TRUE(error == ECONNRESET || error == EPIPE) << std::strerror(error);
    EXPECT_EQ(other_->accepted(), 0);
    EXPECT_EQ(gate_->refused(), 1u);
}

// Direct TCP refused by the namespace's own rules is counted from what nfnetlink_log reports to
// the daemon's netlink socket in that namespace (refusal_log.hpp). A program in the session can
// send to that socket too: only the kernel's messages may count, or a sandbox could forge
// refusals of any destination into the daemon's log and counts. Precedent: CVE-2009-1185, udev
// took netlink uevents from user space for the kernel's and ran what they said as root.
TEST_F(TransparentRelayAbuse, ForgedRefusalReportsFromInsideAreNotCounted) {
    start_relay({EgressMode::deny_all, {}, {}, {}});
    // The daemon's NFLOG socket: the one NETLINK_NETFILTER socket of the test's namespace.
    auto listing = netns_->run([]() -> Result<UniqueFd> {
        UniqueFd fd(::open("/proc/thread-self/net/netlink", O_RDONLY | O_CLOEXEC));
        if (!fd) return sys_error("open /proc/thread-self/net/netlink");
        return fd;
    });
    ASSERT_TRUE(listing) << listing.error().describe();
    std::string table;
    char buffer[4096];
    for (ssize_t n; (n = ::read(listing->get(), buffer, sizeof buffer)) > 0;)
        table.append(buffer, static_cast<size_t>(n));
    uint32_t daemon_port = 0;
    std::istringstream lines(table);
    for (std::string line; std::getline(lines, line);) {
        std::istringstream fields(line);
        std::string sk;
        unsigned protocol = 0;
        uint32_t port = 0;
        if (fields >> sk >> protocol >> port && protocol == NETLINK_NETFILTER && port != 0)
            daemon_port = port;
    }
    ASSERT_NE(daemon_port, 0u) << table;
    // A forged NFULNL_MSG_PACKET "refusing" 203.0.113.66:666 (TEST-NET-3), sent from inside.
    struct {
        nlmsghdr header;
        nfgenmsg generic;
        nlattr payload_header;
        uint8_t packet[24];
    } forged{};
    forged.header.nlmsg_len = sizeof forged;
    forged.header.nlmsg_type = (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_PACKET;
    forged.payload_header.nla_len = NLA_HDRLEN + sizeof forged.packet;
    forged.payload_header.nla_type = NFULA_PAYLOAD;
    forged.packet[0] = 0x45;
    forged.packet[9] = IPPROTO_TCP;
    ::inet_pton(AF_INET, "203.0.113.66", &forged.packet[16]);
    forged.packet[22] = 666 >> 8;
    forged.packet[23] = 666 & 0xff;
    auto sent = netns_->run([&]() -> Result<UniqueFd> {
        UniqueFd fd(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER));
        if (!fd) return sys_error("netlink socket");
        sockaddr_nl to{};
        to.nl_family = AF_NETLINK;
        to.nl_pid = daemon_port;
        // The daemon's socket is connected to the kernel, which refuses the unicast at once
        // (ECONNREFUSED); were it not, the reader's sender check must drop what got through.
        for (int i = 0; i < 3; ++i)
            if (::sendto(fd.get(), &forged, sizeof forged, 0, reinterpret_cast<sockaddr*>(&to),
                         sizeof to) != static_cast<ssize_t>(sizeof forged) &&
                errno != ECONNREFUSED)
                return sys_error("send the forged report");
        return fd;
    });
    ASSERT_TRUE(sent) << sent.error().describe();
    // Then one real refusal, queued behind the forged reports: once it is counted, they were read.
    int error = 0;
    EXPECT_EQ(dial("192.0.2.1", 80, &error), "");
    EXPECT_EQ(error, ECONNREFUSED) << std::strerror(error);
    uint64_t refused = 0;
    for (int i = 0; i < 500 && refused == 0; ++i) {
        refused = loop_.call([&] { return gate_->refused(); });
        if (refused == 0) ::usleep(10000);
    }
    ::usleep(100000);  // a late forged report would still be counted now
    EXPECT_EQ(loop_.call([&] { return gate_->refused(); }), 1u) << "the forged reports counted";
}

}  // namespace
}  // namespace corral
