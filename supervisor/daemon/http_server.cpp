#include "supervisor/daemon/http_server.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <limits>

#include "isolation/id_range.hpp"
#include "supervisor/daemon/json_fields.hpp"

namespace corral::daemon {

namespace {

/// A response on a connection no Exchange serves: malformed requests, timeouts, the cap.
http::response<http::string_body> plain_error(http::status status, const std::string& code,
                                              const std::string& message) {
    http::response<http::string_body> res{status, 11};
    res.set(http::field::server, "corrald/" CORRAL_VERSION);
    res.set(http::field::content_type, "application/json");
    res.keep_alive(false);
    const nlohmann::json body = {{"error", {{"code", code}, {"message", message}}}};
    res.body() = dump_json(body) + "\n";
    res.prepare_payload();
    return res;
}

}  // namespace

/// One client connection: a coroutine serving requests until the client closes or keep-alive
/// ends. Registered with the server so shutdown can close it.
class HttpServer::Connection {
  public:
    Connection(HttpServer& server, Socket socket, Listener listener)
        : server_(&server),
          socket_(std::move(socket)),
          listener_(listener),
          watch_(socket_.get_executor(), socket_) {
        server_->connections_.insert(this);
        if (listener_ == Listener::tcp) ++server_->tcp_connections_;
    }
    ~Connection() {
        if (!server_) return;
        server_->connections_.erase(this);
        if (listener_ == Listener::tcp) --server_->tcp_connections_;
    }
    /// The server is going away first (its io_context destroys this frame later).
    void detach() { server_ = nullptr; }
    void close() {
        beast::error_code ignored;
        socket_.shutdown(Socket::shutdown_both, ignored);
        socket_.close(ignored);
    }

    asio::awaitable<void> serve() {
        const ConnectionLimits limits = server_->limits_;
        beast::flat_buffer buffer;
        for (bool first = true;; first = false) {
            RequestParser parser;
            // Uploads are streamed; whole-body readers enforce their own limits.
            parser.body_limit(std::numeric_limits<std::uint64_t>::max());
            parser.header_limit(64 * 1024);
            beast::error_code ec;
            if (!first && buffer.size() == 0) {
                // Between requests: idle until the next one's first byte (or EOF) arrives.
                watch_.arm(limits.idle_timeout);
                co_await socket_.async_wait(Socket::wait_read,
                                            asio::redirect_error(asio::use_awaitable, ec));
                if (ec) break;
            }
            // The whole header within the limit, however slowly its bytes trickle in.
            watch_.arm(limits.header_timeout);
            co_await http::async_read_header(socket_, buffer, parser,
                                             asio::redirect_error(asio::use_awaitable, ec));
            watch_.disarm();
            if (ec) {
                co_await answer_read_failure(ec, limits);
                break;
            }
            if (auto bad = query_problem(parser)) {
                auto res = plain_error(http::status::bad_request, bad->first, bad->second);
                co_await write_bounded(res, limits);
                break;
            }
            Exchange exchange(socket_, buffer, parser, listener_, &watch_, limits.body_timeout,
                              limits.write_timeout, limits.min_write_rate);
            co_await server_->api_.handle(exchange);
            if (!exchange.keep_alive()) break;
        }
        close();
    }

  private:
    /// A malformed request gets 400 (431 for an oversized header), a timed-out one 408; a
    /// client that went away gets nothing. Neither is logged: they are the client's doing, and
    /// a log line per bad request would let any client fill the log.
    asio::awaitable<void> answer_read_failure(const beast::error_code& ec,
                                              const ConnectionLimits& limits) {
        if (ec == asio::error::operation_aborted && watch_.expired()) {
            auto res = plain_error(http::status::request_timeout, "header_timeout",
                                   "the request header was not complete within " +
                                       std::to_string(limits.header_timeout.count()) + " ms");
            co_await write_bounded(res, limits);
        } else if (ec == http::error::header_limit) {
            auto res =
                plain_error(http::status::request_header_fields_too_large, "header_too_large",
                            "the request line and headers exceed 65536 bytes");
            co_await write_bounded(res, limits);
        } else if (is_http_parse_error(ec)) {
            auto res = plain_error(http::status::bad_request, "malformed_request",
                                   "malformed HTTP request: " + ec.message());
            co_await write_bounded(res, limits);
        } else if (!is_client_error(ec) && server_ && server_->error_log_) {
            server_->error_log_("read request: " + ec.message());
        }
    }

    /// Writes a response whose client may not read it: bounded by the body timeout.
    asio::awaitable<void> write_bounded(http::response<http::string_body>& res,
                                        const ConnectionLimits& limits) {
        beast::error_code ignored;
        watch_.arm(limits.body_timeout);
        co_await http::async_write(socket_, res,
                                   asio::redirect_error(asio::use_awaitable, ignored));
        watch_.disarm();
    }

