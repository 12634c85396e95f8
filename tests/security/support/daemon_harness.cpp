#include "daemon_harness.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "../../integration/support/instance_leftovers.hpp"
#include "sandbox_harness.hpp"

namespace corral::security {
namespace {

namespace fs = std::filesystem;

bool can_connect(const std::string& path) {
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
    bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    ::close(fd);
    return ok;
}

}  // namespace

Daemon::Daemon(const std::vector<std::string>& extra_env) {
    const std::string token = unique_token();
    instance_ = token;
    run_dir_ = "/run/" + token;
    state_dir_ = "/var/lib/" + token;
    fs::create_directories(run_dir_);
    fs::create_directories(state_dir_ + "-policies");
    socket_ = run_dir_ + "/corrald.sock";
    static int instances = 0;
    const auto first_port = static_cast<uint16_t>(30000 + (::getpid() % 138) * 20 +
                                                  (instances++ % 2) * 10);  // 30000-32759
    std::vector<std::string> args = {
        CORRAL_BINARY_DIR "/supervisor/corrald",
        "--socket",
        socket_,
        "--state-dir",
        state_dir_,
        "--policy-dir",
        state_dir_ + "-policies",
        "--instance",
        token,
        "--port-range",
        std::to_string(first_port) + "-" + std::to_string(first_port + 9)};
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
    env.insert(env.end(), extra_env.begin(), extra_env.end());
    pid_ = ::fork();
    if (pid_ == 0) {
        int log = ::open((run_dir_ + "/corrald.log").c_str(), O_WRONLY | O_CREAT, 0644);
        ::dup2(log, 1);
        ::dup2(log, 2);
        std::vector<char*> argv, envp;
        for (auto& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        for (auto& e : env) envp.push_back(e.data());
        envp.push_back(nullptr);
        ::execve(argv[0], argv.data(), envp.data());
        ::_exit(127);
    }
    for (int i = 0; i < 1500 && !ready_; ++i) {
        ready_ = can_connect(socket_);
        if (!ready_) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
}

Daemon::~Daemon() {
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
    fs::remove_all(run_dir_, ignored);
    fs::remove_all(state_dir_, ignored);
    fs::remove_all(state_dir_ + "-policies", ignored);
}

std::string Daemon::log() const {
    std::ifstream in(run_dir_ + "/corrald.log");
    return std::string((std::istreambuf_iterator<char>(in)), {});
}

}  // namespace corral::security
