#include "sessions/network/http_proxy.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <array>
#include <map>
#include <string>
#include <vector>

#include "sessions/network/accept_loop.hpp"
#include "sessions/network/egress_lookup.hpp"
#include "sessions/network/host_addresses.hpp"
#include "sessions/network/proxy_request.hpp"
#include "sessions/network/tcp_relay.hpp"

namespace corral {

using boost::asio::ip::tcp;
using boost::system::error_code;

namespace {

constexpr size_t kRelayBuffer = 64 * 1024;
constexpr std::chrono::milliseconds kDrainBound{2000};

tcp::endpoint to_endpoint(const IpAddress& address, uint16_t port) {
    if (address.family == AF_INET) {
        boost::asio::ip::address_v4::bytes_type bytes;
        std::copy_n(address.bytes.begin(), 4, bytes.begin());
        return {boost::asio::ip::address_v4(bytes), port};
    }
    boost::asio::ip::address_v6::bytes_type bytes;
    std::copy_n(address.bytes.begin(), 16, bytes.begin());
    return {boost::asio::ip::address_v6(bytes), port};
}

std::string reply(unsigned status, const char* reason, const std::string& body) {
    return "HTTP/1.1 " + std::to_string(status) + " " + reason +
           "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
}

}  // namespace

/// One client connection until it is refused or handed to a TcpRelay.
class ProxyConnection : public std::enable_shared_from_this<ProxyConnection> {
  public:
    ProxyConnection(std::shared_ptr<HttpEgressProxy::State> proxy, tcp::socket client);
    void start();
    void close();

  private:
    void on_head(const error_code& error, size_t length);
    void judge();
    void resolve_and_connect(bool name_allowed);
    void filter_and_connect(const std::vector<IpAddress>& addresses, bool name_allowed,
                            bool pinned);
    void connect(size_t index);
    void on_connected();
    void refuse(const std::string& rule);
    void fail(unsigned status, const char* reason, const std::string& message);
    void finish(std::string response);
    void drain();
    void drain_some();

    std::shared_ptr<HttpEgressProxy::State> proxy_;
    tcp::socket client_;
    tcp::socket upstream_;
    std::shared_ptr<EgressLookup> lookup_;
    boost::asio::steady_timer timer_;
    std::string buffer_;
    std::string leftover_;
    ProxyRequest request_;
    std::shared_ptr<const EgressRules> rules_;
    std::vector<IpAddress> candidates_;
    std::string last_connect_error_;
    bool closed_ = false;
    bool answered_ = false;  ///< an error answer is on its way; the head read is over
};

struct HttpEgressProxy::State : std::enable_shared_from_this<State> {
    State(boost::asio::io_context& io, std::shared_ptr<EgressGate> gate, HttpProxyLimits limits)
        : io(io), listener(io), gate(std::move(gate)), limits(limits) {}

    void on_accepted(tcp::socket client);
    void stop();
    size_t open() const { return connections.size() + relays.size(); }

