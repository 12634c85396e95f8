// Terminals over WebSocket (issue 14) against a real corrald: a login shell on a pty in a session,
// typed into and read from through Beast's WebSocket client, in both an unisolated (`none`) and
// a fully isolated (`default`: user, mount, pid namespaces, the sandbox's own devpts) session.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "support/http_client.hpp"
#include "support/terminal_daemon.hpp"
#include "support/ws_client.hpp"

namespace corral {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::HttpClient;
using testing::TerminalDaemon;
using testing::TerminalSocket;

/// Whether any host process's command line contains `needle`.
bool process_with_cmdline(const std::string& needle) {
    for (const auto& entry : fs::directory_iterator("/proc")) {
        std::ifstream in(entry.path() / "cmdline");
        std::string line((std::istreambuf_iterator<char>(in)), {});
        for (char& c : line)
            if (c == '\0') c = ' ';
        if (line.find(needle) != std::string::npos) return true;
    }
    return false;
}

class TerminalWs : public ::testing::TestWithParam<const char*> {
  protected:
    void SetUp() override {
        if (::geteuid() != 0) GTEST_SKIP() << "needs root (cgroups, namespaces)";
        daemon_ = std::make_unique<TerminalDaemon>();
        ASSERT_TRUE(daemon_->ready()) << daemon_->log();
        auto res = http().post("/v1/sessions", {{"policy", GetParam()}});
        ASSERT_EQ(res.status, 201u) << res.body;
        sid_ = res.json()["id"];
    }
    void TearDown() override {
        if (daemon_ && !sid_.empty()) (void)http().del("/v1/sessions/" + sid_);
    }
    HttpClient& http() {
        if (!client_) client_ = std::make_unique<HttpClient>(daemon_->client());
        return *client_;
    }
    /// Starts a terminal; returns its process id.
    std::string start(json body = {{"cols", 80}, {"rows", 24}}) {
        auto res = http().post("/v1/sessions/" + sid_ + "/terminals", body);
        EXPECT_EQ(res.status, 201u) << res.body;
        return res.json().value("id", "");
    }
    std::unique_ptr<TerminalSocket> attach(const std::string& proc) {
        return std::make_unique<TerminalSocket>(
            daemon_->socket_path(), "/v1/sessions/" + sid_ + "/terminals/" + proc + "/ws");
    }
    /// Attaches and waits for root's prompt: a shell may flush what was typed before it started.
    std::unique_ptr<TerminalSocket> attach_ready(const std::string& proc) {
        auto term = attach(proc);
        EXPECT_TRUE(term->read_until("# ")) << "no prompt: " << term->output;
        return term;
    }

