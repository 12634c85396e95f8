// Egress across a crash of corrald (issue 15 with issue 12's "Surviving the daemon"): after
// kill -9 and a start with the same arguments, a re-adopted isolated session still reaches its
// allowed names through the proxy, its DNS and its transparent relay, and is still held to its
// rules — the rules a client set with PATCH .../network, not the policy file's — and PATCH
// still changes them. A process started before the crash keeps a working proxy: the variables it
// was given name the same proxy address after the restart. Origin servers on host loopback
// addresses 127.0.0.11, .12 and .14 stand in for the internet (no other address is contacted).

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>

#include "support/corrald_process.hpp"
#include "support/egress_daemon.hpp"
#include "support/http_client.hpp"
#include "support/origin_server.hpp"

namespace corral {
namespace {

using nlohmann::json;
using testing::CorraldProcess;
using testing::direct_connect_command;
using testing::HostsFile;
using testing::HttpClient;
using testing::OriginServer;

class EgressRestartTest : public ::testing::Test {
  protected:
    void SetUp() override {
        if (::geteuid() != 0) GTEST_SKIP() << "needs root";
        if (!std::filesystem::exists(CORRAL_BINARY_DIR "/supervisor/corrald"))
            GTEST_SKIP() << "corrald is not built";
        if (::access("/usr/bin/curl", X_OK) != 0 || ::access("/usr/bin/python3", X_OK) != 0)
            GTEST_SKIP() << "needs /usr/bin/curl and /usr/bin/python3";
        registry_ = std::make_unique<OriginServer>("127.0.0.11", "registry");
        other_ = std::make_unique<OriginServer>("127.0.0.12", "other");
        cidr_ = std::make_unique<OriginServer>("127.0.0.14", "cidr");
        ASSERT_NE(registry_->port(), 0);
        hosts_ = std::make_unique<HostsFile>(
            "127.0.0.11 registry.example.test\n"
            "127.0.0.12 other.example.test\n");
        ASSERT_FALSE(hosts_->hosts_file().empty());
        daemon_ = std::make_unique<CorraldProcess>(
            std::vector<std::string>{"--egress-hosts-file", hosts_->hosts_file()});
        ASSERT_TRUE(daemon_->ready()) << daemon_->log();
    }
    // The daemon (and with it every session) goes before the hosts file and the origins.
    void TearDown() override { daemon_.reset(); }

    std::string run(const std::string& sid, const std::string& command) {
        HttpClient c = daemon_->client();
        auto res =
            c.post("/v1/sessions/" + sid + "/run", {{"command", command}, {"timeoutMs", 60000}});
        EXPECT_EQ(res.status, 200u) << res.body;
        return res.json().value("stdout", "") + "||" + res.json().value("stderr", "");
    }
    std::string curl(const std::string& sid, const std::string& host, const OriginServer& origin) {
        return run(sid, "curl -sS --max-time 30 -w ' %{http_code}' http://" + host + ":" +
                            std::to_string(origin.port()) + "/");
    }
    testing::HttpResponse patch(const std::string& sid, const json& body) {
        HttpClient c = daemon_->client();
        return c.request("PATCH", "/v1/sessions/" + sid + "/network", body.dump());
    }

