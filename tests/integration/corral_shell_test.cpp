// `corral shell SID` driven as a person would, inside a real terminal: a private tmux server
// (its own socket, killed at the end) runs corral shell in a pane; keys go in with send-keys and
// the screen comes back with capture-pane (issue 14).

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>

#include "support/http_client.hpp"
#include "support/terminal_daemon.hpp"

namespace corral {
namespace {

using testing::TerminalDaemon;

/// Runs a shell command; returns its stdout.
std::string run(const std::string& command) {
    std::string out;
    FILE* pipe = ::popen(command.c_str(), "r");
    if (pipe == nullptr) return out;
    char buf[4096];
    size_t n;
    while ((n = ::fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
    ::pclose(pipe);
    return out;
}

class CorralShell : public ::testing::Test {
  protected:
    void SetUp() override {
        if (::geteuid() != 0) GTEST_SKIP() << "needs root (cgroups, namespaces)";
        if (run("command -v tmux").empty()) GTEST_SKIP() << "tmux is not installed";
        daemon_ = std::make_unique<TerminalDaemon>();
        ASSERT_TRUE(daemon_->ready()) << daemon_->log();
        auto client = daemon_->client();
        auto res = client.post("/v1/sessions", {{"policy", "default"}});
        ASSERT_EQ(res.status, 201u) << res.body;
        sid_ = res.json()["id"];
        tmux_ = "tmux -L corral-shell-test-" + std::to_string(::getpid()) + " -f /dev/null ";
    }
    void TearDown() override {
        if (!tmux_.empty()) run(tmux_ + "kill-server 2>/dev/null");
        if (!script_.empty()) ::unlink(script_.c_str());
        if (daemon_ && !sid_.empty()) (void)daemon_->client().del("/v1/sessions/" + sid_);
    }
    std::string screen() { return run(tmux_ + "capture-pane -p -J -S -500 -t t"); }
    /// Waits until the pane shows `needle` (a bound that only catches hangs).
    bool wait_for(const std::string& needle) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        while (std::chrono::steady_clock::now() < deadline) {
            if (screen().find(needle) != std::string::npos) return true;
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        return false;
    }
    void keys(const std::string& args) { run(tmux_ + "send-keys -t t " + args); }

    std::unique_ptr<TerminalDaemon> daemon_;
    std::string sid_;
    std::string tmux_;
    std::string script_;
};

TEST_F(CorralShell, TypesResizesInterruptsAndExitsWithTheRemoteCode) {
    // After corral shell: its exit code, then whether the local terminal is canonical again.
    script_ = "/tmp/corral-shell-test-" + std::to_string(::getpid()) + ".sh";
    {
        std::ofstream out(script_);
        out << "CORRAL_SOCKET=" << daemon_->socket_path() << " " CORRAL_BINARY_DIR
               "/supervisor/corral shell " << sid_ << "\n"
            << "echo corral-exit=$?\n"
            << "stty -a | grep -o -- '-*icanon'\n"
            << "echo local-mode-shown\n"
            << "sleep 600\n";
    }
    ASSERT_EQ(::system((tmux_ + "new-session -d -s t -x 100 -y 30 'sh " + script_ + "'").c_str()),
              0);
    ASSERT_TRUE(wait_for("# ")) << "no prompt:\n" << screen() << daemon_->log();
    keys("'echo hi-$((2+3))' Enter");
    ASSERT_TRUE(wait_for("hi-5")) << screen() << daemon_->log();

    run(tmux_ + "resize-window -t t -x 120 -y 40");
    keys("'stty size' Enter");
    EXPECT_TRUE(wait_for("40 120")) << screen();

    keys("\"sh -c 'echo zz-\\$((3*3)); exec sleep 100'\" Enter");
    ASSERT_TRUE(wait_for("zz-9")) << screen();
    keys("C-c");
    keys("'echo back-$((1+1))' Enter");
    EXPECT_TRUE(wait_for("back-2")) << "^C did not interrupt the sleep:\n" << screen();

    keys("'exit 3' Enter");
    ASSERT_TRUE(wait_for("local-mode-shown")) << screen();
    const std::string shown = screen();
    EXPECT_NE(shown.find("corral-exit=3"), std::string::npos) << shown;
    EXPECT_EQ(shown.find("-icanon"), std::string::npos) << "the terminal stayed raw:\n" << shown;
    EXPECT_NE(shown.find("icanon"), std::string::npos) << shown;
}

}  // namespace
}  // namespace corral
