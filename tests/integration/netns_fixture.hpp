#pragma once
// Test helpers for the network tests (port_forwarder_test, egress_test): a real, fresh network
// namespace, an Asio loop on its own thread, blocking TCP clients with hang bounds, and an echo
// server whose listener lives in a given namespace.

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include "base/asio.hpp"
#include <cstring>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/unique_fd.hpp"
#include "isolation/namespaces.hpp"
#include "sessions/network/netns_runner.hpp"

namespace corral::nettest {

/// A new network namespace with `lo` up, held by an fd (no process). Created by a short-lived
/// thread: unshare(CLONE_NEWNET) changes only the calling thread, so the test process stays put.
inline Result<UniqueFd> new_network_namespace() {
    std::promise<Result<UniqueFd>> made;
    std::thread([&made] {
        if (::unshare(CLONE_NEWNET) != 0) return made.set_value(sys_error("unshare(CLONE_NEWNET)"));
        if (!bring_loopback_up()) return made.set_value(sys_error("bring up lo"));
        UniqueFd fd(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
        if (!fd) return made.set_value(sys_error("open /proc/thread-self/ns/net"));
        made.set_value(std::move(fd));
    }).join();
    return made.get_future().get();
}

inline UniqueFd dup_fd(const UniqueFd& fd) {
    return UniqueFd(::fcntl(fd.get(), F_DUPFD_CLOEXEC, 0));
}

/// Inode of a namespace fd (identifies the namespace).
inline ino_t inode_of(int fd) {
    struct stat st {};
    ::fstat(fd, &st);
    return st.st_ino;
}

/// An io_context running on its own thread until destruction.
class Loop {
  public:
    Loop() : guard_(io.get_executor()), thread_([this] { io.run(); }) {}
    ~Loop() {
        guard_.reset();
        io.stop();
        thread_.join();
    }
    /// Runs `f` on the loop thread and returns its result.
    template <class F>
    auto call(F f) -> decltype(f()) {
        std::packaged_task<decltype(f())()> task(std::move(f));
        auto result = task.get_future();
        boost::asio::post(io, [&task] { task(); });
        return result.get();
    }

    boost::asio::io_context io;

  private:
    boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard_;
    std::thread thread_;
};

/// Port of a bound socket.
inline uint16_t port_of(int fd) {
    sockaddr_in in{};
    socklen_t length = sizeof in;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&in), &length);
    return ntohs(in.sin_port);
}

/// Sets 10 s send/receive timeouts: a broken forwarder fails the test instead of hanging it.
inline void bound_io(int fd) {
    timeval tv{10, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

/// Connects `fd` (made in any namespace) to 127.0.0.1:`port`; returns errno (0 on success).
inline int connect_loopback(int fd, uint16_t port) {
    sockaddr_in in{};
    in.sin_family = AF_INET;
    in.sin_port = htons(port);
    in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bound_io(fd);
    return ::connect(fd, reinterpret_cast<sockaddr*>(&in), sizeof in) == 0 ? 0 : errno;
}

/// A host-namespace client connected to 127.0.0.1:`port`, or an empty fd.
inline UniqueFd connect_host(uint16_t port) {
    UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (connect_loopback(fd.get(), port) != 0) return UniqueFd();
    return fd;
}

inline bool write_all(int fd, const std::string& data) {
    size_t done = 0;
    while (done < data.size()) {
        ssize_t n = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        done += static_cast<size_t>(n);
    }
    return true;
}

/// Reads until EOF (or error/timeout; then `*error` gets errno).
inline std::string read_to_eof(int fd, int* error = nullptr) {
    std::string out;
    char buffer[16384];
    for (;;) {
        ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && error) *error = errno;
        if (n <= 0) return out;
        out.append(buffer, static_cast<size_t>(n));
    }
}

/// Reads exactly `length` bytes (less on EOF/error).
inline std::string read_exactly(int fd, size_t length) {
    std::string out;
    char buffer[16384];
    while (out.size() < length) {
        ssize_t n = ::recv(fd, buffer, std::min(sizeof buffer, length - out.size()), 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        out.append(buffer, static_cast<size_t>(n));
    }
    return out;
}

/// Echoes every connection on `listener` (which may live in any namespace): bytes come back as
/// they arrive; on the client's EOF the server half-closes too. One thread per connection.
class EchoServer {
  public:
    explicit EchoServer(UniqueFd listener)
        : listener_(std::move(listener)),
          stop_(::eventfd(0, EFD_CLOEXEC)),
          port_(port_of(listener_.get())),
          thread_([this] { accept_loop(); }) {}
    ~EchoServer() {
        uint64_t one = 1;
        (void)::write(stop_.get(), &one, sizeof one);
        thread_.join();
        std::lock_guard lock(mutex_);
        for (auto& t : connections_) t.join();
    }
    uint16_t port() const { return port_; }
    int accepted() const { return accepted_.load(); }

  private:
    void accept_loop() {
        for (;;) {
            pollfd fds[2] = {{listener_.get(), POLLIN, 0}, {stop_.get(), POLLIN, 0}};
            if (::poll(fds, 2, -1) < 0) continue;
            if (fds[1].revents) return;
            int client = ::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC);
            if (client < 0) continue;
            ++accepted_;
            std::lock_guard lock(mutex_);
            connections_.emplace_back([this, client] { echo(UniqueFd(client)); });
        }
    }
    void echo(UniqueFd client) {
        char buffer[8192];
        for (;;) {
            pollfd fds[2] = {{client.get(), POLLIN, 0}, {stop_.get(), POLLIN, 0}};
            if (::poll(fds, 2, 10000) <= 0 || fds[1].revents) return;
            ssize_t n = ::recv(client.get(), buffer, sizeof buffer, 0);
            if (n <= 0) break;
            if (!write_all(client.get(), std::string(buffer, static_cast<size_t>(n)))) return;
        }
        ::shutdown(client.get(), SHUT_WR);
    }

    UniqueFd listener_;
    UniqueFd stop_;
    uint16_t port_;
    std::atomic<int> accepted_{0};
    std::mutex mutex_;
    std::vector<std::thread> connections_;
    std::thread thread_;
};

/// Threads of this process now.
inline int thread_count() {
    int count = 0;
    if (DIR* dir = ::opendir("/proc/self/task")) {
        while (dirent* entry = ::readdir(dir))
            if (entry->d_name[0] != '.') ++count;
        ::closedir(dir);
    }
    return count;
}

/// Open descriptors of this process now.
inline int fd_count() {
    int count = 0;
    if (DIR* dir = ::opendir("/proc/self/fd")) {
        while (dirent* entry = ::readdir(dir))
            if (entry->d_name[0] != '.') ++count;
        ::closedir(dir);
    }
    return count - 1;  // the directory's own fd
}

/// True if any thread of this process is in the network namespace with inode `ino`.
inline bool some_thread_in_namespace(ino_t ino) {
    bool found = false;
    if (DIR* dir = ::opendir("/proc/self/task")) {
        while (dirent* entry = ::readdir(dir)) {
            if (entry->d_name[0] == '.') continue;
            struct stat st {};
            std::string path = std::string("/proc/self/task/") + entry->d_name + "/ns/net";
            if (::stat(path.c_str(), &st) == 0 && st.st_ino == ino) found = true;
        }
        ::closedir(dir);
    }
    return found;
}

}  // namespace corral::nettest
