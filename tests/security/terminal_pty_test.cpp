// A terminal started through the API (issue 14) must not reach any terminal outside its sandbox.
// Precedents: CVE-2017-5226 (bubblewrap: TIOCSTI from the sandbox into the caller's terminal) and
// CVE-2016-9016 (firejail: the sandbox's terminal reachable from/into the host). Here corrald
// itself runs with a host pty as its controlling terminal and stdin, as a daemon started from a
// person's shell would, and a `default` session's terminal tries to inject into it and to open
// host /dev/pts entries.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "../integration/support/http_client.hpp"
#include "../integration/support/instance_leftovers.hpp"
#include "../integration/support/ws_client.hpp"
#include "base/unique_fd.hpp"
#include "tests/support/exec_logged.hpp"
#include "tests/support/temp_dir.hpp"

namespace corral::security {
namespace {

namespace fs = std::filesystem;
using corral::testing::HttpClient;
using corral::testing::TerminalSocket;

/// Reads whatever is queued on a non-blocking descriptor.
std::string drain(int fd) {
    std::string text;
    char buf[512];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0) text.append(buf, size_t(n));
    return text;
}

class TerminalPty : public ::testing::Test {
  protected:
    void SetUp() override {
        if (::geteuid() != 0) GTEST_SKIP() << "needs root";
        master_.reset(::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK));
        ASSERT_TRUE(master_.valid());
        ASSERT_EQ(::grantpt(master_.get()), 0);
        ASSERT_EQ(::unlockpt(master_.get()), 0);
        slave_path_ = ::ptsname(master_.get());
        dir_ = test_support::make_temp_dir("corral-termsec");
        socket_ = dir_ + "/corrald.sock";
        instance_ = "corral-termsec-" + std::to_string(::getpid());
        std::vector<std::string> args = {CORRAL_BINARY_DIR "/supervisor/corrald", "--socket",
                                         socket_, "--state-dir", dir_ + "/state", "--instance",
                                         instance_};
        pid_ = ::fork();
        if (pid_ == 0) {
            // corrald with the host pty as its controlling terminal and stdin.
            ::setsid();
            const int tty = ::open(slave_path_.c_str(), O_RDWR);
            ::ioctl(tty, TIOCSCTTY, 0);
            termios mode{};
            ::tcgetattr(tty, &mode);
            ::cfmakeraw(&mode);
            ::tcsetattr(tty, TCSANOW, &mode);
            ::dup2(tty, 0);
            test_support::exec_logged(args, dir_ + "/corrald.log", test_support::LogOpen::truncate);
        }
        HttpClient probe = HttpClient::unix_socket(socket_);
        for (int i = 0; i < 1500 && !probe.can_connect(); ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        ASSERT_TRUE(probe.can_connect()) << log();
        client_ = std::make_unique<HttpClient>(HttpClient::unix_socket(socket_));
    }
    void TearDown() override {
        if (pid_ > 0) {
            ::kill(pid_, SIGTERM);
            int status = 0;
            for (int i = 0; i < 3000 && ::waitpid(pid_, &status, WNOHANG) == 0; ++i)
                std::this_thread::sleep_for(std::chrono::milliseconds(20));
            if (::waitpid(pid_, &status, WNOHANG) == 0) {
                ::kill(pid_, SIGKILL);
                ::waitpid(pid_, &status, 0);
            }
        }
        testing::remove_instance_leftovers(instance_);
        std::error_code ignored;
        if (!dir_.empty()) fs::remove_all(dir_, ignored);
    }
    std::string log() const {
        std::ifstream in(dir_ + "/corrald.log");
        return std::string(std::istreambuf_iterator<char>(in), {});
    }
    /// What is waiting in the input queue of the daemon's terminal (what its shell would run).
    std::string daemon_terminal_input() const {
        UniqueFd slave(::open(slave_path_.c_str(), O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC));
        return drain(slave.get());
    }

    UniqueFd master_;
    std::string slave_path_, dir_, socket_, instance_;
    pid_t pid_ = -1;
    std::unique_ptr<HttpClient> client_;
};

TEST_F(TerminalPty, CannotInjectIntoTheDaemonsTerminalNorOpenHostPtys_CVE_2017_5226_CVE_2016_9016) {
    auto session = client_->post("/v1/sessions", {{"policy", "default"}});
    ASSERT_EQ(session.status, 201u) << session.body << log();
    const std::string sid = session.json()["id"];
    auto started = client_->post("/v1/sessions/" + sid + "/terminals", {{"cols", 80}, {"rows", 24}});
    ASSERT_EQ(started.status, 201u) << started.body;
    const std::string proc = started.json()["id"];
    TerminalSocket term(socket_, "/v1/sessions/" + sid + "/terminals/" + proc + "/ws");

    ASSERT_TRUE(term.read_until("# ")) << "no prompt: " << term.output;
    // TIOCSTI on its own terminal stays in its own terminal; /dev/tty is the sandbox's pty.
    term.type(std::string(CORRAL_ESCAPE_PROBE) + " tiocsti CORRALX; echo probe-$((2*3))\n");
    ASSERT_TRUE(term.read_until("probe-6")) << term.output << log();
    // The host's pty by its host name, and a scan of what /dev/pts holds in the sandbox.
    term.type("echo CORRALY > " + slave_path_ + "; ls /dev/pts; echo listed-$((3*3))\n");
    ASSERT_TRUE(term.read_until("listed-9")) << term.output;
    EXPECT_NE(term.output.find("ptmx"), std::string::npos) << term.output;

    EXPECT_EQ(daemon_terminal_input().find("CORRALX"), std::string::npos)
        << "keystrokes reached the daemon's terminal";
    EXPECT_EQ(drain(master_.get()).find("CORRALY"), std::string::npos)
        << "the sandbox wrote to a host pty";

    // The terminal's pty is not one of the host's devpts: its number space is the sandbox's.
    term.type("echo dev=$(stat -c %d /dev/pts/ptmx)-ok$((1))\n");
    ASSERT_TRUE(term.read_until("-ok1")) << term.output;
    struct stat host {};
    ASSERT_EQ(::stat("/dev/pts/ptmx", &host), 0);
    EXPECT_EQ(term.output.find("dev=" + std::to_string(host.st_dev) + "-ok1"), std::string::npos)
        << "the sandbox's /dev/pts is the host's devpts: " << term.output;
    (void)client_->del("/v1/sessions/" + sid);
}

}  // namespace
}  // namespace corral::security