    std::unique_ptr<OriginServer> registry_, other_, cidr_;
    std::unique_ptr<HostsFile> hosts_;
    std::unique_ptr<CorraldProcess> daemon_;
};

TEST_F(EgressRestartTest, ReadoptedSessionStillReachesWhatItMayAndNothingElse) {
    HttpClient c = daemon_->client();
    // The policy file says deny-all; the client opens the registry at run time.
    auto made = c.post("/v1/sessions", {{"policy", "default"}});
    ASSERT_EQ(made.status, 201u) << made.body;
    const std::string sid = made.json()["id"];
    const std::string s = "/v1/sessions/" + sid;
    auto opened = patch(sid, {{"mode", "custom"},
                              {"allowedHosts", {"registry.example.test"}},
                              {"allowedCIDRs", {"127.0.0.14/32"}}});
    ASSERT_EQ(opened.status, 200u) << opened.body;
    EXPECT_EQ(curl(sid, "registry.example.test", *registry_), "hello from registry 200||");
    const json before = c.get(s).json()["egress"];
    ASSERT_TRUE(before["proxy"].is_string()) << before;
    // A process that outlives the crash and only then uses the proxy it was given.
    auto waiter =
        c.post(s + "/processes",
               {{"command",
                 "while [ ! -e /tmp/go ]; do sleep 0.05; done; echo $HTTP_PROXY; "
                 "curl -sS --max-time 30 -w ' %{http_code}' http://registry.example.test:" +
                     std::to_string(registry_->port()) + "/"}});
    ASSERT_EQ(waiter.status, 201u) << waiter.body;
    const std::string proc = waiter.json()["id"];

    daemon_->kill_hard();
    ASSERT_TRUE(daemon_->start()) << daemon_->log();
    ASSERT_NE(daemon_->log().find("re-adopted 1 session"), std::string::npos) << daemon_->log();

    const json after = c.get(s).json()["egress"];
    EXPECT_EQ(after["mode"], "custom") << after;
    EXPECT_EQ(after["allowedHosts"], json({"registry.example.test"})) << after;
    EXPECT_EQ(after["proxy"], before["proxy"]) << "the address the session's processes were given";
    EXPECT_EQ(after["transparent"], before["transparent"]) << after;

    // The process started before the crash: its proxy variables still lead to the daemon.
    ASSERT_EQ(c.request("PUT", s + "/files?path=/tmp/go", "go").status, 200u);
    auto waited = c.get(s + "/processes/" + proc + "/wait?timeoutMs=60000");
    ASSERT_EQ(waited.status, 200u) << waited.body;
    auto logs = c.get(s + "/processes/" + proc + "/logs?stream=stdout");
    ASSERT_EQ(logs.status, 200u) << logs.body;
    EXPECT_EQ(logs.json().value("data", ""),
              before["proxy"].get<std::string>() + "\nhello from registry 200")
        << waited.body;

    // New processes: proxy, DNS + relay for the allowed name, the relay for the CIDR.
    EXPECT_EQ(curl(sid, "registry.example.test", *registry_), "hello from registry 200||");
    EXPECT_EQ(run(sid, direct_connect_command("registry.example.test", registry_->port())),
              "connected hello from registry\n||");
    EXPECT_EQ(run(sid, direct_connect_command("127.0.0.14", cidr_->port())),
              "connected hello from cidr\n||");
    // Still enforced: another name is refused (403 naming it), counted and logged.
    const std::string refused = curl(sid, "other.example.test", *other_);
    EXPECT_NE(refused.find(" 403||"), std::string::npos) << refused;
    EXPECT_NE(refused.find("other.example.test"), std::string::npos) << refused;
    EXPECT_GE(c.get(s).json()["egress"]["refused"].get<int>(), 1);
    EXPECT_NE(daemon_->log().find("egress to other.example.test:"), std::string::npos);
    EXPECT_EQ(other_->accepted(), 0);

    // And PATCH still governs the next connection, on every path.
    ASSERT_EQ(patch(sid, {{"mode", "deny-all"}}).status, 200u);
    EXPECT_NE(curl(sid, "registry.example.test", *registry_).find(" 403||"), std::string::npos);
    EXPECT_EQ(run(sid, direct_connect_command("127.0.0.14", cidr_->port())), "ECONNREFUSED\n||");
    EXPECT_EQ(cidr_->accepted(), 1);
    EXPECT_EQ(registry_->accepted(), 4);

    ASSERT_EQ(c.del(s).status, 200u);
    EXPECT_TRUE(daemon_->footprint().empty()) << daemon_->footprint().describe();
}

}  // namespace
}  // namespace corral
