#pragma once
// How the daemon resolves a name for a session's egress, in one place for the HTTP proxy and the
// session's DNS resolver (dns_resolver.hpp): the operator's hosts file first (--egress-hosts-file;
// its addresses are `pinned`, egress_hosts.hpp), then getaddrinfo through Asio's resolver, which
// runs it on a thread of its own so the event loop never blocks, bounded by a timeout.
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
#include <vector>

#include "policies/egress_rules.hpp"
#include "sessions/network/egress_hosts.hpp"

namespace corral {

/// What one lookup found.
struct EgressLookupResult {
    std::vector<IpAddress> addresses;
    bool pinned = false;     ///< from the operator's hosts file, not DNS
    bool not_found = false;  ///< the name does not exist (or has no address of the family)
    std::string error;       ///< non-empty when the lookup failed (not_found included)
};

/// One name lookup at a time; start() again after the handler ran for the next one.
class EgressLookup : public std::enable_shared_from_this<EgressLookup> {
  public:
    using Handler = std::function<void(EgressLookupResult)>;
    explicit EgressLookup(boost::asio::io_context& io) : resolver_(io), timer_(io) {}

    /// Resolves `host` for `port` (`family`: AF_INET, AF_INET6 or AF_UNSPEC) and calls `handler`
    /// once: at once for a hosts-file name, else when getaddrinfo answered or `timeout` passed.
    void start(const EgressHosts* hosts, const std::string& host, uint16_t port, int family,
               std::chrono::milliseconds timeout, Handler handler);
    /// Cancels a lookup in flight; its handler still runs, with an error.
    void cancel();

  private:
    boost::asio::ip::tcp::resolver resolver_;
    boost::asio::steady_timer timer_;
    bool timed_out_ = false;
};

}  // namespace corral
