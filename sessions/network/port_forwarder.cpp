#include "sessions/network/port_forwarder.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/ip/tcp.hpp>
#include <map>

#include "sessions/network/accept_loop.hpp"
#include "sessions/network/tcp_relay.hpp"

namespace corral {

using boost::asio::ip::tcp;
using boost::system::error_code;

namespace {

/// The address of a forwarding target as Asio's endpoint.
tcp::endpoint to_endpoint(const SocketAddress& address) {
    return tcp::endpoint(boost::asio::ip::make_address(address.address), address.port);
}

/// Family and port of a bound socket.
Result<std::pair<int, uint16_t>> bound_address(int fd) {
    sockaddr_storage storage{};
    socklen_t length = sizeof storage;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&storage), &length) != 0)
        return sys_error("getsockname of the listener");
    if (storage.ss_family == AF_INET)
        return std::pair<int, uint16_t>{AF_INET,
                                        ntohs(reinterpret_cast<sockaddr_in*>(&storage)->sin_port)};
    if (storage.ss_family == AF_INET6)
        return std::pair<int, uint16_t>{
            AF_INET6, ntohs(reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port)};
    return sys_error(EAFNOSUPPORT, "listener is not a TCP/IP socket");
}

}  // namespace

struct PortForwarder::State : std::enable_shared_from_this<State> {
    State(boost::asio::io_context& io, SocketMaker make_socket, std::vector<SocketAddress> targets)
        : io(io),
          listener(io),
          make_socket(std::move(make_socket)),
          targets(std::move(targets)) {}

    void on_accepted(tcp::socket client);
    void connect(const std::shared_ptr<TcpRelay>& relay, size_t target);
    void stop();

    boost::asio::io_context& io;
    AcceptLoop listener;
    SocketMaker make_socket;
    std::vector<SocketAddress> targets;
    std::map<TcpRelay*, std::shared_ptr<TcpRelay>> relays;
    uint64_t accepted = 0;
    bool stopped = false;
};

void PortForwarder::State::on_accepted(tcp::socket client) {
    ++accepted;
    std::weak_ptr<State> weak = shared_from_this();
    auto forget = [weak](TcpRelay& relay) {
        if (auto self = weak.lock()) self->relays.erase(&relay);
    };
    auto relay = std::make_shared<TcpRelay>(std::move(client), tcp::socket(io), kBufferSize,
                                            std::move(forget));
    relays.emplace(relay.get(), relay);
    connect(relay, 0);
}

void PortForwarder::State::connect(const std::shared_ptr<TcpRelay>& relay, size_t target) {
    // Nothing (more) to try, or no socket to try with: the client sees its connection closed.
    if (target >= targets.size()) return relay->close();
    auto fd = make_socket(targets[target].family);
    if (!fd) return relay->close();
    tcp::endpoint endpoint = to_endpoint(targets[target]);
    error_code error;
    relay->second().close(error);
    int raw = fd->release();
    relay->second().assign(endpoint.protocol(), raw, error);
    if (error) {
        ::close(raw);
        return relay->close();
    }
    relay->second().async_connect(
        endpoint, [self = shared_from_this(), relay, target](const error_code& error) {
            if (relay->closed()) return;
            if (error) return self->connect(relay, target + 1);
            relay->start();
        });
}

void PortForwarder::State::stop() {
    if (stopped) return;
    stopped = true;
    error_code ignored;
    listener.stop();
    auto open = std::move(relays);
    relays.clear();
    for (auto& [key, relay] : open) relay->close();
}

PortForwarder::PortForwarder(std::shared_ptr<State> state, uint16_t port)
    : state_(std::move(state)), listen_port_(port) {}

PortForwarder::~PortForwarder() {
    stop();
}

void PortForwarder::stop() {
    if (state_) state_->stop();
}

size_t PortForwarder::connection_count() const {
    return state_->relays.size();
}

uint64_t PortForwarder::accepted_count() const {
    return state_->accepted;
}

Result<std::unique_ptr<PortForwarder>> PortForwarder::create(boost::asio::io_context& io,
                                                             UniqueFd listener,
                                                             SocketMaker make_socket,
                                                             std::vector<SocketAddress> targets) {
    auto bound = bound_address(listener.get());
    if (!bound) return std::move(bound.error());
    auto state = std::make_shared<State>(io, std::move(make_socket), std::move(targets));
    if (auto adopted = state->listener.adopt(std::move(listener), bound->first, "port forwarder");
        !adopted)
        return std::move(adopted.error());
    state->listener.start(state, [raw = state.get()](tcp::socket client) {
        raw->on_accepted(std::move(client));
    });
    return std::unique_ptr<PortForwarder>(new PortForwarder(std::move(state), bound->second));
}

Result<std::unique_ptr<PortForwarder>> PortForwarder::into_namespace(
    boost::asio::io_context& io, std::shared_ptr<NetnsRunner> netns, uint16_t host_port,
    uint16_t inside_port) {
    auto listener = make_tcp_listener({AF_INET, "127.0.0.1", host_port});
    if (!listener) return std::move(listener.error().context("forward port"));
    SocketMaker inside = [netns = std::move(netns)](int family) {
        return netns->tcp_socket(family);
    };
    std::vector<SocketAddress> targets{{AF_INET, "127.0.0.1", inside_port},
                                       {AF_INET6, "::1", inside_port}};
    return create(io, std::move(*listener), std::move(inside), std::move(targets));
}

Result<std::unique_ptr<PortForwarder>> PortForwarder::out_of_namespace(
    boost::asio::io_context& io, const std::shared_ptr<NetnsRunner>& netns,
    const SocketAddress& inside, const SocketAddress& host_target) {
    auto listener = netns->tcp_listener(inside);
    if (!listener) return std::move(listener.error().context("listen inside the namespace"));
    return create(io, std::move(*listener), make_tcp_socket, {host_target});
}

}  // namespace corral
