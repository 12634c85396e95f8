#include "supervisor/daemon/http_server.hpp"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <limits>

#include "isolation/id_range.hpp"

namespace corral::daemon {

/// One client connection: a coroutine serving requests until the client closes or keep-alive
/// ends. Registered with the server so shutdown can close it.
class HttpServer::Connection {
  public:
    Connection(HttpServer& server, Socket socket, Listener listener)
        : server_(&server), socket_(std::move(socket)), listener_(listener) {
        server_->connections_.insert(this);
    }
    ~Connection() {
        if (server_) server_->connections_.erase(this);
    }
    /// The server is going away first (its io_context destroys this frame later).
    void detach() { server_ = nullptr; }
    void close() {
        beast::error_code ignored;
        socket_.shutdown(Socket::shutdown_both, ignored);
        socket_.close(ignored);
    }

    asio::awaitable<void> serve() {
        beast::flat_buffer buffer;
        for (;;) {
            RequestParser parser;
            // Uploads are streamed; whole-body readers enforce their own limits.
            parser.body_limit(std::numeric_limits<std::uint64_t>::max());
            parser.header_limit(64 * 1024);
            beast::error_code ec;
            co_await http::async_read_header(socket_, buffer, parser,
                                             asio::redirect_error(asio::use_awaitable, ec));
            if (ec) {
                // A client that closes between requests is normal; a malformed request is not.
                if (ec != http::error::end_of_stream && ec != asio::error::eof &&
                    ec != asio::error::operation_aborted && ec != asio::error::bad_descriptor &&
                    ec != asio::error::connection_reset && server_ && server_->error_log_)
                    server_->error_log_("read request: " + ec.message());
                co_return;
            }
            Exchange exchange(socket_, buffer, parser, listener_);
            co_await server_->api_.handle(exchange);
            if (!exchange.keep_alive()) break;
        }
        close();
    }

  private:
    HttpServer* server_;
    Socket socket_;
    Listener listener_;
};

HttpServer::HttpServer(asio::io_context& io, Api& api)
    : io_(io), api_(api), unix_acceptor_(io), tcp_acceptor_(io) {}

HttpServer::~HttpServer() {
    stop_accepting();
    close_connections();
    for (auto* c : connections_) c->detach();
}

bool unix_socket_in_use(const std::string& path) {
    asio::io_context probe_io;
    asio::local::stream_protocol::socket probe(probe_io);
    beast::error_code ec;
    probe.connect(asio::local::stream_protocol::endpoint(path), ec);
    return !ec;
}

Status HttpServer::listen_unix(const std::string& path) {
    if (path.size() >= sizeof(sockaddr_un::sun_path))
        return sys_error(ENAMETOOLONG, "socket path `" + path + "` is too long");
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0) {
        if (!S_ISSOCK(st.st_mode))
            return sys_error(EEXIST, "`" + path + "` exists and is not a socket");
        if (unix_socket_in_use(path))
            return sys_error(EADDRINUSE, "another daemon answers on `" + path + "`");
        if (::unlink(path.c_str()) != 0) return sys_error("remove stale socket `" + path + "`");
    }
    beast::error_code ec;
    asio::local::stream_protocol::endpoint endpoint(path);
    unix_acceptor_.open(endpoint.protocol(), ec);
    if (!ec) unix_acceptor_.bind(endpoint, ec);
    if (ec) return sys_error(ec.value(), "bind `" + path + "`");
    unix_path_ = path;
    // Nobody can connect before listen(), so setting the mode here leaves no window.
    if (::chmod(path.c_str(), 0660) != 0) return sys_error("chmod 0660 `" + path + "`");
    if (::chown(path.c_str(), 0, 0) != 0) return sys_error("chown root:root `" + path + "`");
    unix_acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) return sys_error(ec.value(), "listen on `" + path + "`");
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
            const auto code = e.code();
            if (code == asio::error::eof || code == asio::error::broken_pipe ||
                code == asio::error::connection_reset || code == asio::error::operation_aborted ||
                code == asio::error::bad_descriptor || code == http::error::end_of_stream)
                return;
            error_log_(std::string("connection: ") + e.what());
        } catch (const std::exception& e) {
            error_log_(std::string("connection: ") + e.what());
        }
    });
}

asio::awaitable<void> HttpServer::accept_unix() {
    for (;;) {
        beast::error_code ec;
        auto socket =
            co_await unix_acceptor_.async_accept(asio::redirect_error(asio::use_awaitable, ec));
        if (ec == asio::error::operation_aborted || !unix_acceptor_.is_open()) co_return;
        if (ec) continue;  // e.g. EMFILE: keep serving the connections we have
        // Issue 10 item 3, last layer: a client running as a corral session's host identity (any
        // instance's) is a sandbox that reached this socket; it gets nothing, not even an error.
        ucred peer{};
        socklen_t length = sizeof peer;
        if (::getsockopt(socket.native_handle(), SOL_SOCKET, SO_PEERCRED, &peer, &length) == 0 &&
            (is_corral_range_id(peer.uid) || is_corral_range_id(peer.gid)))
            continue;  // the socket closes as it goes out of scope
        Socket generic(io_, asio::generic::stream_protocol(AF_UNIX, 0), socket.release());
        start_connection(std::move(generic), Listener::unix_socket);
    }
}

asio::awaitable<void> HttpServer::accept_tcp() {
    for (;;) {
        beast::error_code ec;
        auto socket =
            co_await tcp_acceptor_.async_accept(asio::redirect_error(asio::use_awaitable, ec));
        if (ec == asio::error::operation_aborted || !tcp_acceptor_.is_open()) co_return;
        if (ec) continue;
        const int family = socket.local_endpoint().protocol().family();
        Socket generic(io_, asio::generic::stream_protocol(family, IPPROTO_TCP), socket.release());
        start_connection(std::move(generic), Listener::tcp);
    }
}

void HttpServer::stop_accepting() {
    beast::error_code ignored;
    if (unix_acceptor_.is_open()) {
        unix_acceptor_.close(ignored);
        ::unlink(unix_path_.c_str());
    }
    if (tcp_acceptor_.is_open()) tcp_acceptor_.close(ignored);
}

void HttpServer::close_connections() {
    auto copy = connections_;
    for (auto* c : copy) c->close();
}

}  // namespace corral::daemon
