#include "tests/bench/fork_exec_server.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <vector>

namespace corral::bench {
namespace {

bool write_all(int fd, const std::string& data) {
    size_t done = 0;
    while (done < data.size()) {
        ssize_t n = ::write(fd, data.data() + done, data.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        done += static_cast<size_t>(n);
    }
    return true;
}

/// One request from `fd` into `buffer` (kept across requests: a pipelined next one stays);
/// false at EOF or on a malformed request.
bool read_request(int fd, std::string& buffer, std::string& body) {
    size_t header_end;
    while ((header_end = buffer.find("\r\n\r\n")) == std::string::npos) {
        char chunk[4096];
        ssize_t n = ::read(fd, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        buffer.append(chunk, static_cast<size_t>(n));
    }
    size_t length = 0;
    const std::string head = buffer.substr(0, header_end);
    for (const char* name : {"Content-Length:", "content-length:"}) {
        size_t at = head.find(name);
        if (at != std::string::npos) length = std::strtoul(head.c_str() + at + 15, nullptr, 10);
    }
    const size_t start = header_end + 4;
    while (buffer.size() < start + length) {
        char chunk[4096];
        ssize_t n = ::read(fd, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        buffer.append(chunk, static_cast<size_t>(n));
    }
    body = buffer.substr(start, length);
    buffer.erase(0, start + length);
    return true;
}

/// fork + execvp of `argv`, its stdout and stderr read to EOF, then waitpid.
nlohmann::json run(const std::vector<std::string>& argv) {
    int out[2], err[2];
    if (argv.empty() || ::pipe2(out, O_CLOEXEC) != 0) return {{"error", "pipe"}};
    if (::pipe2(err, O_CLOEXEC) != 0) return {{"error", "pipe"}};
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::dup2(out[1], STDOUT_FILENO);
        ::dup2(err[1], STDERR_FILENO);
        ::execvp(args[0], args.data());
        ::_exit(127);
    }
    ::close(out[1]);
    ::close(err[1]);
    std::string streams[2];
    pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
    int open = 2;
    while (open > 0) {
        if (::poll(fds, 2, -1) < 0 && errno != EINTR) break;
        for (int i = 0; i < 2; ++i) {
            if (fds[i].fd < 0 || fds[i].revents == 0) continue;
            char chunk[65536];
            ssize_t n = ::read(fds[i].fd, chunk, sizeof chunk);
            if (n > 0) {
                streams[i].append(chunk, static_cast<size_t>(n));
            } else if (n == 0 || errno != EINTR) {
                ::close(fds[i].fd);
                fds[i].fd = -1;
                --open;
            }
        }
    }
    int status = 0;
    if (pid > 0) ::waitpid(pid, &status, 0);
    const int code = pid < 0 ? -1 : WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return {{"exitCode", code}, {"stdout", streams[0]}, {"stderr", streams[1]}};
}

[[noreturn]] void serve(int listener) {
    for (;;) {
        const int connection = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
        if (connection < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            ::_exit(1);
        }
        std::string buffer, body;
        while (read_request(connection, buffer, body)) {
            nlohmann::json answer;
            auto request = nlohmann::json::parse(body, nullptr, false);
            if (request.is_object() && request.contains("argv") && request["argv"].is_array())
                answer = run(request["argv"].get<std::vector<std::string>>());
            else
                answer = {{"error", "body needs argv"}};
            const std::string text = answer.dump();
            const std::string response = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                         "Content-Length: " +
                                         std::to_string(text.size()) + "\r\n\r\n" + text;
            if (!write_all(connection, response)) break;
        }
        ::close(connection);
    }
}

}  // namespace

ForkExecServer::ForkExecServer() {
    char tmpl[] = "/tmp/corral-bench-forkexec-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) return;
    directory_ = tmpl;
    socket_path_ = directory_ + "/server.sock";
    const int listener = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, socket_path_.c_str(), sizeof address.sun_path - 1);
    if (listener < 0 || ::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
        ::listen(listener, 16) != 0) {
        if (listener >= 0) ::close(listener);
        return;
    }
    pid_ = ::fork();
    if (pid_ == 0) {
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlives the benchmark
        serve(listener);
    }
    ::close(listener);
}

ForkExecServer::~ForkExecServer() {
    if (pid_ > 0) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
    }
    if (!socket_path_.empty()) ::unlink(socket_path_.c_str());
    if (!directory_.empty()) ::rmdir(directory_.c_str());
}

}  // namespace corral::bench