    boost::asio::io_context& io;
    AcceptLoop listener;
    std::shared_ptr<EgressGate> gate;
    HttpProxyLimits limits;
    std::map<ProxyConnection*, std::shared_ptr<ProxyConnection>> connections;
    std::map<TcpRelay*, std::shared_ptr<TcpRelay>> relays;
    bool stopped = false;
};

void HttpEgressProxy::State::on_accepted(tcp::socket client) {
    if (open() >= limits.max_connections) {
        // Over the cap: a short answer, written without waiting (it fits the socket buffer).
        const std::string busy =
            reply(503, "Service Unavailable",
                  "corral egress: too many open proxy connections in this session (" +
                      std::to_string(limits.max_connections) + ")\n");
        error_code ignored;
        boost::asio::write(client, boost::asio::buffer(busy), ignored);
        client.close(ignored);
        return;
    }
    auto connection = std::make_shared<ProxyConnection>(shared_from_this(), std::move(client));
    connections.emplace(connection.get(), connection);
    connection->start();
}

void HttpEgressProxy::State::stop() {
    if (stopped) return;
    stopped = true;
    error_code ignored;
    listener.stop();
    auto pending = std::move(connections);
    connections.clear();
    for (auto& [key, connection] : pending) connection->close();
    auto open_relays = std::move(relays);
    relays.clear();
    for (auto& [key, relay] : open_relays) relay->close();
}

ProxyConnection::ProxyConnection(std::shared_ptr<HttpEgressProxy::State> proxy, tcp::socket client)
    : proxy_(std::move(proxy)),
      client_(std::move(client)),
      upstream_(proxy_->io),
      lookup_(std::make_shared<EgressLookup>(proxy_->io)),
      timer_(proxy_->io) {}

void ProxyConnection::start() {
    timer_.expires_after(proxy_->limits.head_timeout);
    timer_.async_wait([self = shared_from_this()](const error_code& error) {
        if (error || self->closed_) return;
        self->fail(408, "Request Timeout", "the request head did not arrive in time");
    });
    boost::asio::async_read_until(
        client_, boost::asio::dynamic_buffer(buffer_, proxy_->limits.max_head_bytes), "\r\n\r\n",
        [self = shared_from_this()](const error_code& error, size_t length) {
            self->on_head(error, length);
        });
}

void ProxyConnection::on_head(const error_code& error, size_t length) {
    if (closed_ || answered_) return;
    if (error == boost::asio::error::not_found)
        return fail(431, "Request Header Fields Too Large",
                    "the request head is larger than " +
                        std::to_string(proxy_->limits.max_head_bytes) + " bytes");
    if (error) return close();
    timer_.cancel();
    leftover_ = buffer_.substr(length);
    auto parsed = parse_proxy_request(std::string_view(buffer_).substr(0, length));
    if (!parsed) return fail(400, "Bad Request", parsed.error().message);
    request_ = std::move(*parsed);
    judge();
}

void ProxyConnection::judge() {
    rules_ = proxy_->gate->rules();
    const ProxyAuthority& target = request_.authority;
    if (target.address) {
        const EgressVerdict verdict = rules_->check_address(
            *target.address, target.port, false, false, is_host_address(*target.address));
        if (!verdict.allowed) return refuse(verdict.rule);
        candidates_ = {*target.address};
        return connect(0);
    }
    const EgressVerdict verdict = rules_->check_name(target.host);
    // A refused name that no CIDR rule could rescue is refused without asking DNS: the lookup
    // itself would tell a resolver outside what the sandbox wanted.
    if (!verdict.allowed && !rules_->names_reach_cidrs()) return refuse(verdict.rule);
    resolve_and_connect(verdict.allowed);
}

void ProxyConnection::resolve_and_connect(bool name_allowed) {
    const ProxyAuthority& target = request_.authority;
    lookup_->start(proxy_->gate->hosts(), target.host, target.port, AF_UNSPEC,
                   proxy_->limits.connect_timeout,
                   [self = shared_from_this(), name_allowed](EgressLookupResult result) {
                       if (self->closed_) return;
                       if (!result.error.empty())
                           return self->fail(502, "Bad Gateway",
                                             "cannot resolve `" + self->request_.authority.host +
                                                 "`: " + result.error);
                       self->filter_and_connect(result.addresses, name_allowed, result.pinned);
                   });
}

void ProxyConnection::filter_and_connect(const std::vector<IpAddress>& addresses,
                                         bool name_allowed, bool pinned) {
    std::string first_refusal;
    for (const auto& address : addresses) {
        const EgressVerdict verdict =
            rules_->check_address(address, request_.authority.port, name_allowed, pinned,
                                  is_host_address(address));
        if (verdict.allowed) {
            candidates_.push_back(address);
        } else if (first_refusal.empty()) {
            first_refusal = "it resolves to " + address.to_string() + ": " + verdict.rule;
        }
    }
    if (candidates_.empty())
        return refuse(first_refusal.empty() ? "it resolves to no address" : first_refusal);
    connect(0);
}

void ProxyConnection::connect(size_t index) {
    if (index >= candidates_.size())
        return fail(502, "Bad Gateway",
                    "cannot connect to " + request_.authority.text() + ": " + last_connect_error_);
    const tcp::endpoint endpoint = to_endpoint(candidates_[index], request_.authority.port);
    error_code ignored;
    upstream_.close(ignored);
    timer_.expires_after(proxy_->limits.connect_timeout);
    timer_.async_wait([self = shared_from_this()](const error_code& error) {
        if (!error && !self->closed_) {
            error_code ignored;
            self->upstream_.cancel(ignored);
        }
    });
    // Made on the event loop's thread: in the daemon's network namespace, not the session's.
    upstream_.async_connect(endpoint, [self = shared_from_this(), index,
                                       endpoint](const error_code& error) {
        if (self->closed_) return;
        self->timer_.cancel();
        if (error) {
            self->last_connect_error_ = endpoint.address().to_string() + ": " + error.message();
            return self->connect(index + 1);
        }
        self->on_connected();
    });
}

void ProxyConnection::on_connected() {
    // The client's first bytes to the origin: for CONNECT whatever it sent after the head (a
    // TLS ClientHello sent early), for a plain request the rewritten head and any body bytes.
    auto to_origin = std::make_shared<std::string>(
        request_.is_connect() ? leftover_ : origin_request_head(request_) + leftover_);
    auto to_client = std::make_shared<std::string>(
        request_.is_connect() ? "HTTP/1.1 200 Connection established\r\n\r\n" : "");
    auto self = shared_from_this();
    auto hand_over = [self, to_origin, to_client] {
        if (self->closed_) return;
        auto proxy = self->proxy_;
        std::weak_ptr<HttpEgressProxy::State> weak = proxy;
        auto relay = std::make_shared<TcpRelay>(std::move(self->client_),
                                                std::move(self->upstream_), kRelayBuffer,
                                                [weak](TcpRelay& relay) {
                                                    if (auto state = weak.lock())
                                                        state->relays.erase(&relay);
                                                });
        self->closed_ = true;
        proxy->connections.erase(self.get());
        if (proxy->stopped) return relay->close();
        relay->set_idle_limit(proxy->gate->tunnel_idle());
        proxy->relays.emplace(relay.get(), relay);
        relay->start();
    };
    boost::asio::async_write(
        client_, boost::asio::buffer(*to_client),
        [self, to_origin, to_client, hand_over](const error_code& error, size_t) {
            if (self->closed_) return;
            if (error) return self->close();
            boost::asio::async_write(self->upstream_, boost::asio::buffer(*to_origin),
                                     [self, to_origin, hand_over](const error_code& error, size_t) {
                                         if (self->closed_) return;
                                         if (error) return self->close();
                                         hand_over();
                                     });
        });
}

void ProxyConnection::refuse(const std::string& rule) {
    const std::string destination = request_.authority.text();
    proxy_->gate->refuse(destination, rule);
    finish(reply(403, "Forbidden",
                 "corral egress: connection to " + destination + " refused: " + rule + "\n"));
}

void ProxyConnection::fail(unsigned status, const char* reason, const std::string& message) {
    finish(reply(status, reason, "corral egress: " + message + "\n"));
}

void ProxyConnection::finish(std::string response) {
    auto text = std::make_shared<std::string>(std::move(response));
    timer_.cancel();
    // A head that timed out still has its read pending: end it (its handler sees answered_).
    answered_ = true;
    error_code ignored;
    client_.cancel(ignored);
    boost::asio::async_write(client_, boost::asio::buffer(*text),
                             [self = shared_from_this(), text](const error_code& error, size_t) {
                                 if (self->closed_) return;
                                 if (error) return self->close();
                                 error_code ignored;
                                 self->client_.shutdown(tcp::socket::shutdown_send, ignored);
                                 self->drain();
                             });
}

// Closing a socket with unread bytes sends RST, which can destroy the answer before the client
// read it (a client still sending its body or an oversized head). So after answering, read and
// drop what the client still sends until it closes, for a bounded time.
void ProxyConnection::drain() {
    timer_.expires_after(kDrainBound);
    timer_.async_wait([self = shared_from_this()](const error_code& error) {
        if (!error) self->close();
    });
    drain_some();
}

void ProxyConnection::drain_some() {
    auto scratch = std::make_shared<std::array<char, 4096>>();
    client_.async_read_some(boost::asio::buffer(*scratch),
                            [self = shared_from_this(), scratch](const error_code& error, size_t) {
                                if (self->closed_) return;
                                if (error) return self->close();
                                self->drain_some();
                            });
}

void ProxyConnection::close() {
    if (closed_) return;
    closed_ = true;
    error_code ignored;
    timer_.cancel();
    lookup_->cancel();
    client_.close(ignored);
    upstream_.close(ignored);
    proxy_->connections.erase(this);  // may destroy *this: nothing after
}

HttpEgressProxy::HttpEgressProxy(std::shared_ptr<State> state, uint16_t port)
    : state_(std::move(state)), port_(port) {}

HttpEgressProxy::~HttpEgressProxy() {
    stop();
}

void HttpEgressProxy::stop() {
    if (state_) state_->stop();
}

size_t HttpEgressProxy::connection_count() const {
    return state_->open();
}

Result<std::unique_ptr<HttpEgressProxy>> HttpEgressProxy::start(
    boost::asio::io_context& io, const std::shared_ptr<NetnsRunner>& netns,
    std::shared_ptr<EgressGate> gate, HttpProxyLimits limits, uint16_t port) {
    auto listener = netns->tcp_listener({AF_INET, "127.0.0.1", port});
    if (!listener) return std::move(listener.error().context("egress proxy: listen inside"));
    sockaddr_in bound{};
    socklen_t length = sizeof bound;
    if (::getsockname(listener->get(), reinterpret_cast<sockaddr*>(&bound), &length) != 0)
        return sys_error("egress proxy: getsockname");
    auto state = std::make_shared<State>(io, std::move(gate), limits);
    if (auto adopted = state->listener.adopt(std::move(*listener), AF_INET, "egress proxy");
        !adopted)
        return std::move(adopted.error());
    state->listener.start(state, [raw = state.get()](tcp::socket client) {
        raw->on_accepted(std::move(client));
    });
    return std::make_unique<HttpEgressProxy>(std::move(state), ntohs(bound.sin_port));
}

}  // namespace corral
