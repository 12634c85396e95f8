#pragma once
// The accept loop of every listener of a session's network — the HTTP egress proxy, the
// transparent relay, the port forwarders and the DNS resolver's TCP side — in one place, with one
// behaviour. The listener is made elsewhere (often inside the session's namespace, by its
// NetnsRunner) and adopted here. A failed accept() for lack of descriptors or memory (EMFILE,
// ENFILE, ENOBUFS) is retried after kRetryDelay: not at once, which would spin the event loop
// for as long as the shortage lasts, and not given up, which would leave the listener dead for
// the rest of the session. A client that reset before it was accepted (ECONNABORTED) is
// skipped at once.
//
// Threading: the daemon's io_context thread.

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded

#include "base/error.hpp"
#include "base/unique_fd.hpp"

namespace corral {

/// Accepts connections on one adopted listener until stopped.
class AcceptLoop {
  public:
    using Handler = std::function<void(boost::asio::ip::tcp::socket)>;
    static constexpr std::chrono::milliseconds kRetryDelay{50};

    explicit AcceptLoop(boost::asio::io_context& io) : acceptor_(io), retry_(io) {}

    /// Takes `listener` (a listening TCP socket of `family`, AF_INET or AF_INET6); on failure
    /// it is closed and the error names `what`.
    Status adopt(UniqueFd listener, int family, const std::string& what);
    /// Accepts until stop(), handing each connection to `on_accept`. `keep` (the owner's shared
    /// state, which holds this loop) is held by every pending wait, so the loop and whatever
    /// `on_accept` touches outlive them; `on_accept` itself must not hold `keep` (a cycle).
    void start(std::shared_ptr<void> keep, Handler on_accept);
    /// Closes the listener; pending waits end without calling `on_accept` (idempotent).
    void stop();

  private:
    void next(std::shared_ptr<void> keep);

    boost::asio::ip::tcp::acceptor acceptor_;
    boost::asio::steady_timer retry_;
    Handler on_accept_;
    bool stopped_ = false;
};

}  // namespace corral
