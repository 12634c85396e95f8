// See daemon_client.hpp.
#include "tests/bench/daemon_client.hpp"

#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

namespace corral::bench {

DaemonConnection::DaemonConnection(const std::string& path) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.size() >= sizeof addr.sun_path) return;
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ >= 0 && ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        ::close(fd_);
        fd_ = -1;
    }
}

DaemonConnection::~DaemonConnection() {
    if (fd_ >= 0) ::close(fd_);
}

bool DaemonConnection::send_request(const std::string& method, const std::string& target,
                                    const std::string& body, const std::string& headers) {
    std::string req = method + " " + target + " HTTP/1.1\r\nHost: corrald\r\n" + headers;
    if (!body.empty() || method == "POST" || method == "PUT")
        req += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
               "\r\n";
    req += "\r\n" + body;
    size_t off = 0;
    while (off < req.size()) {
        ssize_t n = ::send(fd_, req.data() + off, req.size() - off, MSG_NOSIGNAL);
        if (n <= 0) return false;
        off += static_cast<size_t>(n);
    }
    return true;
}

bool DaemonConnection::fill() {
    if (pos_ > 0 && pos_ == buf_.size()) buf_.clear(), pos_ = 0;
    static thread_local char tmp[256 * 1024];
    ssize_t n = ::recv(fd_, tmp, sizeof tmp, 0);
    if (n <= 0) return false;
    buf_.append(tmp, static_cast<size_t>(n));
    return true;
}

bool DaemonConnection::read_line(std::string& line) {
    for (;;) {
        size_t eol = buf_.find("\r\n", pos_);
        if (eol != std::string::npos) {
            line.assign(buf_, pos_, eol - pos_);
            pos_ = eol + 2;
            return true;
        }
        if (!fill()) return false;
    }
}

bool DaemonConnection::read_exact(size_t n, const std::function<void(const char*, size_t)>& sink) {
    while (n > 0) {
        if (pos_ == buf_.size()) {
            // Nothing buffered: the body goes from the socket to the sink without a copy into
            // buf_, as a client that keeps up would take it (the pipe baseline copies once too).
            static thread_local char direct[256 * 1024];
            const ssize_t got = ::recv(fd_, direct, std::min(n, sizeof direct), 0);
            if (got <= 0) return false;
            sink(direct, static_cast<size_t>(got));
            n -= static_cast<size_t>(got);
            continue;
        }
        size_t take = std::min(n, buf_.size() - pos_);
        sink(buf_.data() + pos_, take);
        pos_ += take;
        n -= take;
        if (pos_ == buf_.size()) buf_.clear(), pos_ = 0;
    }
    return true;
}

int DaemonConnection::stream(const std::string& method, const std::string& target,
                             const std::string& body,
                             const std::function<void(const char*, size_t)>& on_data,
                             const std::string& headers) {
    if (fd_ < 0 || !send_request(method, target, body, headers)) return 0;
    std::string line;
    if (!read_line(line) || line.size() < 12) return 0;
    int status = std::atoi(line.c_str() + 9);
    long long length = -1;
    bool chunked = false;
    while (read_line(line) && !line.empty()) {
        if (strncasecmp(line.c_str(), "content-length:", 15) == 0)
            length = std::atoll(line.c_str() + 15);
        if (strncasecmp(line.c_str(), "transfer-encoding:", 18) == 0 &&
            line.find("chunked") != std::string::npos)
            chunked = true;
    }
    if (chunked) {
        for (;;) {
            if (!read_line(line)) return 0;
            size_t size = std::strtoull(line.c_str(), nullptr, 16);
            if (size == 0) {
                while (read_line(line) && !line.empty()) {
                }
                break;
            }
            if (!read_exact(size, on_data) || !read_line(line)) return 0;
        }
    } else if (length >= 0) {
        if (!read_exact(static_cast<size_t>(length), on_data)) return 0;
    }
    return status;
}

Response DaemonConnection::request(const std::string& method, const std::string& target,
                                   const std::string& body) {
    Response r;
    r.status = stream(method, target, body, [&](const char* p, size_t n) { r.body.append(p, n); });
    return r;
}

PreparedPool prepared_pool(DaemonConnection& c, const std::string& policy) {
    const Response r = c.request("GET", "/v1/health");
    const nlohmann::json body = nlohmann::json::parse(r.body, nullptr, false);
    if (r.status != 200 || !body.is_object() || !body.contains("prepared") ||
        !body["prepared"].is_object() || !body["prepared"].contains(policy))
        return {};
    const nlohmann::json& pool = body["prepared"][policy];
    return {pool.value("target", size_t{0}), pool.value("ready", size_t{0})};
}

}  // namespace corral::bench
