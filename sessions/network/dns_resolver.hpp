#pragma once
// The DNS resolver of one isolated session: answers what the session's egress rules allow, and
// nothing else.
//
// It listens inside the session's namespace on 127.0.0.1:53, UDP and TCP (the sockets are made
// by the session's NetnsRunner, so they belong to that namespace; the sandbox's /etc/resolv.conf
// names it, session_resolv_conf.hpp). Every query is judged by the rules in force when it
// arrives (so a PATCH .../network applies to the next query):
//   - a name the rules refuse (check_name; unless allowedCIDRs could still open its address, as
//     through the proxy) gets NXDOMAIN without any lookup, and counts as an egress refusal in
//     the session record (`egress.refused`) and the daemon's log;
//   - an allowed name is resolved the daemon's own way (egress_lookup.hpp: the operator's hosts
//     file, then getaddrinfo), every address is judged again (check_address: deniedCIDRs and the
//     protected ranges refuse), and only the addresses that pass are answered, with a fixed TTL
//     (getaddrinfo does not say the record's own). If none passes: NXDOMAIN, counted. Each
//     answered address becomes a name-bound allowance for the TTL (name_allowances.hpp), so a
//     direct TCP client reaches it through the transparent relay; the allowance is opened in the
//     namespace before the answer is sent.
//   - AAAA of an allowed name is answered empty (NOERROR, no record): the transparent path is
//     IPv4-only, and a client given an IPv6 address would try it first and get ENETUNREACH. Other
//     types get an empty answer too; names that do not exist get NXDOMAIN, lookup failures
//     SERVFAIL (neither is a refusal).
// NXDOMAIN rather than REFUSED for a refused name: getaddrinfo turns NXDOMAIN into EAI_NONAME at
// once and tools report "could not resolve host" and stop, while REFUSED reads as a temporary
// failure (EAI_AGAIN) that pip, npm and git retry with back-off.
//
// Parsing is dns_message.hpp's (strict, bounded). Bounds here: kMaxPendingLookups lookups in
// flight per session (SERVFAIL beyond, so a flood cannot tie up the daemon's resolver thread for
// other sessions), kMaxTcpConnections TCP clients (closed beyond), kTcpIdle per TCP connection
// without a complete query, one query at a time per TCP connection (an answer is written before
// the next query is read: a client that never reads holds one answer, no more), UDP answers sent
// without waiting (dropped when the socket buffer is full).
//
// Threading: the daemon's io_context thread.

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded
#include <vector>

#include "base/error.hpp"
#include "sessions/network/egress_gate.hpp"
#include "sessions/network/netns_runner.hpp"

namespace corral {

/// Bounds and timing of one session resolver.
struct DnsResolverLimits {
    std::chrono::seconds answer_ttl{60};       ///< TTL of every answered record
    std::chrono::seconds allowance_grace{30};  ///< name-bound allowance beyond the TTL
    std::chrono::milliseconds lookup_timeout{5000};
    size_t max_pending_lookups = 32;
    size_t max_tcp_connections = 16;
    std::chrono::milliseconds tcp_idle{10000};
};

/// The address the resolver listens on inside the namespace (resolv.conf names it).
inline constexpr const char* kSessionResolverAddress = "127.0.0.1";
inline constexpr uint16_t kSessionResolverPort = 53;

/// One session's DNS resolver.
class SessionResolver {
  public:
    /// Called with the addresses answered for an allowed name (IPv4), before the answer goes
    /// out: the session opens them as name-bound allowances.
    using GrantHandler =
        std::function<void(const std::string& name, bool pinned,
                           const std::vector<IpAddress>& addresses, std::chrono::seconds lifetime)>;

    /// Binds UDP and TCP on `address`:`port` inside `netns` and serves until stop().
    static Result<std::unique_ptr<SessionResolver>> start(
        boost::asio::io_context& io, const std::shared_ptr<NetnsRunner>& netns,
        std::shared_ptr<EgressGate> gate, GrantHandler grant, DnsResolverLimits limits = {},
        SocketAddress address = {AF_INET, kSessionResolverAddress, kSessionResolverPort});
    /// stop().
    ~SessionResolver();
    /// Closes both sockets and every TCP connection; lookups in flight answer nobody.
    void stop();
    /// The port inside the namespace (53 unless a test chose another).
    uint16_t port() const { return port_; }
    /// Queries answered so far (any answer), and TCP connections open now.
    uint64_t answered() const;
    size_t tcp_connections() const;

    struct State;
    /// Internal: use start().
    SessionResolver(std::shared_ptr<State> state, uint16_t port);

  private:
    std::shared_ptr<State> state_;
    uint16_t port_ = 0;
};

}  // namespace corral
