#pragma once
// A tiny HTTP origin server for the egress tests, standing in for a host on the internet: it
// listens on a host loopback address the test chooses (127.0.0.x, never anything else), answers
// every request with "hello from NAME" and counts the connections it accepted. One thread;
// the destructor stops it. Header-only.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>

namespace corral::testing {

class OriginServer {
  public:
    OriginServer(std::string address, std::string name) : name_(std::move(name)) {
        fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int one = 1;
        ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        sockaddr_in in{};
        in.sin_family = AF_INET;
        ::inet_pton(AF_INET, address.c_str(), &in.sin_addr);
        if (::bind(fd_, reinterpret_cast<sockaddr*>(&in), sizeof in) != 0 ||
            ::listen(fd_, 64) != 0)
            return;
        socklen_t length = sizeof in;
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&in), &length);
        port_ = ntohs(in.sin_port);
        thread_ = std::thread([this] { serve(); });
    }
    ~OriginServer() {
        stopping_ = true;
        if (thread_.joinable()) thread_.join();
        ::close(fd_);
    }
    uint16_t port() const { return port_; }
    int accepted() const { return accepted_.load(); }
    std::string body() const { return "hello from " + name_; }
    /// The request line of the last request ("GET /x HTTP/1.1").
    std::string last_request_line() const {
        std::lock_guard lock(mutex_);
        return last_line_;
    }

  private:
    void serve() {
        while (!stopping_) {
            pollfd p{fd_, POLLIN, 0};
            if (::poll(&p, 1, 50) <= 0) continue;
            const int client = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
            if (client < 0) continue;
            ++accepted_;
            timeval bound{5, 0};
            ::setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof bound);
            std::string head;
            char buffer[4096];
            while (head.find("\r\n\r\n") == std::string::npos && head.size() < 65536) {
                const ssize_t n = ::read(client, buffer, sizeof buffer);
                if (n <= 0) break;
                head.append(buffer, static_cast<size_t>(n));
            }
            {
                std::lock_guard lock(mutex_);
                last_line_ = head.substr(0, head.find("\r\n"));
            }
            const std::string text = body();
            const std::string response = "HTTP/1.1 200 OK\r\nContent-Length: " +
                                         std::to_string(text.size()) +
                                         "\r\nConnection: close\r\n\r\n" + text;
            (void)!::write(client, response.data(), response.size());
            ::close(client);
        }
    }

    std::string name_;
    int fd_ = -1;
    uint16_t port_ = 0;
    std::thread thread_;
    std::atomic<bool> stopping_{false};
    std::atomic<int> accepted_{0};
    mutable std::mutex mutex_;
    std::string last_line_;
};

}  // namespace corral::testing
