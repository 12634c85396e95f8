#include "sessions/network/netns_thread.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
#include <utility>

#include "base/stack_outside_forks.hpp"

namespace corral {

struct NetnsThread::Job {
    std::function<Result<UniqueFd>()> work;
    std::promise<Result<UniqueFd>> done;
};

Result<UniqueFd> open_network_namespace(pid_t pid, int pidfd) {
    std::string path = "/proc/" + std::to_string(pid) + "/ns/net";
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) return sys_error("open `" + path + "`");
    // The pid could have been recycled between the holder's death and open(): only a pidfd that
    // still accepts signal 0 proves the namespace we opened is the holder's.
    if (pidfd >= 0 && ::syscall(SYS_pidfd_send_signal, pidfd, 0, nullptr, 0) != 0)
        return sys_error("namespace holder " + std::to_string(pid) + " is gone");
    return fd;
}

Result<UniqueFd> make_tcp_socket(int family) {
    UniqueFd fd(::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd) return sys_error("socket");
    return fd;
}

namespace {

/// Fills a sockaddr for `address`; false when the address is not numeric for its family.
bool to_sockaddr(const SocketAddress& address, sockaddr_storage& storage, socklen_t& length) {
    std::memset(&storage, 0, sizeof storage);
    if (address.family == AF_INET) {
        auto* in = reinterpret_cast<sockaddr_in*>(&storage);
        in->sin_family = AF_INET;
        in->sin_port = htons(address.port);
        length = sizeof *in;
        return ::inet_pton(AF_INET, address.address.c_str(), &in->sin_addr) == 1;
    }
    if (address.family == AF_INET6) {
        auto* in6 = reinterpret_cast<sockaddr_in6*>(&storage);
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons(address.port);
        length = sizeof *in6;
        return ::inet_pton(AF_INET6, address.address.c_str(), &in6->sin6_addr) == 1;
    }
    return false;
}

std::string describe(const SocketAddress& address) {
    if (address.family == AF_INET6)
        return "[" + address.address + "]:" + std::to_string(address.port);
    return address.address + ":" + std::to_string(address.port);
}

}  // namespace

Result<UniqueFd> make_tcp_listener(const SocketAddress& address) {
    sockaddr_storage storage;
    socklen_t length = 0;
    if (!to_sockaddr(address, storage, length))
        return sys_error(EINVAL, "bad address `" + describe(address) + "`");
    auto fd = make_tcp_socket(address.family);
    if (!fd) return std::move(fd.error());
    int one = 1;
    ::setsockopt(fd->get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd->get(), reinterpret_cast<sockaddr*>(&storage), length) != 0)
        return sys_error("bind " + describe(address));
    if (::listen(fd->get(), SOMAXCONN) != 0) return sys_error("listen " + describe(address));
    return std::move(*fd);
}

Result<std::shared_ptr<NetnsThread>> NetnsThread::start(UniqueFd netns_fd) {
    auto thread = std::make_shared<NetnsThread>();
    auto entered = std::make_shared<std::promise<int>>();
    auto result = entered->get_future();
    NetnsThread* self = thread.get();
    thread->thread_ = std::thread([self, fd = std::move(netns_fd), entered]() mutable {
        self->main_loop(std::move(fd), entered);
    });
    int error = result.get();
    if (error != 0) {
        thread->stop();
        return sys_error(error, "enter network namespace (setns)");
    }
    return thread;
}

NetnsThread::~NetnsThread() {
    stop();
}

void NetnsThread::main_loop(UniqueFd netns_fd, std::shared_ptr<std::promise<int>> entered) {
    // One per isolated session: its stack is not copied by corrald's forks (this thread never
    // forks, and no launch reads its stack).
    const StackOutsideForks stack_outside_forks;
    // Signals belong to the event loop's thread; this one must never be interrupted by them.
    sigset_t all;
    sigfillset(&all);
    ::pthread_sigmask(SIG_SETMASK, &all, nullptr);
    if (::setns(netns_fd.get(), CLONE_NEWNET) != 0) {
        entered->set_value(errno);
        return;
    }
    netns_fd.reset();
    tid_ = static_cast<pid_t>(::gettid());
    entered->set_value(0);
    std::unique_lock lock(mutex_);
    for (;;) {
        wake_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
        if (stopping_) break;
        auto job = std::move(jobs_.front());
        jobs_.pop_front();
        lock.unlock();
        job->done.set_value(job->work());
        lock.lock();
    }
    for (auto& job : jobs_)
        job->done.set_value(sys_error(ESHUTDOWN, "network namespace thread stopped"));
    jobs_.clear();
}

Result<UniqueFd> NetnsThread::run(std::function<Result<UniqueFd>()> work) {
    auto job = std::make_shared<Job>();
    job->work = std::move(work);
    auto result = job->done.get_future();
    {
        std::lock_guard lock(mutex_);
        if (stopping_) return sys_error(ESHUTDOWN, "network namespace thread stopped");
        jobs_.push_back(job);
    }
    wake_.notify_one();
    return result.get();
}

Result<UniqueFd> NetnsThread::tcp_socket(int family) {
    return run([family] { return make_tcp_socket(family); });
}

Result<UniqueFd> NetnsThread::tcp_listener(const SocketAddress& address) {
    return run([address] { return make_tcp_listener(address); });
}

void NetnsThread::stop() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
    tid_ = 0;
}

}  // namespace corral
