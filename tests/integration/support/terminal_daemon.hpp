#pragma once
// A corrald for the terminal tests (terminal_ws_test.cpp, corral_shell_test.cpp): its own socket,
// state directory and cgroup instance; stopped (SIGTERM, SIGKILL after a bound) and removed when
// destroyed.

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "http_client.hpp"
#include "instance_leftovers.hpp"
#include "tests/support/temp_dir.hpp"

namespace corral::testing {

/// A corrald on a temporary socket, state dir and cgroup instance; stopped and removed at the end.
class TerminalDaemon {
  public:
    TerminalDaemon() {
        dir_ = test_support::make_temp_dir("corral-terminal-test");
        socket_ = dir_ + "/corrald.sock";
        instance_ = "corral-term-" + std::to_string(::getpid());
        const uint16_t first = static_cast<uint16_t>(33000 - 40 + (::getpid() % 10) * 4);
        std::vector<std::string> args = {CORRAL_BINARY_DIR "/supervisor/corrald",
                                         "--socket", socket_, "--state-dir", dir_ + "/state",
                                         "--instance",
                                         instance_,
                                         "--port-range",
                                         std::to_string(first) + "-" + std::to_string(first + 3)};
        // The `none` preset passes corrald's environment to its sessions, so a terminal's login
        // shell would read the machine's own ~/.profile and ~/.bashrc (here root's `pyenv init`,
        // which takes over a minute on the emulated pure-v2 kernel, silently: longer than a
        // read's hang bound). The tests are about terminals, not those files: an empty home.
        const std::string home = dir_ + "/home";
        std::filesystem::create_directory(home);
        std::vector<std::string> env = {"HOME=" + home};
        for (char** e = environ; *e; ++e)
            if (std::string_view(*e).rfind("HOME=", 0) != 0) env.emplace_back(*e);
        std::vector<char*> envp;
        for (auto& e : env) envp.push_back(e.data());
        envp.push_back(nullptr);
        pid_ = ::fork();
        if (pid_ == 0) {
            const int log = ::open((dir_ + "/corrald.log").c_str(), O_WRONLY | O_CREAT, 0644);
            ::dup2(log, 1);
            ::dup2(log, 2);
            std::vector<char*> argv;
            for (auto& a : args) argv.push_back(a.data());
            argv.push_back(nullptr);
            ::execve(argv[0], argv.data(), envp.data());
            ::_exit(127);
        }
        HttpClient probe = client();
        for (int i = 0; i < 1500 && !probe.can_connect(); ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        ready_ = probe.can_connect();
    }
    ~TerminalDaemon() {
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
        remove_instance_leftovers(instance_);
        std::error_code ignored;
        std::filesystem::remove_all(dir_, ignored);
    }
    bool ready() const { return ready_; }
    HttpClient client() const { return HttpClient::unix_socket(socket_); }
    const std::string& socket_path() const { return socket_; }
    std::string log() const {
        std::ifstream in(dir_ + "/corrald.log");
        return std::string(std::istreambuf_iterator<char>(in), {});
    }

  private:
    std::string dir_, socket_, instance_;
    pid_t pid_ = -1;
    bool ready_ = false;
};

}  // namespace corral::testing
