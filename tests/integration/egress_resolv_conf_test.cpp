// Where an isolated sandbox reads /etc/resolv.conf when the host's is not a plain file (root):
// a real corrald runs in a private mount namespace of the test's making, whose /etc is a copy of
// the host's (a tmpfs holding a bind of every entry) with /etc/resolv.conf replaced by
// systemd-resolved's symlink into /run, or left out. Nothing of the host changes: the namespace
// goes with the daemon, even when a test fails. Lookups inside go to the session's resolver,
// which answers the allowed name (a hosts-file name on a host loopback address) and nothing else.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tests/integration/support/egress_daemon.hpp"
#include "tests/integration/support/origin_server.hpp"
#include "tests/support/temp_dir.hpp"

namespace corral {
namespace {

using corral::testing::EgressHostsDaemon;
using corral::testing::HttpClient;
using corral::testing::OriginServer;
using ::testing::HasSubstr;

constexpr uint16_t kPortBase = 22000;  // 22000-23999
constexpr const char* kStub = "nameserver 127.0.0.53\noptions edns0 trust-ad\n";

/// What the test's /etc/resolv.conf is.
struct HostResolvConf {
    bool present = false;
    std::string link;  ///< a symlink with this text; empty: absent
};

/// In the daemon's child: a private mount namespace whose /etc is the host's but for
/// resolv.conf, and whose /run is a tmpfs holding systemd-resolved's stub file. Raw calls only
/// where it matters; returns false (the daemon does not start) on any failure.
bool private_etc(const std::string& dir, const HostResolvConf& want) {
    if (::unshare(CLONE_NEWNS) != 0) return false;
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return false;
    const std::string aside = dir + "/etc-aside";
    if (::mkdir(aside.c_str(), 0700) != 0) return false;
    if (::mount("/etc", aside.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) return false;
    if (::mount("tmpfs", "/etc", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") != 0) return false;
    for (const auto& entry : std::filesystem::directory_iterator(aside)) {
        const std::string name = entry.path().filename();
        const std::string to = "/etc/" + name;
        if (name == "resolv.conf") continue;
        if (entry.is_symlink()) {
            if (::symlink(std::filesystem::read_symlink(entry.path()).c_str(), to.c_str()) != 0)
                return false;
            continue;
        }
        if (entry.is_directory() ? ::mkdir(to.c_str(), 0755) != 0
                                 : ::close(::open(to.c_str(), O_CREAT | O_WRONLY, 0644)) != 0)
            return false;
        if (::mount(entry.path().c_str(), to.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0)
            return false;
    }
    if (want.present && ::symlink(want.link.c_str(), "/etc/resolv.conf") != 0) return false;
    if (::mount("tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") != 0) return false;
    std::filesystem::create_directories("/run/systemd/resolve");
    std::ofstream("/run/systemd/resolve/stub-resolv.conf") << kStub;
    return true;
}

class EgressResolvConfTest : public ::testing::Test {
  protected:
    void SetUp() override {
        if (::geteuid() != 0) GTEST_SKIP() << "needs root";
        registry_ = std::make_unique<OriginServer>("127.0.0.11", "registry");
        ASSERT_NE(registry_->port(), 0);
    }
    void TearDown() override { daemon_.reset(); }
    void start(HostResolvConf want) {
        daemon_ = std::make_unique<EgressHostsDaemon>(
            kPortBase,
            "127.0.0.11 registry.example.test\n"
            "127.0.0.12 other.example.test\n",
            std::vector<std::string>{},
            [want](const std::string& dir) { return private_etc(dir, want); });
        ASSERT_TRUE(daemon_->ready()) << daemon_->log();
    }
    /// A session allowed registry.example.test only; its id, or "" with the error in `*error`.
    std::string create(std::string* error = nullptr) {
        HttpClient c = daemon_->client();
        auto res = c.post("/v1/sessions",
                          {{"policyYaml",
                            "name: resolv\nextends: default\nnetwork:\n  egress: {mode: custom, "
                            "allowedHosts: [registry.example.test]}\n"}});
        if (error) *error = res.body;
        if (res.status != 201u) return "";
        return res.json().value("id", "");
    }
    std::string run(const std::string& sid, const std::string& command) {
        HttpClient c = daemon_->client();
        auto res =
            c.post("/v1/sessions/" + sid + "/run", {{"command", command}, {"timeoutMs", 60000}});
        EXPECT_EQ(res.status, 200u) << res.body;
        const auto j = res.json();
        return j.value("stdout", "") + "||" + j.value("stderr", "");
    }
    /// The session resolves the allowed name and nothing else, through its /etc/resolv.conf.
    void expect_session_dns(const std::string& sid) {
        EXPECT_EQ(run(sid, "grep ^nameserver /etc/resolv.conf"), "nameserver 127.0.0.1\n||");
        EXPECT_EQ(run(sid, "getent hosts registry.example.test; echo rc=$?"),
                  "127.0.0.11      registry.example.test\nrc=0\n||");
        EXPECT_EQ(run(sid, "getent hosts other.example.test; echo rc=$?"), "rc=2\n||");
        EXPECT_EQ(run(sid,
                      "unset HTTP_PROXY http_proxy; /usr/bin/curl -s --max-time 20 "
                      "http://registry.example.test:" +
                          std::to_string(registry_->port()) + "/"),
                  "hello from registry||");
    }
    /// /etc/resolv.conf as the daemon's namespace has it (the host's stand-in).
    std::string daemon_view(const std::string& path) {
        std::ifstream in("/proc/" + std::to_string(daemon_->pid()) + "/root" + path);
        return std::string(std::istreambuf_iterator<char>(in), {});
    }

    std::unique_ptr<OriginServer> registry_;
    std::unique_ptr<EgressHostsDaemon> daemon_;
};

// Most Ubuntu hosts: /etc/resolv.conf -> ../run/systemd/resolve/stub-resolv.conf. The link is
// followed beneath the sandbox's root into its fresh /run, where corral's file is created.
TEST_F(EgressResolvConfTest, SystemdResolvedSymlinkLeadsToTheSessionResolver) {
    if (::access("/usr/bin/curl", X_OK) != 0) GTEST_SKIP() << "needs /usr/bin/curl";
    start({true, "../run/systemd/resolve/stub-resolv.conf"});
    ASSERT_EQ(daemon_view("/etc/resolv.conf"), kStub);  // the stand-in host is as described
    std::string error;
    const auto sid = create(&error);
    ASSERT_FALSE(sid.empty()) << error << daemon_->log();
    EXPECT_EQ(run(sid, "readlink /etc/resolv.conf"), "../run/systemd/resolve/stub-resolv.conf\n||");
    expect_session_dns(sid);
    EXPECT_EQ(daemon_view("/run/systemd/resolve/stub-resolv.conf"), kStub);  // untouched
}

// No /etc/resolv.conf at all (minimal containers): the sandbox's /etc is mirrored into a
// corral tmpfs that has one, and the host's /etc still has none.
TEST_F(EgressResolvConfTest, MissingResolvConfIsCreatedInTheSandboxOnly) {
    if (::access("/usr/bin/curl", X_OK) != 0) GTEST_SKIP() << "needs /usr/bin/curl";
    start({false, ""});
    const std::string daemon_etc = "/proc/" + std::to_string(daemon_->pid()) + "/root/etc";
    struct stat st {};
    ASSERT_NE(::lstat((daemon_etc + "/resolv.conf").c_str(), &st), 0);
    std::string error;
    const auto sid = create(&error);
    ASSERT_FALSE(sid.empty()) << error << daemon_->log();
    expect_session_dns(sid);
    // The rest of /etc is the host's, read-only as before.
    EXPECT_EQ(run(sid, "head -c 5 /etc/passwd; touch /etc/new 2>/dev/null || echo refused"),
              "root:refused\n||");
    EXPECT_NE(::lstat((daemon_etc + "/resolv.conf").c_str(), &st), 0);
    EXPECT_NE(::lstat((daemon_etc + "/new").c_str(), &st), 0);
}

// A link that climbs with `..` stays beneath the sandbox's root, as openat2(RESOLVE_IN_ROOT)
// does: the mount lands inside the sandbox's view (its fresh /tmp), never on the host path the
// text would name from the host's root. The precedent for mounting on a path a link may
// redirect is runc CVE-2021-30465 (a symlink-exchange race moved a bind outside the rootfs).
TEST_F(EgressResolvConfTest, LinkClimbingOutOfTheRootStaysBeneathIt) {
    const test_support::TempDir target("corral-resolv-target");  // removed however it ends
    const std::string& target_dir = target.path();
    ASSERT_FALSE(target_dir.empty());
    std::ofstream(target_dir + "/file") << "host file\n";
    start({true, "../../../../../../.." + target_dir + "/file"});
    std::string error;
    const auto sid = create(&error);
    ASSERT_FALSE(sid.empty()) << error << daemon_->log();
    EXPECT_EQ(run(sid, "grep ^nameserver /etc/resolv.conf"), "nameserver 127.0.0.1\n||");
    EXPECT_EQ(run(sid, "getent hosts registry.example.test; echo rc=$?"),
              "127.0.0.11      registry.example.test\nrc=0\n||");
    std::ifstream host(target_dir + "/file");
    EXPECT_EQ(std::string(std::istreambuf_iterator<char>(host), {}), "host file\n");
    daemon_.reset();
}

// A link into a kernel file system (mounted after resolv.conf, so it would cover the file, or
// /proc/self/root, which leads out of any root) is refused with the reason, not followed.
TEST_F(EgressResolvConfTest, LinkIntoProcIsRefusedWithTheReason) {
    start({true, "/proc/self/root/etc/hosts"});
    std::string error;
    EXPECT_EQ(create(&error), "");
    EXPECT_THAT(error, HasSubstr("inside /proc"));
}

}  // namespace
}  // namespace corral
