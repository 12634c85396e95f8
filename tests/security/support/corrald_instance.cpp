#include "corrald_instance.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "../../integration/support/instance_leftovers.hpp"
#include "sandbox_harness.hpp"
#include "tests/support/exec_logged.hpp"

namespace corral::security {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string slurp(const std::string& path) {
    std::ifstream in(path);
    return std::string((std::istreambuf_iterator<char>(in)), {});
}

/// The port corrald logs as "listening on tcp port N" (0 until then).
uint16_t logged_tcp_port(const std::string& log) {
    const std::string marker = "listening on tcp port ";
    const size_t at = log.find(marker);
    if (at == std::string::npos) return 0;
    return static_cast<uint16_t>(std::atoi(log.c_str() + at + marker.size()));
}

}  // namespace

CorraldInstance::CorraldInstance(std::vector<std::string> extra_args) {
    const std::string token = unique_token();
    instance_ = token;
    run_dir_ = "/run/" + token;
    state_dir_ = "/var/lib/" + token;
    policy_dir_ = state_dir_ + "-policies";
    scratch_dir_ = state_dir_ + "-scratch";
    for (const auto& dir : {run_dir_, state_dir_, policy_dir_, scratch_dir_})
        fs::create_directories(dir);
    socket_ = run_dir_ + "/corrald.sock";
    const auto first_port = static_cast<uint16_t>(33000 + (::getpid() % 100) * 20);
    std::vector<std::string> args = {
        CORRAL_BINARY_DIR "/supervisor/corrald",
        "--socket=" + socket_,
        "--state-dir=" + state_dir_,
        "--policy-dir=" + policy_dir_,
        "--instance=" + token,
        "--listen=127.0.0.1:0",
        "--port-range=" + std::to_string(first_port) + "-" + std::to_string(first_port + 19)};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    const std::string log_path = run_dir_ + "/corrald.log";
    pid_ = ::fork();
    if (pid_ == 0) {
        test_support::exec_logged(args, log_path, test_support::LogOpen::append);
    }
    const auto until = Clock::now() + std::chrono::seconds(30);
    while (tcp_port_ == 0 && Clock::now() < until) {
        if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
            pid_ = -1;
            return;
        }
        if (health_within(socket_, std::chrono::seconds(2))) tcp_port_ = logged_tcp_port(log());
        if (tcp_port_ == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
}

CorraldInstance::~CorraldInstance() {
    if (pid_ > 0) {
        ::kill(pid_, SIGTERM);
        const auto until = Clock::now() + std::chrono::seconds(60);
        while (::waitpid(pid_, nullptr, WNOHANG) == 0 && Clock::now() < until)
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        if (::kill(pid_, 0) == 0) {
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, nullptr, 0);
        }
    }
    testing::remove_instance_leftovers(instance_);
    std::error_code ignored;
    for (const auto& dir : {run_dir_, state_dir_, policy_dir_, scratch_dir_})
        fs::remove_all(dir, ignored);
}

std::string CorraldInstance::log() const {
    return slurp(run_dir_ + "/corrald.log");
}

long CorraldInstance::rss_kib() const {
    std::istringstream status(slurp("/proc/" + std::to_string(pid_) + "/status"));
    for (std::string line; std::getline(status, line);) {
        if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
    }
    return 0;
}

std::chrono::milliseconds CorraldInstance::cpu_time() const {
    // Fields 14 and 15 of /proc/PID/stat, after the parenthesised command name.
    const std::string stat = slurp("/proc/" + std::to_string(pid_) + "/stat");
    std::istringstream rest(stat.substr(stat.rfind(')') + 2));
    std::string field;
    long ticks = 0;
    for (int index = 3; index <= 15 && rest >> field; ++index) {
        if (index >= 14) ticks += std::atol(field.c_str());
    }
    return std::chrono::milliseconds(ticks * 1000 / ::sysconf(_SC_CLK_TCK));
}

RawConnection RawConnection::unix_socket(const std::string& path) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, path.c_str(), sizeof address.sun_path - 1);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
        ::close(fd);
        return RawConnection(-1);
    }
    return RawConnection(fd);
}

