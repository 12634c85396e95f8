#pragma once
// Direct TCP connections refused inside a session's namespace, reported to the daemon.
//
// The transparent egress path refuses most direct connections in the kernel: the session's
// nftables rules (netns_routing.hpp) answer the SYN with a reset, so connect() fails with
// ECONNREFUSED at once, and the daemon would never hear of it. Each of those rules also logs the
// SYN to an NFLOG group (nfnetlink_log); this listener is a NETLINK_NETFILTER socket made on the
// session's NetnsRunner, so it is bound to that group of that namespace only, and it hands the
// destination of each logged SYN to the daemon's loop, which counts and logs it like every other
// egress refusal (EgressGate::refuse).
//
// Only messages from the kernel are read (a program of the session could send its own to this
// socket to inflate the count). A sandbox refused faster than the daemon reads can fill the
// socket's buffer (ENOBUFS): those connections are refused all the same, and the handler hears
// that reports were lost.
//
// Threading: the daemon's io_context thread (the socket is made on the NetnsRunner).

#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded

#include "base/error.hpp"
#include "policies/egress_rules.hpp"
#include "sessions/network/netns_runner.hpp"

namespace corral {

/// The NFLOG listener of one session's namespace.
class RefusalLog {
  public:
    /// One refused SYN to `address`:`port`; nullopt: reports were lost (buffer overflow).
    using Handler = std::function<void(const std::optional<IpAddress>& address, uint16_t port)>;

    /// Binds NFLOG `group` inside `netns` and calls `handler` on `io` for each IPv4 TCP packet
    /// logged to it. EBUSY when something in the namespace bound the group first.
    static Result<std::unique_ptr<RefusalLog>> start(boost::asio::io_context& io,
                                                     NetnsRunner& netns, uint16_t group,
                                                     Handler handler);
    /// stop().
    ~RefusalLog();
    /// Closes the socket (idempotent); the handler is not called any more.
    void stop();

    struct State;
    /// Internal: use start().
    explicit RefusalLog(std::shared_ptr<State> state);

  private:
    std::shared_ptr<State> state_;
};

/// Parses the messages of one datagram from nfnetlink_log and calls `on_packet` with the
/// destination of each IPv4 TCP packet in it (pure: unit-tested with crafted bytes).
void parse_nflog_datagram(const void* data, size_t length,
                          const std::function<void(const IpAddress&, uint16_t)>& on_packet);

}  // namespace corral
