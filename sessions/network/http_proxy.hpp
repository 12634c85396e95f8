#pragma once
// The HTTP egress proxy of one isolated session: the way out for HTTP and HTTPS.
//
// The listener lives inside the session's network namespace at 127.0.0.1:<ephemeral> (made by
// the NetnsRunner), and the session's processes find it through HTTP_PROXY/HTTPS_PROXY. Every
// outbound connection is made on the daemon's event loop, so from the daemon's own namespace:
// the sandbox has no route out of its own, and nothing it does to its namespace changes that.
//
// Per connection: read one request head (bounded size and time), parse it strictly
// (proxy_request.hpp), judge the name (EgressRules::check_name), resolve it in the daemon (the
// operator's hosts file first, then getaddrinfo through Asio's resolver, off the event loop),
// judge every resolved address again (check_address; DNS rebinding and names resolving into
// denied ranges end here), connect to the first allowed address, then relay bytes unchanged
// (CONNECT: "200 Connection established" first; absolute-URI: the head rewritten to origin
// form, `Connection: close`). A refusal is a 403 whose body names the destination and the rule,
// counted and logged by the EgressGate.

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded

#include "base/error.hpp"
#include "sessions/network/egress_gate.hpp"
#include "sessions/network/netns_runner.hpp"

namespace corral {

/// Bounds of one proxy, so no session can make the daemon hold unbounded memory or sockets.
struct HttpProxyLimits {
    size_t max_head_bytes = 16 * 1024;         ///< request line + headers (431 beyond)
    std::chrono::milliseconds head_timeout{30000};     ///< to send the whole head (408 after)
    std::chrono::milliseconds connect_timeout{10000};  ///< per upstream connect attempt
    size_t max_connections = 256;              ///< open at once, relays included (503 beyond)
};

/// One session's HTTP/HTTPS proxy.
class HttpEgressProxy {
  public:
    /// Listens inside `netns` on 127.0.0.1:`port` (0: an ephemeral port) and serves until stop().
    static Result<std::unique_ptr<HttpEgressProxy>> start(boost::asio::io_context& io,
                                                          const std::shared_ptr<NetnsRunner>& netns,
                                                          std::shared_ptr<EgressGate> gate,
                                                          HttpProxyLimits limits = {},
                                                          uint16_t port = 0);
    /// stop().
    ~HttpEgressProxy();
    /// The port inside the namespace.
    uint16_t port() const { return port_; }
    /// Closes the listener and every connection (idempotent).
    void stop();
    /// Connections open now (being judged or relayed).
    size_t connection_count() const;

    struct State;
    /// Internal: use start().
    HttpEgressProxy(std::shared_ptr<State> state, uint16_t port);

  private:
    std::shared_ptr<State> state_;
    uint16_t port_ = 0;
};

}  // namespace corral