RawConnection RawConnection::tcp(uint16_t port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
        ::close(fd);
        return RawConnection(-1);
    }
    return RawConnection(fd);
}

RawConnection::RawConnection(RawConnection&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), pending_(std::move(other.pending_)) {}

RawConnection::~RawConnection() {
    close();
}

void RawConnection::close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
}

bool RawConnection::send(const std::string& bytes) {
    size_t sent = 0;
    while (fd_ >= 0 && sent < bytes.size()) {
        const ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        sent += static_cast<size_t>(n);
    }
    return fd_ >= 0;
}

namespace {

/// Reads what is there within the time left: >0 bytes appended, 0 on EOF, -1 on timeout/error.
ssize_t read_some(int fd, std::string& into, Clock::time_point until) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
    if (left.count() <= 0) return -1;
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(left.count()));
    if (ready <= 0) return -1;
    char buf[65536];
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0) return errno == ECONNRESET ? 0 : -1;
    into.append(buf, static_cast<size_t>(n));
    return n;
}

/// Length of a whole response at the start of `text` (header + Content-Length), or 0.
size_t whole_response_length(const std::string& text) {
    const size_t end = text.find("\r\n\r\n");
    if (end == std::string::npos) return 0;
    std::string header = text.substr(0, end);
    for (char& c : header) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const size_t at = header.find("content-length:");
    const size_t length = at == std::string::npos ? 0 : std::atol(header.c_str() + at + 15);
    return text.size() >= end + 4 + length ? end + 4 + length : 0;
}

}  // namespace

std::optional<std::string> RawConnection::read_until_close(std::chrono::milliseconds timeout) {
    const auto until = Clock::now() + timeout;
    std::string got = std::move(pending_);
    for (;;) {
        const ssize_t n = read_some(fd_, got, until);
        if (n == 0) return got;
        if (n < 0) return got.empty() ? std::nullopt : std::optional<std::string>(got);
    }
}

std::optional<std::string> RawConnection::read_response(std::chrono::milliseconds timeout) {
    const auto until = Clock::now() + timeout;
    for (;;) {
        if (const size_t length = whole_response_length(pending_); length > 0) {
            std::string response = pending_.substr(0, length);
            pending_.erase(0, length);
            return response;
        }
        if (read_some(fd_, pending_, until) <= 0) return std::nullopt;
    }
}

bool RawConnection::closed_within(std::chrono::milliseconds timeout) {
    const auto until = Clock::now() + timeout;
    for (;;) {
        const ssize_t n = read_some(fd_, pending_, until);
        if (n == 0) return true;
        if (n < 0) return false;
    }
}

std::optional<std::string> request_within(const std::string& socket_path, const std::string& raw,
                                          std::chrono::milliseconds timeout) {
    RawConnection connection = RawConnection::unix_socket(socket_path);
    if (!connection.connected()) return std::nullopt;
    // A server may answer (413) and close before the whole body is sent: read what it said.
    (void)connection.send(raw);
    return connection.read_response(timeout);
}

bool health_within(const std::string& socket_path, std::chrono::milliseconds timeout) {
    auto response =
        request_within(socket_path, "GET /v1/health HTTP/1.1\r\nHost: corrald\r\n\r\n", timeout);
    return response && status_of(*response) == 200;
}

std::string post_request(const std::string& target, const std::string& body,
                         const std::string& content_type, const std::string& extra_headers) {
    return "POST " + target + " HTTP/1.1\r\nHost: corrald\r\nContent-Type: " + content_type +
           "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" + extra_headers + "\r\n" +
           body;
}

unsigned status_of(const std::string& response) {
    if (response.rfind("HTTP/1.1 ", 0) != 0 || response.size() < 12) return 0;
    return static_cast<unsigned>(std::atoi(response.c_str() + 9));
}

std::string body_of(const std::string& response) {
    const size_t end = response.find("\r\n\r\n");
    return end == std::string::npos ? "" : response.substr(end + 4);
}

}  // namespace corral::security