    static std::optional<std::pair<std::string, std::string>> query_problem(
        const RequestParser& parser) {
        const auto target = parser.get().target();
        auto [path, query] = split_target(std::string_view(target.data(), target.size()));
        return check_query(query);
    }

    HttpServer* server_;
    Socket socket_;
    Listener listener_;
    ReadWatch watch_;
};

HttpServer::HttpServer(asio::io_context& io, Api& api, ConnectionLimits limits)
    : io_(io), api_(api), unix_acceptor_(io), tcp_acceptor_(io), limits_(limits) {}

HttpServer::~HttpServer() {
    stop_accepting();
    close_connections();
    for (auto* c : connections_) c->detach();
}

Status HttpServer::listen_unix(const std::string& path) {
    auto bound = bind_unix_socket(path);
    if (!bound) return std::move(bound.error());
    beast::error_code ec;
    unix_acceptor_.assign(asio::local::stream_protocol(), bound->socket.get(), ec);
    if (!ec) {
        (void)bound->socket.release();  // the acceptor owns it now
        unix_acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    }
    if (ec) {
        remove_socket_file(*bound);
        beast::error_code ignored;
        unix_acceptor_.close(ignored);
        return sys_error(ec.value(), "listen on `" + path + "`");
    }
    unix_path_ = path;
    unix_name_ = bound->name;
    unix_dir_ = std::move(bound->dir);
    asio::co_spawn(io_, accept_unix(), asio::detached);
    return {};
}

Result<asio::ip::tcp::endpoint> parse_loopback_endpoint(const std::string& address) {
    const size_t colon = address.rfind(':');
    if (colon == std::string::npos || colon == 0)
        return sys_error(EINVAL, "--listen `" + address + "`: expected HOST:PORT");
    std::string host = address.substr(0, colon);
    const std::string port_text = address.substr(colon + 1);
    if (host.size() > 2 && host.front() == '[' && host.back() == ']')
        host = host.substr(1, host.size() - 2);
    if (host == "localhost") host = "127.0.0.1";
    beast::error_code ec;
    const auto ip = asio::ip::make_address(host, ec);
    if (ec)
        return sys_error(EINVAL, "--listen `" + address + "`: `" + host + "` is not an IP address");
    if (!ip.is_loopback())
        return sys_error(EINVAL, "--listen `" + address +
                                     "`: only loopback addresses are allowed (tokens must not "
                                     "cross a network)");
    unsigned port = 0;
    for (char c : port_text) {
        if (c < '0' || c > '9' || port > 65535)
            return sys_error(EINVAL, "--listen `" + address + "`: bad port");
        port = port * 10 + static_cast<unsigned>(c - '0');
    }
    if (port_text.empty() || port > 65535)
        return sys_error(EINVAL, "--listen `" + address + "`: bad port");
    return asio::ip::tcp::endpoint(ip, static_cast<uint16_t>(port));
}

Status HttpServer::listen_tcp(const std::string& address) {
    auto endpoint = parse_loopback_endpoint(address);
    if (!endpoint) return std::move(endpoint.error());
    beast::error_code ec;
    tcp_acceptor_.open(endpoint->protocol(), ec);
    if (!ec) tcp_acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) tcp_acceptor_.bind(*endpoint, ec);
    if (!ec) tcp_acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) return sys_error(ec.value(), "listen on `" + address + "`");
    tcp_port_ = tcp_acceptor_.local_endpoint().port();
    asio::co_spawn(io_, accept_tcp(), asio::detached);
    return {};
}

namespace {

/// Owns the connection for as long as its coroutine runs (parameters live in the frame).
template <class C>
asio::awaitable<void> run_connection(std::shared_ptr<C> connection) {
    co_await connection->serve();
}

}  // namespace

void HttpServer::start_connection(Socket socket, Listener listener) {
    auto connection = std::make_shared<Connection>(*this, std::move(socket), listener);
    asio::co_spawn(io_, run_connection(std::move(connection)), [this](std::exception_ptr failure) {
        // I/O failures end the connection; only the unexpected ones are worth a log line.
        if (!failure || !error_log_) return;
        try {
            std::rethrow_exception(failure);
        } catch (const beast::system_error& e) {
            if (is_client_error(e.code())) return;
            error_log_(std::string("connection: ") + e.what());
        } catch (const std::exception& e) {
            error_log_(std::string("connection: ") + e.what());
        }
    });
}

size_t HttpServer::unix_reserve() const { return limits_.max_connections / 8; }

void HttpServer::admit(Socket socket, Listener listener) {
    const bool tcp_room = listener != Listener::tcp ||
                          tcp_connections_ + unix_reserve() < limits_.max_connections;
    if (connections_.size() < limits_.max_connections && tcp_room) {
        start_connection(std::move(socket), listener);
        return;
    }
    // Answering costs a little per refused client; past a bound, just close.
    if (refusing_ >= 64) return;
    ++refusing_;
    asio::co_spawn(io_, refuse_connection(std::move(socket)),
                   [this](std::exception_ptr) { --refusing_; });
}

