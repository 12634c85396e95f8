#pragma once
// A corrald child process for integration tests: its own socket, state dir, cgroup instance and
// port range. The destructor stops it (SIGTERM, then SIGKILL after a bound) and removes its temp
// dir. Header-only, for the suites that drive the daemon over HTTP.

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "http_client.hpp"
#include "instance_leftovers.hpp"
#include "tests/support/exec_logged.hpp"
#include "tests/support/temp_dir.hpp"

namespace corral::testing {

class DaemonProcess {
  public:
    /// `port_base`: first of this suite's port slots (40 ports per test process, spread by pid).
    /// `in_child`: runs in the forked child just before exec (e.g. to give the daemon a private
    /// mount namespace of the test's making); gets the daemon's temp dir; false aborts the start.
    explicit DaemonProcess(uint16_t port_base, std::vector<std::string> extra_args = {},
                           std::function<bool(const std::string&)> in_child = {}) {
        static int counter = 0;
        ++counter;
        dir_ = test_support::make_temp_dir("corral-daemon-test");
        socket_ = dir_ + "/corrald.sock";
        instance_ = "corral-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter);
        std::filesystem::create_directories(dir_ + "/policies");
        port_first_ = static_cast<uint16_t>(port_base + (::getpid() % 50) * 40);
        std::vector<std::string> args = {
            CORRAL_BINARY_DIR "/supervisor/corrald",
            "--socket",
            socket_,
            "--state-dir",
            dir_ + "/state",
            "--policy-dir",
            dir_ + "/policies",
            "--instance",
            instance_,
            "--port-range",
            std::to_string(port_first_) + "-" + std::to_string(port_first_ + 39)};
        args.insert(args.end(), extra_args.begin(), extra_args.end());
        pid_ = ::fork();
        if (pid_ == 0) {
            if (in_child && !in_child(dir_)) ::_exit(126);
            test_support::exec_logged(args, dir_ + "/corrald.log", test_support::LogOpen::truncate);
        }
        HttpClient probe = client();
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        while (std::chrono::steady_clock::now() < deadline) {
            if (probe.can_connect()) {
                ready_ = true;
                break;
            }
            int status = 0;
            if (::waitpid(pid_, &status, WNOHANG) == pid_) {
                pid_ = -1;
                break;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
    }
    ~DaemonProcess() {
        stop(std::chrono::seconds(60));
        remove_instance_leftovers(instance_);
        std::error_code ignored;
        std::filesystem::remove_all(dir_, ignored);
    }
    DaemonProcess(const DaemonProcess&) = delete;
    DaemonProcess& operator=(const DaemonProcess&) = delete;

    bool ready() const { return ready_; }
    HttpClient client() const { return HttpClient::unix_socket(socket_); }
    std::string log() const {
        std::ifstream in(dir_ + "/corrald.log");
        return std::string(std::istreambuf_iterator<char>(in), {});
    }
    const std::string& socket_path() const { return socket_; }
    const std::string& dir() const { return dir_; }
    /// The daemon's pid while it runs (-1 after stop()).
    pid_t pid() const { return pid_; }

    /// SIGTERM, then wait (SIGKILL after `bound`); returns the wait status.
    int stop(std::chrono::seconds bound) {
        if (pid_ <= 0) return exit_status_;
        ::kill(pid_, SIGTERM);
        const auto deadline = std::chrono::steady_clock::now() + bound;
        int status = 0;
        while (::waitpid(pid_, &status, WNOHANG) == 0) {
            if (std::chrono::steady_clock::now() > deadline) {
                ::kill(pid_, SIGKILL);
                ::waitpid(pid_, &status, 0);
                break;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        pid_ = -1;
        exit_status_ = status;
        return status;
    }

  private:
    std::string dir_;
    std::string socket_;
    std::string instance_;
    uint16_t port_first_ = 0;
    pid_t pid_ = -1;
    int exit_status_ = -1;
    bool ready_ = false;
};

}  // namespace corral::testing
