// The egress allow-list against real network namespaces (root): a host listener on the list is
// reachable from inside the namespace at the same address and port; a host listener not on the
// list is not; stopping the proxy closes the way out.
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <net/if.h>

#include "sessions/network/egress_proxy.hpp"
#include "sessions/network/host_addresses.hpp"
#include "sessions/network/http_proxy.hpp"
#include "tests/integration/netns_fixture.hpp"

namespace corral {
namespace {

using namespace nettest;

class EgressTest : public ::testing::Test {
  protected:
    void SetUp() override {
        if (::geteuid() != 0) GTEST_SKIP() << "needs root (network namespaces)";
        auto ns = new_network_namespace();
        ASSERT_TRUE(ns) << ns.error().describe();
        auto thread = NetnsRunner::start(std::move(*ns));
        ASSERT_TRUE(thread) << thread.error().describe();
        netns_ = std::move(*thread);
        allowed_ = host_echo("127.0.0.1");
        other_ = host_echo("127.0.0.1");
    }
    void TearDown() override {
        if (proxy_ || http_proxy_)
            loop_.call([&] {
                proxy_.reset();
                http_proxy_.reset();
                return 0;
            });
        if (netns_) netns_->stop();
    }
    /// An echo server on the host's loopback, on an ephemeral port.
    std::unique_ptr<EchoServer> host_echo(const std::string& address) {
        auto listener = make_tcp_listener({AF_INET, address, 0});
        EXPECT_TRUE(listener);
        return std::make_unique<EchoServer>(std::move(*listener));
    }
    /// An HTTP egress proxy in the namespace (http_proxy_) judging by `spec`; its gate, or null
    /// when it could not start (the test has failed then).
    std::shared_ptr<EgressGate> start_http_proxy(const EgressSpec& spec) {
        auto rules = EgressRules::compile(spec);
        EXPECT_TRUE(rules) << rules.error().describe();
        if (!rules) return nullptr;
        auto gate = std::make_shared<EgressGate>("t", std::move(*rules), EgressEnvironment{});
        auto made = loop_.call([&] { return HttpEgressProxy::start(loop_.io, netns_, gate); });
        EXPECT_TRUE(made) << made.error().describe();
        if (!made) return nullptr;
        http_proxy_ = std::move(*made);
        return gate;
    }
    Status start_proxy(std::vector<std::string> allow) {
        auto made = loop_.call([&] { return EgressProxy::start(loop_.io, netns_, allow); });
        if (!made) return std::move(made.error());
        proxy_ = std::move(*made);
        return {};
    }
    /// errno of a connect from inside the namespace to 127.0.0.1:`port`; on success, also checks
    /// an echo round trip.
    int connect_from_inside(uint16_t port, std::string* echoed = nullptr) {
        auto socket = netns_->tcp_socket(AF_INET);
        EXPECT_TRUE(socket);
        int error = connect_loopback(socket->get(), port);
        if (error == 0 && echoed) {
            write_all(socket->get(), "out and back");
            *echoed = read_exactly(socket->get(), 12);
        }
        return error;
    }