asio::awaitable<void> HttpServer::refuse_connection(Socket socket) {
    const std::string why =
        connections_.size() >= limits_.max_connections
            ? "corrald serves at most " + std::to_string(limits_.max_connections) +
                  " connections at once"
            : "corrald serves at most " +
                  std::to_string(limits_.max_connections - unix_reserve()) +
                  " TCP connections at once (" + std::to_string(unix_reserve()) + " of its " +
                  std::to_string(limits_.max_connections) + " are kept for its Unix socket)";
    auto res = plain_error(http::status::service_unavailable, "too_many_connections",
                           why + "; try again when one has closed");
    res.set(http::field::retry_after, "1");
    ReadWatch watch(socket.get_executor(), socket);
    watch.arm(std::chrono::seconds(2));
    beast::error_code ec;
    co_await http::async_write(socket, res, asio::redirect_error(asio::use_awaitable, ec));
    // Closing with the request unread would send a reset that can destroy the answer in
    // flight: end our side, then drain until the client closes (or the watch runs out).
    socket.shutdown(Socket::shutdown_send, ec);
    char sink[4096];
    while (!ec) {
        co_await socket.async_read_some(asio::buffer(sink),
                                        asio::redirect_error(asio::use_awaitable, ec));
    }
    socket.close(ec);
}

asio::awaitable<void> HttpServer::after_accept_error(const beast::error_code& ec,
                                                     std::chrono::milliseconds& backoff) {
    const int code = ec.value();
    const bool out_of_fds = ec.category() == boost::system::system_category() &&
                            (code == EMFILE || code == ENFILE || code == ENOBUFS || code == ENOMEM);
    if (!out_of_fds) co_return;  // the one connection failed (ECONNABORTED): go on at once
    if (!starved_ && error_log_) {
        error_log_("accept: " + ec.message() +
                   "; pausing accepts until descriptors are free (connections open: " +
                   std::to_string(connections_.size()) + ")");
    }
    starved_ = true;
    backoff =
        std::clamp(backoff * 2, std::chrono::milliseconds(20), std::chrono::milliseconds(1000));
    asio::steady_timer timer(io_, backoff);
    beast::error_code ignored;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
}

asio::awaitable<void> HttpServer::accept_unix() {
    std::chrono::milliseconds backoff{0};
    for (;;) {
        beast::error_code ec;
        auto socket =
            co_await unix_acceptor_.async_accept(asio::redirect_error(asio::use_awaitable, ec));
        if (ec == asio::error::operation_aborted || !unix_acceptor_.is_open()) co_return;
        if (ec) {
            co_await after_accept_error(ec, backoff);
            continue;
        }
        backoff = std::chrono::milliseconds(0);
        starved_ = false;
        // Issue 10 item 3, last layer: a client running as a corral session's host identity (any
        // instance's) is a sandbox that reached this socket; it gets nothing, not even an error.
        ucred peer{};
        socklen_t length = sizeof peer;
        if (::getsockopt(socket.native_handle(), SOL_SOCKET, SO_PEERCRED, &peer, &length) == 0 &&
            (is_corral_range_id(peer.uid) || is_corral_range_id(peer.gid)))
            continue;  // the socket closes as it goes out of scope
        Socket generic(io_, asio::generic::stream_protocol(AF_UNIX, 0), socket.release());
        admit(std::move(generic), Listener::unix_socket);
    }
}

asio::awaitable<void> HttpServer::accept_tcp() {
    std::chrono::milliseconds backoff{0};
    for (;;) {
        beast::error_code ec;
        auto socket =
            co_await tcp_acceptor_.async_accept(asio::redirect_error(asio::use_awaitable, ec));
        if (ec == asio::error::operation_aborted || !tcp_acceptor_.is_open()) co_return;
        if (ec) {
            co_await after_accept_error(ec, backoff);
            continue;
        }
        backoff = std::chrono::milliseconds(0);
        starved_ = false;
        const int family = socket.local_endpoint().protocol().family();
        Socket generic(io_, asio::generic::stream_protocol(family, IPPROTO_TCP), socket.release());
        admit(std::move(generic), Listener::tcp);
    }
}

void HttpServer::stop_accepting() {
    beast::error_code ignored;
    if (unix_acceptor_.is_open()) {
        unix_acceptor_.close(ignored);
        if (unix_dir_) ::unlinkat(unix_dir_.get(), unix_name_.c_str(), 0);
    }
    if (tcp_acceptor_.is_open()) tcp_acceptor_.close(ignored);
}

void HttpServer::close_connections() {
    auto copy = connections_;
    for (auto* c : copy) c->close();
}

}  // namespace corral::daemon
