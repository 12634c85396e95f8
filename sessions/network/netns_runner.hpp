#pragma once
// Makes sockets inside one network namespace for the daemon.
//
// A socket belongs to the network namespace of the thread that created it, for its whole life,
// whichever thread later reads, writes, connects or accepts on it. So the daemon never enters a
// session's namespace on its event-loop thread (setns(CLONE_NEWNET) changes only the calling
// thread, and the loop serves every session): the socket is created (and bound) on corrald's one
// namespace thread, which enters the session's namespace for each job and returns to its own
// right after, and the descriptor comes back for the loop to do all I/O as with any other socket.
//
// One thread for every session, not one per session (issue 18): with 1,000 isolated sessions the
// per-session threads (and each one's nftables worker) were 2,000 threads, 4,000 stack mappings
// and ~48 MB, which every fork of corrald (a launch) walked; their jobs are rare (a session's
// creation, an egress change) and the loop waits for each anyway, so one thread serves them all.
// A job runs only after its setns() succeeded: never in another session's namespace or corrald's.
//
// The runner holds a descriptor of the namespace: the namespace stays alive until stop() (or
// the destructor), even if the session's holder process is gone.

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "base/error.hpp"
#include "base/unique_fd.hpp"
#include "sessions/network/socket_address.hpp"

namespace corral {

/// Opens the network namespace of a live process (`/proc/<pid>/ns/net`), then checks through the
/// pidfd that the pid still names the same process (a recycled pid would hand us a stranger's
/// namespace).
Result<UniqueFd> open_network_namespace(pid_t pid, int pidfd);

/// Creates a TCP socket (CLOEXEC) of `family` in the calling thread's network namespace.
Result<UniqueFd> make_tcp_socket(int family);
/// Creates a listening TCP socket bound to `address` (SO_REUSEADDR) in the calling thread's
/// network namespace.
Result<UniqueFd> make_tcp_listener(const SocketAddress& address);

/// One network namespace and the jobs the daemon runs inside it (on the namespace thread).
class NetnsRunner {
  public:
    /// Takes `netns_fd` (an fd of /proc/<pid>/ns/net, or a pidfd) and checks that the namespace
    /// thread can enter it. Fails with setns's errno when it cannot.
    static Result<std::shared_ptr<NetnsRunner>> start(UniqueFd netns_fd);
    /// Stops (see stop()).
    ~NetnsRunner();
    NetnsRunner(const NetnsRunner&) = delete;
    NetnsRunner& operator=(const NetnsRunner&) = delete;

    /// Runs `job` inside the namespace and returns its result; blocks the caller until the job
    /// has run (after the jobs of other namespaces queued before it). Fails with ESHUTDOWN after
    /// stop(). Thread-safe; a job must not call run() or stop() of any runner: either aborts
    /// corrald with a message (the job would wait for itself).
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

    /// Ends the runner (idempotent): waits for its job if one is running, and jobs not yet
    /// started fail with ESHUTDOWN. Sockets already made keep working; the namespace lives on
    /// while any of them is open. Called by a job, it aborts corrald (see run()).
    void stop();

    /// The namespace, shared with the jobs queued for it (internal).
    struct Namespace;
    /// Internal: use start().
    explicit NetnsRunner(std::shared_ptr<Namespace> netns) : netns_(std::move(netns)) {}

  private:
    std::shared_ptr<Namespace> netns_;
};

}  // namespace corral
