// `corral shell SID` driven as a person would, inside a real terminal: a private tmux server
// (its own socket, killed at the end) runs corral shell in a pane; keys go in with send-keys and
// the screen comes back with capture-pane (issue 14).

#include <gtest/gtest.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
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
    /// The pane's last line that is not blank, trailing blanks cut.
    std::string last_line() {
        std::string shown = screen();
        while (!shown.empty() && std::isspace(static_cast<unsigned char>(shown.back())))
            shown.pop_back();
        return shown.substr(shown.rfind('\n') + 1);
    }
    /// Waits until the shell's prompt is the pane's last line again (a full-screen program has
    /// quit, whether or not it used the alternate screen); `nudge` runs between looks.
    bool wait_for_prompt(const std::function<void()>& nudge = [] {}) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        while (std::chrono::steady_clock::now() < deadline) {
            const std::string line = last_line();
            if (line.size() >= 2 && line.compare(line.size() - 2, 2, "# ") == 0) return true;
            if (line.ends_with("#")) return true;  // capture-pane drops the trailing blank
            nudge();
            std::this_thread::sleep_for(std::chrono::milliseconds(300));
        }
        return false;
    }
    void keys(const std::string& args) { run(tmux_ + "send-keys -t t " + args); }
    /// Starts `corral shell SID` in a tmux pane; after it, its exit code and whether the local
    /// terminal is canonical again are printed, then the pane waits.
    void start_shell() {
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
        ASSERT_EQ(
            ::system((tmux_ + "new-session -d -s t -x 100 -y 30 'sh " + script_ + "'").c_str()), 0);
        ASSERT_TRUE(wait_for("# ")) << "no prompt:\n" << screen() << daemon_->log();
    }

    std::unique_ptr<TerminalDaemon> daemon_;
    std::string sid_;
    std::string tmux_;
    std::string script_;
};

TEST_F(CorralShell, TypesResizesInterruptsAndExitsWithTheRemoteCode) {
    start_shell();
    if (HasFatalFailure()) return;
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

// Full-screen programs (issue 14): top and vi take the terminal in raw mode on the alternate
// screen, read single keys, and must give a working shell back when they quit.
TEST_F(CorralShell, TopAndViWorkAndGiveTheShellBack) {
    start_shell();
    if (HasFatalFailure()) return;
    keys("'top -d 1' Enter");
    ASSERT_TRUE(wait_for("Tasks:")) << "top did not draw:\n" << screen();
    run(tmux_ + "resize-window -t t -x 110 -y 35");
    // top flushes its input as it enters raw mode, so a `q` typed while it starts is lost: it
    // is sent again until the prompt is back; C-u then drops any `q` that reached the shell.
    EXPECT_TRUE(wait_for_prompt([&] { keys("q"); })) << "top did not quit:\n" << screen();
    keys("C-u 'echo after-top-$((2*2))' Enter");
    ASSERT_TRUE(wait_for("after-top-4")) << screen();

    keys("'vi notes.txt' Enter");
    ASSERT_TRUE(wait_for("[New")) << "vi did not start:\n" << screen();
    keys("i 'typed-in-vi' Escape");
    ASSERT_TRUE(wait_for("typed-in-vi")) << screen();
    keys("':wq' Enter");
    // Only once the prompt is back is the next line the shell's, not typeahead vi drops as it
    // quits.
    ASSERT_TRUE(wait_for_prompt()) << "vi did not quit:\n" << screen();
    keys("'cat notes.txt; echo cat-$((5+5))' Enter");
    ASSERT_TRUE(wait_for("cat-10")) << screen();
    const std::string after = screen();
    EXPECT_NE(after.find("typed-in-vi\ncat-10"), std::string::npos) << "vi did not write:\n"
                                                                   << after;

    keys("'exit 0' Enter");
    ASSERT_TRUE(wait_for("local-mode-shown")) << screen();
    EXPECT_NE(screen().find("corral-exit=0"), std::string::npos) << screen();
    EXPECT_EQ(screen().find("-icanon"), std::string::npos) << "the terminal stayed raw";
}

}  // namespace
}  // namespace corral
