// DNS inside an isolated session, end to end (root): a real corrald with `--egress-hosts-file`
// mapping test names to origin servers on host loopback addresses 127.0.0.11-13 (standing in for
// the internet; no other address is ever contacted), programs in the session resolving names
// through its /etc/resolv.conf (getent, python's getaddrinfo) and connecting directly, without
// the proxy, over the transparent path to the addresses DNS handed out.
#include <arpa/inet.h>
#include <dirent.h>
#include <poll.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include "tests/integration/support/egress_daemon.hpp"
#include "tests/integration/support/origin_server.hpp"

namespace corral {
namespace {

using corral::testing::direct_connect_command;
using corral::testing::EgressHostsDaemon;
using corral::testing::HttpClient;
using corral::testing::OriginServer;
using nlohmann::json;
using ::testing::HasSubstr;

constexpr uint16_t kPortBase = 20000;  // 20000-21999

class EgressDnsTest : public ::testing::Test {
  protected:
    void SetUp() override {
        if (::geteuid() != 0) GTEST_SKIP() << "needs root";
        if (::access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "needs /usr/bin/python3";
        registry_ = std::make_unique<OriginServer>("127.0.0.11", "registry");
        other_ = std::make_unique<OriginServer>("127.0.0.12", "other");
        denied_ = std::make_unique<OriginServer>("127.0.0.13", "denied");
        ASSERT_NE(registry_->port(), 0);
        std::string hosts =
            "127.0.0.11 registry.example.test\n"
            "127.0.0.11 alias.example.test\n"  // a second name of registry's address
            "127.0.0.12 other.example.test\n"
            "127.0.0.13 denied.example.test\n";
        // More addresses than a 512-byte UDP answer holds: the client must retry over TCP.
        for (int i = 1; i <= 40; ++i)
            hosts += "127.0.1." + std::to_string(i) + " many.example.test\n";
        daemon_ = std::make_unique<EgressHostsDaemon>(kPortBase, hosts, extra_args());
        ASSERT_TRUE(daemon_->ready()) << daemon_->log();
    }
    void TearDown() override { daemon_.reset(); }
    /// More corrald options (a derived fixture's).
    virtual std::vector<std::string> extra_args() const { return {}; }

    std::string create(const std::string& egress_yaml) {
        HttpClient c = daemon_->client();
        const std::string yaml =
            "name: dns\nextends: default\nnetwork:\n  egress: " + egress_yaml + "\n";
        auto res = c.post("/v1/sessions", {{"policyYaml", yaml}});
        EXPECT_EQ(res.status, 201u) << res.body;
        return res.json().value("id", "");
    }
    /// Runs `command` in the session without the proxy variables; stdout, "||", stderr.
    std::string run(const std::string& sid, const std::string& command) {
        HttpClient c = daemon_->client();
        auto res =
            c.post("/v1/sessions/" + sid + "/run",
                   {{"command", "unset HTTP_PROXY HTTPS_PROXY http_proxy https_proxy; " + command},
                    {"timeoutMs", 60000}});
        EXPECT_EQ(res.status, 200u) << res.body;
        const json j = res.json();
        return j.value("stdout", "") + "||" + j.value("stderr", "");
    }
    std::string getent(const std::string& sid, const std::string& name) {
        return run(sid, "getent hosts " + name + "; echo rc=$?");
    }
    json egress(const std::string& sid) {
        HttpClient c = daemon_->client();
        return c.get("/v1/sessions/" + sid).json()["egress"];
    }
    unsigned patch(const std::string& sid, const json& body) {
        HttpClient c = daemon_->client();
        return c.request("PATCH", "/v1/sessions/" + sid + "/network", body.dump()).status;
    }
    /// Open sockets of the daemon process (ended sessions keep other descriptors a while, for
    /// their records; none keeps a socket).
    size_t daemon_fds() {
        size_t count = 0;
        const std::string fds = "/proc/" + std::to_string(daemon_->pid()) + "/fd";
        if (DIR* dir = ::opendir(fds.c_str())) {
            while (dirent* entry = ::readdir(dir)) {
                char link[256] = {};
                const std::string path = fds + "/" + entry->d_name;
                if (::readlink(path.c_str(), link, sizeof link - 1) > 0 &&
                    std::string(link).rfind("socket:", 0) == 0)
                    ++count;
            }
            ::closedir(dir);
        }
        return count;
    }

    std::unique_ptr<OriginServer> registry_, other_, denied_;
    std::unique_ptr<EgressHostsDaemon> daemon_;
};

TEST_F(EgressDnsTest, AllowedNameResolvesInsideAndPlainTcpReachesItWithoutTheProxy) {
    const auto sid = create("{mode: custom, allowedHosts: [registry.example.test]}");
    EXPECT_EQ(run(sid, "cat /etc/resolv.conf | grep ^nameserver"), "nameserver 127.0.0.1\n||");
    EXPECT_EQ(getent(sid, "registry.example.test"),
              "127.0.0.11      registry.example.test\nrc=0\n||");
    // No CIDR rule covers 127.0.0.11: the name-bound allowance DNS granted opens it.
    EXPECT_EQ(run(sid, direct_connect_command("registry.example.test", registry_->port())),
              "connected hello from registry\n||");
    EXPECT_EQ(registry_->accepted(), 1);
    const json e = egress(sid);
    EXPECT_EQ(e["dns"], "127.0.0.1:53") << e;
    EXPECT_EQ(e["transparentError"], nullptr) << e;
    EXPECT_EQ(e["transparent"], true) << e;
    EXPECT_EQ(e["refused"], 0) << e;
}

// The sandbox cannot change what its resolv.conf says for anyone else, nor where its own names
// are answered: the file is the daemon's, bound read-only, and the daemon answers regardless.
TEST_F(EgressDnsTest, TheSandboxCannotRewriteTheDaemonsResolvConf) {
    const auto sid = create("{mode: custom, allowedHosts: [registry.example.test]}");
    EXPECT_EQ(run(sid,
                  "/usr/bin/python3 -c '\n"
                  "import errno\n"
                  "try:\n"
                  "    open(\"/etc/resolv.conf\", \"w\").write(\"nameserver 192.0.2.53\\n\")\n"
                  "    print(\"written\")\n"
                  "except OSError as e:\n"
                  "    print(\"refused\" if e.errno in (errno.EROFS, errno.EACCES, errno.EPERM) "
                  "else e)\n'"),
              "refused\n||");
    std::ifstream file(daemon_->dir() + "/state/resolv.conf");
    const std::string text((std::istreambuf_iterator<char>(file)), {});
    EXPECT_THAT(text, HasSubstr("\nnameserver 127.0.0.1\n"));
    EXPECT_EQ(text.find("192.0.2.53"), std::string::npos);
    EXPECT_EQ(getent(sid, "registry.example.test"),
              "127.0.0.11      registry.example.test\nrc=0\n||");
}

TEST_F(EgressDnsTest, NameNotAllowedGetsNxdomainAndIsCountedAndLogged) {
    const auto sid = create("{mode: custom, allowedHosts: [registry.example.test]}");
    EXPECT_EQ(getent(sid, "other.example.test"), "rc=2\n||");  // 2: not found
    const auto refused = egress(sid)["refused"].get<uint64_t>();
    EXPECT_GE(refused, 1u);
    // EAI_NONAME (-2): a definite "no such name", which tools do not retry.
    EXPECT_EQ(run(sid, direct_connect_command("other.example.test", other_->port())), "gaierror -2\n||");
    EXPECT_GT(egress(sid)["refused"].get<uint64_t>(), refused);
    EXPECT_EQ(other_->accepted(), 0);
    EXPECT_THAT(daemon_->log(), HasSubstr("egress to other.example.test (DNS) refused: "
                                          "`other.example.test` is not in allowedHosts"));
}

TEST_F(EgressDnsTest, AllowedNameResolvingIntoADeniedCidrIsRefused) {
    const auto sid =
        create("{mode: custom, allowedHosts: [denied.example.test], deniedCIDRs: [127.0.0.13/32]}");
    EXPECT_EQ(getent(sid, "denied.example.test"), "rc=2\n||");
    EXPECT_GE(egress(sid)["refused"].get<uint64_t>(), 1u);
    EXPECT_THAT(daemon_->log(), HasSubstr("it resolves to 127.0.0.13: deniedCIDRs 127.0.0.13/32"));
    // And the address itself stays closed to direct TCP.
    EXPECT_EQ(run(sid, direct_connect_command("127.0.0.13", denied_->port())), "ECONNREFUSED\n||");
    EXPECT_EQ(denied_->accepted(), 0);
}

TEST_F(EgressDnsTest, PatchChangesTheAnswersOfTheNextQuery) {
    const auto sid = create("{mode: deny-all}");
    EXPECT_EQ(getent(sid, "registry.example.test"), "rc=2\n||");
    ASSERT_EQ(patch(sid, {{"mode", "custom"}, {"allowedHosts", {"registry.example.test"}}}), 200u);
    EXPECT_EQ(run(sid, direct_connect_command("registry.example.test", registry_->port())),
              "connected hello from registry\n||");
    ASSERT_EQ(patch(sid, {{"mode", "custom"}, {"allowedHosts", {"other.example.test"}}}), 200u);
    EXPECT_EQ(getent(sid, "registry.example.test"), "rc=2\n||");
    // The allowance registry.example.test had went with the rule: its address is the session's
    // own loopback again, where nothing listens.
    EXPECT_EQ(run(sid, direct_connect_command("127.0.0.11", registry_->port())), "ECONNREFUSED\n||");
    EXPECT_EQ(run(sid, direct_connect_command("other.example.test", other_->port())),
              "connected hello from other\n||");
    EXPECT_EQ(registry_->accepted(), 1);
    EXPECT_EQ(other_->accepted(), 1);
}

TEST_F(EgressDnsTest, LargeAnswerIsTruncatedOverUdpAndCompleteOverTcp) {
    const auto sid = create("{mode: custom, allowedHosts: [many.example.test]}");
    // 32 addresses (the resolver's cap) do not fit 512 bytes of UDP: glibc sees TC and asks again
    // over TCP.
    EXPECT_EQ(run(sid,
                  "/usr/bin/python3 -c 'import socket; "
                  "print(len(socket.gethostbyname_ex(\"many.example.test\")[2]))'"),
              "32\n||");
}

// IPv6 stays out: the transparent path is IPv4-only, so AAAA answers are empty (a client handed
// an IPv6 address would try it first and get ENETUNREACH) and direct IPv6 has no route.
TEST_F(EgressDnsTest, Ipv6IsNeitherAnsweredNorRouted) {
    const auto sid = create("{mode: allow-all}");
    EXPECT_EQ(run(sid,
                  "/usr/bin/python3 -c '\n"
                  "import socket\n"
                  "try:\n"
                  "    socket.getaddrinfo(\"registry.example.test\", 80, socket.AF_INET6)\n"
                  "    print(\"answered\")\n"
                  "except socket.gaierror as e:\n"
                  "    print(\"no AAAA\")\n'"),
              "no AAAA\n||");
    // 2001:db8::/32 is the documentation prefix (RFC 3849): nothing is sent anywhere.
    EXPECT_EQ(run(sid, direct_connect_command("2001:db8::1", 80)), "ENETUNREACH\n||");
}

// Issue 15: two names answering one address kept only the last one granted, so a PATCH that
// dropped that name closed an address the other allowed name still held.
TEST_F(EgressDnsTest, AnAddressSharedByTwoNamesStaysOpenWhileEitherIsAllowed) {
    const auto sid = create("{mode: custom, allowedHosts: [registry.example.test, alias.example.test]}");
    EXPECT_EQ(getent(sid, "alias.example.test"), "127.0.0.11      alias.example.test\nrc=0\n||");
    EXPECT_EQ(getent(sid, "registry.example.test"),
              "127.0.0.11      registry.example.test\nrc=0\n||");
    // registry.example.test (granted last) is dropped; alias.example.test still holds the address.
    ASSERT_EQ(patch(sid, {{"mode", "custom"}, {"allowedHosts", {"alias.example.test"}}}), 200u);
    EXPECT_EQ(run(sid, direct_connect_command("127.0.0.11", registry_->port())),
              "connected hello from registry\n||");
    // With neither allowed the address is the session's own loopback again.
    ASSERT_EQ(patch(sid, {{"mode", "custom"}, {"allowedHosts", {"other.example.test"}}}), 200u);
    EXPECT_EQ(run(sid, direct_connect_command("127.0.0.11", registry_->port())), "ECONNREFUSED\n||");
    EXPECT_EQ(registry_->accepted(), 1);
}

/// Python inside the session: one UDP datagram to `host`:`port` on a connected socket, then
/// waits for an answer; prints the errno name (the ICMP error a connected socket reports).
std::string udp_to(const std::string& host, uint16_t port) {
    return "/usr/bin/python3 -c '\n"
           "import socket, errno\n"
           "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
           "s.settimeout(10)\n"
           "try:\n"
           "    s.connect((\"" +
           host + "\", " + std::to_string(port) +
           "))\n"
           "    s.send(b\"corral-udp\")\n"
           "    s.recv(100)\n"
           "    print(\"answered\")\n"
           "except socket.timeout:\n"
           "    print(\"TIMEOUT\")\n"
           "except OSError as e:\n"
           "    print(errno.errorcode.get(e.errno, e.errno))\n'";
}

/// A UDP socket on a host loopback address, counting what arrives.
class UdpSink {
  public:
    explicit UdpSink(const char* address) : fd_(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) {
        sockaddr_in in{};
        in.sin_family = AF_INET;
        ::inet_pton(AF_INET, address, &in.sin_addr);
        if (::bind(fd_, reinterpret_cast<sockaddr*>(&in), sizeof in) != 0) return;
        socklen_t length = sizeof in;
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&in), &length);
        port_ = ntohs(in.sin_port);
    }
    ~UdpSink() { ::close(fd_); }
    bool wait_readable(int ms) const {
        pollfd p{fd_, POLLIN, 0};
        return ::poll(&p, 1, ms) == 1;
    }
    uint16_t port() const { return port_; }
    /// Datagrams waiting now (nothing blocks).
    int received() const {
        int count = 0;
        char buffer[512];
        while (::recv(fd_, buffer, sizeof buffer, MSG_DONTWAIT) >= 0) ++count;
        return count;
    }

