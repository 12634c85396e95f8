#include "security_daemon.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "sandbox_harness.hpp"

namespace corral::security {

namespace fs = std::filesystem;
using testing::HttpClient;

void DaemonTest::SetUp() {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (cgroups, namespaces, mounts)";
    if (!fs::exists(CORRAL_BINARY_DIR "/supervisor/corrald"))
        GTEST_SKIP() << "corrald is not built";
    daemon_ = std::make_unique<Daemon>(daemon_env_);
    ASSERT_TRUE(daemon_->ready()) << "corrald did not start:\n" << daemon_->log();
}

void DaemonTest::TearDown() {
    daemon_.reset();
}

std::pair<std::string, fs::path> DaemonTest::session(HttpClient& c, const std::string& policy) {
    auto res = c.post("/v1/sessions", {{"policy", policy}});
    EXPECT_EQ(res.status, 201u) << res.body;
    const std::string base = "/v1/sessions/" + res.json()["id"].get<std::string>();
    auto info = c.get(base);
    return {base, fs::path(info.json().value("root", std::string()))};
}

void DaemonTest::upload_probe(HttpClient& c, const std::string& base, const std::string& program,
                              const std::string& name) {
    std::ifstream in(program, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), {});
    auto put = c.request("PUT", base + "/files?path=" + name, bytes);
    ASSERT_EQ(put.status, 200u) << put.body;
}

std::string DaemonTest::run(HttpClient& c, const std::string& base, const std::string& command) {
    auto res = c.post(base + "/run", {{"command", command}});
    EXPECT_EQ(res.status, 200u) << res.body;
    auto j = res.json();
    return j["stdout"].is_string() ? j["stdout"].get<std::string>() : j.dump();
}

}  // namespace corral::security