    std::unique_ptr<TerminalDaemon> daemon_;
    std::unique_ptr<HttpClient> client_;
    std::string sid_;
};

TEST_P(TerminalWs, TypedCommandRunsAndItsOutputComesBack) {
    const std::string proc = start();
    auto term = attach_ready(proc);
    term->type("echo $((6*7))\n");
    EXPECT_TRUE(term->read_until("42\r\n")) << term->output << daemon_->log();
    // It is the process's own, reopenable by name (the sandbox's user owns it).
    term->type("test -t 0 && echo again > $(tty) && echo is-a-$((1))-tty\n");
    EXPECT_TRUE(term->read_until("is-a-1-tty")) << term->output;
    auto listed = http().get("/v1/sessions/" + sid_ + "/processes/" + proc).json();
    EXPECT_EQ(listed["terminal"], true) << listed.dump();
    EXPECT_EQ(listed["running"], true);
}

// `shell`: the terminal starts where a shell context is — its cwd and its exported variables.
TEST_P(TerminalWs, TerminalInAShellContextStartsInItsCwdAndEnv) {
    const std::string base = "/v1/sessions/" + sid_;
    auto shell = http().post(base + "/shells", {{"id", "ctx"}});
    if (shell.status == 409u) GTEST_SKIP() << "no bash in this sandbox: " << shell.body;
    ASSERT_EQ(shell.status, 201u) << shell.body;
    auto ran = http().post(base + "/run", {{"command", "mkdir -p deep/er && cd deep/er && "
                                                       "export CTX_MARK=from-ctx"},
                                           {"shell", "ctx"}});
    ASSERT_EQ(ran.status, 200u) << ran.body;
    const std::string proc = start({{"cols", 80}, {"rows", 24}, {"shell", "ctx"}});
    auto term = attach_ready(proc);
    term->type("echo \"at:$(pwd) mark:$CTX_MARK\"\n");
    EXPECT_TRUE(term->read_until("/deep/er mark:from-ctx")) << term->output;
    auto missing = http().post(base + "/terminals", {{"cols", 80}, {"rows", 24}, {"shell", "no"}});
    EXPECT_EQ(missing.status, 404u) << missing.body;
}

TEST_P(TerminalWs, ResizeChangesTheWindowSize) {
    auto term = attach_ready(start({{"cols", 80}, {"rows", 24}}));
    term->type("stty size\n");
    ASSERT_TRUE(term->read_until("24 80")) << term->output;
    term->control(R"({"type":"resize","cols":123,"rows":45})");
    term->type("stty size\n");
    EXPECT_TRUE(term->read_until("45 123")) << term->output;
}

TEST_P(TerminalWs, CtrlCInterruptsTheForegroundJobAndCtrlZSuspendsIt) {
    auto term = attach_ready(start());
    // The job says it runs, so ^C cannot arrive while the shell still reads the line.
    term->type("sh -c 'echo sleeping-$((3*3)); exec sleep 100'\n");
    ASSERT_TRUE(term->read_until("sleeping-9")) << term->output;
    term->type("\x03");
    term->type("echo back-$((1+1))\n");
    EXPECT_TRUE(term->read_until("back-2")) << term->output;

    size_t from = term->output.size();
    term->type("sh -c 'echo napping-$((4*4)); exec sleep 100'\n");
    ASSERT_TRUE(term->read_until("napping-16", from)) << term->output;
    term->type("\x1a");
    EXPECT_TRUE(term->read_until("Stopped", from)) << term->output;
    term->type("kill -9 %1; echo killed-$((2+5))\n");
    EXPECT_TRUE(term->read_until("killed-7", from)) << term->output;
}

TEST_P(TerminalWs, ReattachReplaysTheScrollbackAndTwoClientsWatchOneTerminal) {
    const std::string proc = start();
    {
        auto first = attach_ready(proc);
        first->type("echo mark-$((7*11))\n");
        ASSERT_TRUE(first->read_until("mark-77")) << first->output;
    }  // disconnects
    auto again = attach(proc);
    EXPECT_TRUE(again->read_until("mark-77")) << "no scrollback: " << again->output;
    auto other = attach(proc);
    ASSERT_TRUE(other->read_until("mark-77"));
    const size_t a = again->output.size(), b = other->output.size();
    other->type("echo both-$((2*2))\n");
    EXPECT_TRUE(other->read_until("both-4", b)) << other->output;
    EXPECT_TRUE(again->read_until("both-4", a)) << again->output;
}

TEST_P(TerminalWs, ExitSendsTheExitCodeThenCloses) {
    auto term = attach_ready(start());
    term->type("exit 3\n");
    const json exit = term->read_control("exit");
    ASSERT_TRUE(exit.is_object()) << term->output;
    EXPECT_EQ(exit["exitCode"], 3) << exit.dump();
    EXPECT_EQ(exit["status"], "exited");
    EXPECT_FALSE(term->next()) << "the socket stays open after the exit message";
    EXPECT_TRUE(term->closed());
}

TEST_P(TerminalWs, BadFramesGetAnErrorAndTheTerminalGoesOn) {
    auto term = attach_ready(start());
    for (const char* bad : {"not json", R"({"type":"dance"})", R"({"type":"resize","cols":100000,"rows":5})",
                            R"({"type":"resize","cols":"80","rows":24})", R"([1,2])"}) {
        const size_t seen = term->texts.size();
        term->control(bad);
        const json error = term->read_control("error");
        ASSERT_TRUE(error.is_object()) << bad;
        EXPECT_EQ(error["code"], "bad_frame") << bad;
        EXPECT_FALSE(error.value("message", "").empty());
        EXPECT_GT(term->texts.size(), seen);
    }
    term->type("echo still-$((5*5))\n");
    EXPECT_TRUE(term->read_until("still-25")) << term->output;
}

TEST_P(TerminalWs, BadRequestsAreRefusedClearly) {
    auto res = http().post("/v1/sessions/" + sid_ + "/terminals", {{"cols", 80}});
    EXPECT_EQ(res.status, 400u) << res.body;
    EXPECT_NE(res.body.find("rows"), std::string::npos) << res.body;
    res = http().post("/v1/sessions/" + sid_ + "/terminals", {{"cols", 0}, {"rows", 24}});
    EXPECT_EQ(res.status, 400u) << res.body;
    res = http().post("/v1/sessions/" + sid_ + "/terminals", {{"cols", 80}, {"rows", 99999}});
    EXPECT_EQ(res.status, 400u) << res.body;
    auto plain = http().post("/v1/sessions/" + sid_ + "/processes", {{"command", "sleep 30"}});
    ASSERT_EQ(plain.status, 201u);
    const std::string pid = plain.json()["id"];
    res = http().get("/v1/sessions/" + sid_ + "/terminals/" + pid + "/ws");
    EXPECT_EQ(res.status, 400u) << res.body;
    EXPECT_NE(res.body.find("not_a_terminal"), std::string::npos) << res.body;
    const std::string term = start();
    res = http().get("/v1/sessions/" + sid_ + "/terminals/" + term + "/ws");
    EXPECT_EQ(res.status, 426u) << res.body;
    res = http().get("/v1/sessions/" + sid_ + "/terminals/p999/ws");
    EXPECT_EQ(res.status, 404u) << res.body;
}

TEST_P(TerminalWs, EndingTheSessionKillsTheTerminalAndLeavesNothing) {
    const std::string proc = start();
    auto term = attach_ready(proc);
    const std::string marker = "sleep 4242" + std::to_string(::getpid());
    term->type(marker + " & echo started-$((8*8))\n");
    ASSERT_TRUE(term->read_until("started-64")) << term->output;
    // The echo may come before the background job's exec: wait (a bound that catches hangs only).
    bool seen = false;
    for (int i = 0; i < 600 && !(seen = process_with_cmdline(marker)); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_TRUE(seen) << term->output;
    auto ended = http().del("/v1/sessions/" + sid_);
    EXPECT_EQ(ended.status, 200u) << ended.body;
    sid_.clear();
    const json exit = term->read_control("exit");
    ASSERT_TRUE(exit.is_object()) << term->texts.size();
    EXPECT_EQ(exit["status"], "killed") << exit.dump();
    EXPECT_FALSE(process_with_cmdline(marker)) << "a process of the terminal outlived its session";
}

INSTANTIATE_TEST_SUITE_P(Presets, TerminalWs, ::testing::Values("none", "default"));

}  // namespace
}  // namespace corral