    Loop loop_;
    std::shared_ptr<NetnsRunner> netns_;
    std::unique_ptr<EchoServer> allowed_;
    std::unique_ptr<EchoServer> other_;
    std::unique_ptr<EgressProxy> proxy_;
    std::unique_ptr<HttpEgressProxy> http_proxy_;  ///< start_http_proxy's; reset on the loop
};

TEST_F(EgressTest, HostListenersUnreachableFromInsideByDefault) {
    EXPECT_EQ(connect_from_inside(allowed_->port()), ECONNREFUSED);
    EXPECT_EQ(connect_from_inside(other_->port()), ECONNREFUSED);
}

TEST_F(EgressTest, AllowedHostListenerReachableAtSameAddressAndPort) {
    ASSERT_TRUE(start_proxy({"127.0.0.1:" + std::to_string(allowed_->port())}));
    std::string echoed;
    EXPECT_EQ(connect_from_inside(allowed_->port(), &echoed), 0);
    EXPECT_EQ(echoed, "out and back");
    EXPECT_EQ(allowed_->accepted(), 1);
}

TEST_F(EgressTest, ListenerNotOnListStaysUnreachable) {
    ASSERT_TRUE(start_proxy({"127.0.0.1:" + std::to_string(allowed_->port())}));
    EXPECT_EQ(connect_from_inside(other_->port()), ECONNREFUSED);
    EXPECT_EQ(other_->accepted(), 0);
}

TEST_F(EgressTest, LocalhostEntryMeansIpv4Loopback) {
    ASSERT_TRUE(start_proxy({"localhost:" + std::to_string(allowed_->port())}));
    std::string echoed;
    EXPECT_EQ(connect_from_inside(allowed_->port(), &echoed), 0);
    EXPECT_EQ(echoed, "out and back");
}

TEST_F(EgressTest, AllowedButHostServiceDownClosesConnection) {
    uint16_t port = allowed_->port();
    allowed_.reset();  // the host service is gone
    ASSERT_TRUE(start_proxy({"127.0.0.1:" + std::to_string(port)}));
    auto socket = netns_->tcp_socket(AF_INET);
    ASSERT_TRUE(socket);
    ASSERT_EQ(connect_loopback(socket->get(), port), 0);  // the proxy inside accepts...
    int error = 0;
    EXPECT_EQ(read_to_eof(socket->get(), &error), "");  // ...and closes at once
    EXPECT_NE(error, EAGAIN) << "hung until the receive timeout";
}

TEST_F(EgressTest, StopClosesTheWayOut) {
    ASSERT_TRUE(start_proxy({"127.0.0.1:" + std::to_string(allowed_->port())}));
    auto open = netns_->tcp_socket(AF_INET);
    ASSERT_TRUE(open);
    ASSERT_EQ(connect_loopback(open->get(), allowed_->port()), 0);
    ASSERT_TRUE(write_all(open->get(), "ping"));
    ASSERT_EQ(read_exactly(open->get(), 4), "ping");
    loop_.call([&] {
        proxy_->stop();
        return 0;
    });
    int error = 0;
    read_to_eof(open->get(), &error);
    EXPECT_TRUE(error == 0 || error == ECONNRESET) << std::strerror(error);
    EXPECT_EQ(connect_from_inside(allowed_->port()), ECONNREFUSED);
}

// The HTTP egress proxy's lifetime: a CONNECT tunnel through it works, and stop() closes both
// the tunnel and the listener (what the session's end does), leaving nothing to connect to.
TEST_F(EgressTest, HttpProxyStopClosesTunnelsAndListener) {
    ASSERT_TRUE(start_http_proxy({EgressMode::custom, {}, {"127.0.0.1/32"}, {}}));
    auto& proxy = http_proxy_;
    const uint16_t port = proxy->port();
    auto tunnel = netns_->tcp_socket(AF_INET);
    ASSERT_TRUE(tunnel);
    ASSERT_EQ(connect_loopback(tunnel->get(), port), 0);
    const std::string connect =
        "CONNECT 127.0.0.1:" + std::to_string(allowed_->port()) + " HTTP/1.1\r\n\r\n";
    ASSERT_TRUE(write_all(tunnel->get(), connect));
    const std::string established = "HTTP/1.1 200 Connection established\r\n\r\n";
    ASSERT_EQ(read_exactly(tunnel->get(), established.size()), established);
    ASSERT_TRUE(write_all(tunnel->get(), "ping"));
    ASSERT_EQ(read_exactly(tunnel->get(), 4), "ping");
    EXPECT_EQ(loop_.call([&] { return proxy->connection_count(); }), 1u);
    loop_.call([&] {
        proxy->stop();
        return 0;
    });
    int error = 0;
    read_to_eof(tunnel->get(), &error);
    EXPECT_TRUE(error == 0 || error == ECONNRESET) << std::strerror(error);
    EXPECT_EQ(connect_from_inside(port), ECONNREFUSED);
    EXPECT_EQ(loop_.call([&] { return proxy->connection_count(); }), 0u);
}

/// One of this host's own addresses that is not loopback (an interface's), or nullopt.
std::optional<IpAddress> own_interface_address() {
    ifaddrs* list = nullptr;
    if (::getifaddrs(&list) != 0) return std::nullopt;
    std::optional<IpAddress> found;
    for (ifaddrs* i = list; i && !found; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || (i->ifa_flags & IFF_LOOPBACK))
            continue;
        found = IpAddress::from_bytes(
            AF_INET, &reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr);
    }
    ::freeifaddrs(list);
    return found;
}

// Stop 44's red-team finding: under allow-all, a CONNECT to one of the daemon host's own
// interface addresses reached whatever listened there on 0.0.0.0, as a connection from the host
// itself; the protected ranges covered loopback only. Now refused before any connect (nothing
// listens at the port: without the rule the proxy would try, and answer 502, not 403).
TEST_F(EgressTest, HttpProxyRefusesTheHostsOwnAddressesUnderAllowAll) {
    const auto own = own_interface_address();
    if (!own) GTEST_SKIP() << "this host has no non-loopback IPv4 address";
    auto gate = start_http_proxy({EgressMode::allow_all, {}, {}, {}});
    ASSERT_TRUE(gate);
    auto tunnel = netns_->tcp_socket(AF_INET);
    ASSERT_TRUE(tunnel);
    ASSERT_EQ(connect_loopback(tunnel->get(), http_proxy_->port()), 0);
    const std::string target = own->to_string() + ":9";
    ASSERT_TRUE(write_all(tunnel->get(), "CONNECT " + target + " HTTP/1.1\r\n\r\n"));
    int error = 0;
    const std::string answer = read_to_eof(tunnel->get(), &error);
    EXPECT_EQ(answer.rfind("HTTP/1.1 403", 0), 0u) << answer;
    EXPECT_NE(answer.find("an address of the daemon's host"), std::string::npos) << answer;
    // The transparent relay's judgement is the same gate's.
    EXPECT_FALSE(gate->check_direct(*own, 9).allowed);
}

// The probe asks the kernel of the calling thread's namespace: the host's interface address is
// its own there and nowhere else; an address no interface has is nobody's.
TEST_F(EgressTest, IsHostAddressIsTheCallingNamespacesOwnAnswer) {
    EXPECT_TRUE(is_host_address(*IpAddress::parse("127.0.0.1")));
    EXPECT_TRUE(is_host_address(*IpAddress::parse("::1")));
    EXPECT_FALSE(is_host_address(*IpAddress::parse("203.0.113.77")));
    const auto own = own_interface_address();
    if (!own) GTEST_SKIP() << "this host has no non-loopback IPv4 address";
    EXPECT_TRUE(is_host_address(*own));
    bool inside = true;
    auto done = netns_->run([&]() -> Result<UniqueFd> {
        inside = is_host_address(*own);
        return UniqueFd(-1);
    });
    EXPECT_FALSE(inside) << own->to_string() << " counted as local in a namespace without it";
}

TEST_F(EgressTest, NonLoopbackEntryRefused) {
    Status status = start_proxy({"10.1.2.3:80"});
    ASSERT_FALSE(status);
    EXPECT_EQ(status.error().code, EINVAL);
    EXPECT_NE(status.error().message.find("10.1.2.3:80"), std::string::npos);
}

}  // namespace
}  // namespace corral
