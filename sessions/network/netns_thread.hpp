#pragma once
// A thread that lives inside one network namespace and makes sockets there for the daemon.
//
// A socket belongs to the network namespace of the thread that created it, for its whole life,
// whichever thread later reads, writes, connects or accepts on it. So the daemon never enters a
// session's namespace on its event-loop thread (setns(CLONE_NEWNET) changes only the calling
// thread, and the loop serves every session): it asks this thread to create (and bind) the socket,
// gets the descriptor back, and does all I/O on the loop as with any other socket.
//
// The thread holds a reference to the namespace: the namespace stays alive until stop() (or the
// destructor) has joined the thread, even if the session's holder process is gone.

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "base/error.hpp"
#include "base/unique_fd.hpp"

namespace corral {

/// An IPv4 or IPv6 loopback (or any) address and a port, in host byte order.
struct SocketAddress {
    int family = 0;       ///< AF_INET or AF_INET6
    std::string address;  ///< numeric: "127.0.0.1", "::1"
    uint16_t port = 0;
};

/// Opens the network namespace of a live process (`/proc/<pid>/ns/net`), then checks through the
/// pidfd that the pid still names the same process (a recycled pid would hand us a stranger's
/// namespace).
Result<UniqueFd> open_network_namespace(pid_t pid, int pidfd);

/// Creates a TCP socket (CLOEXEC) of `family` in the calling thread's network namespace.
Result<UniqueFd> make_tcp_socket(int family);
/// Creates a listening TCP socket bound to `address` (SO_REUSEADDR) in the calling thread's
/// network namespace.
Result<UniqueFd> make_tcp_listener(const SocketAddress& address);

/// One thread inside one network namespace, running small socket-making jobs on request.
class NetnsThread {
  public:
    /// Starts the thread and enters `netns_fd` (an fd of /proc/<pid>/ns/net, or a pidfd). Fails
    /// with setns's errno when the thread cannot enter it.
    static Result<std::shared_ptr<NetnsThread>> start(UniqueFd netns_fd);
    /// Stops and joins the thread.
    ~NetnsThread();
    NetnsThread(const NetnsThread&) = delete;
    NetnsThread& operator=(const NetnsThread&) = delete;

    /// Runs `job` on the namespace thread and returns its result; blocks the caller for the
    /// job's duration only. Fails with ESHUTDOWN after stop(). Thread-safe.
    ///
    /// Most jobs are socket()/bind()/listen() (microseconds). The transparent egress path's
    /// nftables and route changes also run here (TransparentRelay::apply and change_named:
    /// libnftables, 7-13 ms a time), and corrald's loop waits for them at session creation, at
    /// PATCH .../network and for each DNS answer that opens a name's addresses. They stay
    /// synchronous for now (issue 12 review item 5): the DNS answer must not reach the sandbox
    /// before its addresses are open (its first connect would be refused), and PATCH answers once
    /// the new rules are in force, so making them asynchronous means a completion posted back to
    /// the loop that the resolver's reply and the PATCH handler both await.
    Result<UniqueFd> run(std::function<Result<UniqueFd>()> job);
    /// A TCP socket inside the namespace.
    Result<UniqueFd> tcp_socket(int family);
    /// A listening TCP socket inside the namespace.
    Result<UniqueFd> tcp_listener(const SocketAddress& address);

    /// Ends the thread (idempotent): queued jobs fail with ESHUTDOWN. Sockets already made keep
    /// working; the namespace lives on while any of them is open.
    void stop();
    /// Kernel thread id of the namespace thread (for tests and diagnostics); 0 after stop().
    pid_t thread_id() const { return tid_.load(); }

    /// Internal: use start().
    NetnsThread() = default;

  private:
    struct Job;
    void main_loop(UniqueFd netns_fd, std::shared_ptr<std::promise<int>> entered);

    std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<std::shared_ptr<Job>> jobs_;
    bool stopping_ = false;
    std::thread thread_;
    std::atomic<pid_t> tid_{0};
};

}  // namespace corral
