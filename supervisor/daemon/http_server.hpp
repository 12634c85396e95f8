#pragma once
// corrald's listeners and connections: a Unix socket (always) and a loopback TCP port (when
// asked), both served by the same Api on the one event-loop thread. Each connection is one
// coroutine that reads a request header, lets the Api answer, and loops while keep-alive holds.

#include <chrono>
#include <functional>
#include <set>
#include <string>

#include "base/unique_fd.hpp"
#include "supervisor/daemon/api.hpp"
#include "supervisor/daemon/connection_limits.hpp"
#include "supervisor/daemon/exchange.hpp"
#include "supervisor/daemon/unix_listener.hpp"

namespace corral::daemon {

/// Accepts connections and serves them until stop().
class HttpServer {
  public:
    HttpServer(asio::io_context& io, Api& api, ConnectionLimits limits = {});
    ~HttpServer();

    /// Listens on a Unix socket at `path` (bind_unix_socket: a stale socket file is removed, one
    /// another daemon answers on is left, EADDRINUSE; mode 0660, owner root:root, so only root
    /// and the root group can reach it). A failure leaves no socket file behind.
    Status listen_unix(const std::string& path);
    /// Listens on "127.0.0.1:PORT" / "[::1]:PORT" / "localhost:PORT"; any non-loopback address
    /// is refused (EINVAL): TCP carries bearer tokens, which must not cross a network.
    Status listen_tcp(const std::string& address);
    /// Where unexpected connection failures are reported (the daemon's log); ordinary client
    /// disconnects are not reported.
    void set_error_log(std::function<void(const std::string&)> log) { error_log_ = std::move(log); }
    /// The TCP port actually bound (for --listen 127.0.0.1:0); 0 without a TCP listener.
    uint16_t tcp_port() const { return tcp_port_; }

    /// Stops accepting (closes the listeners and removes the socket file).
    void stop_accepting();
    /// Closes every open connection (after the final events were written).
    void close_connections();
    /// Connections still open (their coroutines have not finished).
    size_t connection_count() const { return connections_.size(); }

  private:
    class Connection;
    asio::awaitable<void> accept_unix();
    asio::awaitable<void> accept_tcp();
    /// Serves the new connection, or answers 503 when max_connections are open, or when a TCP
    /// client would take the Unix socket's reserve.
    void admit(Socket socket, Listener listener);
    /// Connections TCP clients may never take: the Unix socket is the operator's way in (full
    /// rights), and a holder of a session token over TCP held every connection and locked the
    /// operator out, DELETE of the offending session included (stop 44's red-team finding).
    size_t unix_reserve() const;
    void start_connection(Socket socket, Listener listener);
    /// Writes a 503 on a connection over the cap, then closes it (without reading the request
    /// into the void: the client gets the answer instead of a reset).
    asio::awaitable<void> refuse_connection(Socket socket);
    /// After a failed accept. EMFILE/ENFILE/ENOBUFS/ENOMEM wait first, doubling
    /// up to 1 s: the listener stays readable while no fd is free, and retrying at once spun
    /// at 65% CPU (issue 12 item 4) while freeing nothing.
    asio::awaitable<void> after_accept_error(const beast::error_code& ec,
                                             std::chrono::milliseconds& backoff);

    asio::io_context& io_;
    Api& api_;
    asio::local::stream_protocol::acceptor unix_acceptor_;
    asio::ip::tcp::acceptor tcp_acceptor_;
    std::string unix_path_;
    UniqueFd unix_dir_;      ///< the socket's directory, opened once (no path lookups after bind)
    std::string unix_name_;  ///< the socket's name in it
    uint16_t tcp_port_ = 0;
    std::set<Connection*> connections_;
    size_t tcp_connections_ = 0;  ///< of connections_, those accepted on the TCP listener
    std::function<void(const std::string&)> error_log_;
    ConnectionLimits limits_;
    size_t refusing_ = 0;   ///< 503 answers being written
    bool starved_ = false;  ///< accept failed for want of fds and that was logged
};

/// Parses a --listen address; EINVAL naming it when malformed or not a loopback address.
Result<asio::ip::tcp::endpoint> parse_loopback_endpoint(const std::string& address);

}  // namespace corral::daemon