  private:
    int fd_;
    uint16_t port_ = 0;
};

// UDP other than DNS to the session's resolver has no way out, whatever the rules open (the
// relay and the proxy are TCP only): in every mode every IPv4 address is routed to the session's
// own loopback (so that refused TCP gets ECONNREFUSED rather than ENETUNREACH), where nothing
// listens, so a datagram gets ICMP port unreachable (ECONNREFUSED) at once. Nothing reaches the
// host, and since nothing reaches the daemon either, these are not counted as egress refusals.
TEST_F(EgressDnsTest, UdpOtherThanDnsIsRefusedFastAndNeverLeaves) {
    UdpSink sink("127.0.0.14");
    ASSERT_NE(sink.port(), 0);
    const auto open = create("{mode: allow-all, allowedCIDRs: [127.0.0.14/32]}");
    EXPECT_EQ(run(open, udp_to("127.0.0.14", sink.port())), "ECONNREFUSED\n||");
    // 192.0.2.0/24 is TEST-NET-1 (RFC 5737): routed to the session's own loopback.
    EXPECT_EQ(run(open, udp_to("192.0.2.1", 9)), "ECONNREFUSED\n||");
    EXPECT_EQ(egress(open)["refused"], 0);
    const auto custom = create("{mode: custom, allowedHosts: [registry.example.test]}");
    EXPECT_EQ(run(custom, udp_to("192.0.2.1", 9)), "ECONNREFUSED\n||");
    // Resolving the allowed name (a name-bound allowance of its address) opens TCP, not UDP.
    EXPECT_EQ(run(custom, "getent hosts registry.example.test >/dev/null; " +
                              udp_to("127.0.0.11", registry_->port())),
              "ECONNREFUSED\n||");
    EXPECT_EQ(sink.received(), 0);
    // The control: the sink does receive what the host sends it.
    const int sender = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(sink.port());
    ::inet_pton(AF_INET, "127.0.0.14", &to.sin_addr);
    ::sendto(sender, "x", 1, 0, reinterpret_cast<sockaddr*>(&to), sizeof to);
    ::close(sender);
    EXPECT_TRUE(sink.wait_readable(5000));
    EXPECT_EQ(sink.received(), 1);
}

/// The same daemon with a 1 s TTL and no grace (corrald --egress-dns-ttl/--egress-dns-grace).
class EgressDnsShortTtlTest : public EgressDnsTest {
  protected:
    std::vector<std::string> extra_args() const override {
        return {"--egress-dns-ttl", "1s", "--egress-dns-grace", "0s"};
    }
};

// Issue 15: an expired allowance stayed in the namespace until the next DNS answer or PATCH.
// It is closed on a timer now: without any further query, the address stops being redirected
// (ECONNREFUSED from the session's own loopback, where nothing listens; while it is redirected
// the relay answers with a reset, ECONNRESET).
TEST_F(EgressDnsShortTtlTest, AnAnsweredAddressClosesAtItsTtlWithoutFurtherTraffic) {
    const auto sid = create("{mode: custom, allowedHosts: [registry.example.test]}");
    EXPECT_EQ(run(sid, "getent hosts registry.example.test >/dev/null && " +
                           direct_connect_command("registry.example.test", registry_->port())),
              "connected hello from registry\n||");
    const auto refused = egress(sid)["refused"].get<uint64_t>();
    // Waiting past TTL + grace, with no traffic from the session at all.
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    std::string answer;
    for (int i = 0; i < 20; ++i) {  // a bound for a loaded machine, not a timing
        answer = run(sid, direct_connect_command("127.0.0.11", registry_->port()));
        if (answer == "ECONNREFUSED\n||") break;
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    EXPECT_EQ(answer, "ECONNREFUSED\n||");
    EXPECT_EQ(egress(sid)["refused"].get<uint64_t>(), refused) << "never reached the relay";
    EXPECT_EQ(registry_->accepted(), 1);
}

TEST_F(EgressDnsTest, ResolverGoesWithTheSession) {
    HttpClient c = daemon_->client();
    // A first session warms up what the daemon keeps open for good once it ran any.
    const auto warm = create("{mode: custom, allowedHosts: [registry.example.test]}");
    ASSERT_EQ(c.del("/v1/sessions/" + warm).status, 200u);
    const size_t before = daemon_fds();
    const auto sid = create("{mode: custom, allowedHosts: [registry.example.test]}");
    EXPECT_EQ(getent(sid, "registry.example.test"),
              "127.0.0.11      registry.example.test\nrc=0\n||");
    EXPECT_GT(daemon_fds(), before);
    ASSERT_EQ(c.del("/v1/sessions/" + sid).status, 200u);
    EXPECT_TRUE(egress(sid)["dns"].is_null()) << egress(sid);
    // Every socket of the session's network (resolver, proxy, relay) is closed with it.
    size_t after = daemon_fds();
    for (int i = 0; i < 100 && after > before; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        after = daemon_fds();
    }
    EXPECT_LE(after, before);
}

}  // namespace
}  // namespace corral
