#include "sessions/network/transparent_relay.hpp"

#include <linux/netfilter_ipv4.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <map>

#include "sessions/network/accept_loop.hpp"
#include "sessions/network/refusal_log.hpp"
#include "sessions/network/tcp_relay.hpp"

namespace corral {

using boost::asio::ip::tcp;
using boost::system::error_code;

namespace {

constexpr size_t kRelayBuffer = 64 * 1024;
constexpr std::chrono::milliseconds kConnectTimeout{10000};

/// Closes with a reset: the program learns at once that there is nothing there.
void reset(tcp::socket& socket) {
    error_code ignored;
    socket.set_option(boost::asio::socket_base::linger(true, 0), ignored);
    socket.close(ignored);
}

}  // namespace

struct TransparentRelay::State : std::enable_shared_from_this<State> {
    State(boost::asio::io_context& io, std::shared_ptr<EgressGate> gate, size_t max_connections)
        : io(io), listener(io), gate(std::move(gate)), max(max_connections) {}

    void on_accepted(tcp::socket client);
    /// The namespace's rules reset a SYN to `address`:`port` (RefusalLog); nullopt: some such
    /// reports were lost.
    void on_refused(const std::optional<IpAddress>& address, uint16_t port);
    void stop();

    boost::asio::io_context& io;
    AcceptLoop listener;
    std::shared_ptr<EgressGate> gate;
    size_t max;
    size_t connecting = 0;
    std::map<TcpRelay*, std::shared_ptr<TcpRelay>> relays;
    std::unique_ptr<RefusalLog> refusals;
    bool stopped = false;
};

void TransparentRelay::State::on_refused(const std::optional<IpAddress>& address, uint16_t port) {
    if (!address)
        return gate->refuse("unknown destinations (direct TCP)",
                            "refused in the namespace; the kernel's reports overflowed the "
                            "daemon's buffer, so the count is short");
    // The kernel said no; the rules say why (a PATCH racing the SYN aside), asked only when the
    // refusal is logged.
    gate->refuse_described([&] {
        const EgressVerdict verdict = gate->check_direct(*address, port);
        return std::pair<std::string, std::string>(
            address->to_string() + ":" + std::to_string(port) + " (direct TCP)",
            verdict.allowed ? "not open to direct TCP when it was tried" : verdict.rule);
    });
}

void TransparentRelay::State::on_accepted(tcp::socket client) {
    sockaddr_in original{};
    socklen_t length = sizeof original;
    if (::getsockopt(client.native_handle(), SOL_IP, SO_ORIGINAL_DST, &original, &length) != 0)
        return reset(client);  // not redirected to us: someone dialled the relay port itself
    const IpAddress address = IpAddress::from_bytes(AF_INET, &original.sin_addr);
    const uint16_t port = ntohs(original.sin_port);
    const std::string destination = address.to_string() + ":" + std::to_string(port);
    if (relays.size() + connecting >= max) {
        gate->refuse(destination + " (direct TCP)", "too many open connections");
        return reset(client);
    }
    const EgressVerdict verdict = gate->check_direct(address, port);
    if (!verdict.allowed) {
        gate->refuse(destination + " (direct TCP)", verdict.rule);
        return reset(client);
    }
    std::weak_ptr<State> weak = shared_from_this();
    auto relay = std::make_shared<TcpRelay>(std::move(client), tcp::socket(io), kRelayBuffer,
                                            [weak](TcpRelay& relay) {
                                                if (auto self = weak.lock())
                                                    self->relays.erase(&relay);
                                            });
    relay->set_idle_limit(gate->tunnel_idle());
    relays.emplace(relay.get(), relay);
    auto timer = std::make_shared<boost::asio::steady_timer>(io, kConnectTimeout);
    timer->async_wait([relay](const error_code& error) {
        if (!error && !relay->closed()) {
            error_code ignored;
            relay->second().cancel(ignored);
        }
    });
    // Made on the event loop's thread: from the daemon's namespace, never the session's.
    const tcp::endpoint endpoint(boost::asio::ip::make_address_v4(address.to_string()), port);
    relay->second().async_connect(endpoint, [relay, timer](const error_code& error) {
        timer->cancel();
        if (relay->closed()) return;
        if (error) return relay->close();
        relay->start();
    });
}

void TransparentRelay::State::stop() {
    if (stopped) return;
    stopped = true;
    error_code ignored;
    listener.stop();
    if (refusals) refusals->stop();
    auto open = std::move(relays);
    relays.clear();
    for (auto& [key, relay] : open) relay->close();
}

TransparentRelay::TransparentRelay(std::shared_ptr<State> state, std::shared_ptr<NetnsRunner> netns,
                                   uint16_t port)
    : state_(std::move(state)), netns_(std::move(netns)), port_(port) {}

TransparentRelay::~TransparentRelay() {
    stop();
}

void TransparentRelay::stop() {
    if (state_) state_->stop();
}

size_t TransparentRelay::connection_count() const {
    return state_->relays.size();
}

Status TransparentRelay::apply(const EgressSpec& spec) {
    TransparentPlan next = plan_transparent_egress(spec, port_);
    if (next.named) next.named_addresses = state_->gate->allowances().addresses();
    const TransparentPlan previous = applied_;
    auto done = netns_->run([&]() -> Result<UniqueFd> {
        if (auto status = apply_transparent_egress(previous, next); !status)
            return std::move(status.error());
        return UniqueFd();
    });
    if (!done) return std::move(done.error().context("transparent egress"));
    // The table was re-created with the set's elements; their routes (outside loopback) were
    // added on grant and are kept across plans, but re-added in case the new plan is the first
    // with a table (the addresses were granted while the plan had none, e.g. under deny-all).
    const bool first = next.named && !applied_.named;
    applied_ = std::move(next);
    if (first) return change_named(applied_.named_addresses, {});
    return {};
}

Status TransparentRelay::change_named(const std::vector<IpAddress>& added,
                                      const std::vector<IpAddress>& removed) {
    if (!applied_.named || (added.empty() && removed.empty())) return {};
    const std::vector<Cidr> keep = applied_.routes;
    auto done = netns_->run([&]() -> Result<UniqueFd> {
        if (auto status = change_named_addresses(added, removed, keep); !status)
            return std::move(status.error());
        return UniqueFd();
    });
    if (!done) return std::move(done.error().context("name-bound egress"));
    return {};
}

Result<std::unique_ptr<TransparentRelay>> TransparentRelay::start(
    boost::asio::io_context& io, std::shared_ptr<NetnsRunner> netns,
    std::shared_ptr<EgressGate> gate, size_t max_connections,
    const std::optional<EgressSpec>& left_by) {
    auto listener = netns->tcp_listener({AF_INET, "127.0.0.1", 0});
    if (!listener) return std::move(listener.error().context("transparent relay: listen inside"));
    sockaddr_in bound{};
    socklen_t length = sizeof bound;
    if (::getsockname(listener->get(), reinterpret_cast<sockaddr*>(&bound), &length) != 0)
        return sys_error("transparent relay: getsockname");
    const EgressSpec spec = gate->rules()->spec();
    auto state = std::make_shared<State>(io, std::move(gate), max_connections);
    // Bound before the rules that log to it exist, so no refusal goes unreported. Without it
    // (something in the namespace took the group) connections are refused all the same.
    std::weak_ptr<State> weak = state;
    auto refusals =
        RefusalLog::start(io, *netns, kRefusalLogGroup,
                          [weak](const std::optional<IpAddress>& address, uint16_t port) {
                              if (auto self = weak.lock(); self && !self->stopped)
                                  self->on_refused(address, port);
                          });
    if (refusals) {
        state->refusals = std::move(*refusals);
    } else {
        state->gate->log("direct TCP refusals will not be counted: " + refusals.error().describe());
    }
    if (auto adopted = state->listener.adopt(std::move(*listener), AF_INET, "transparent relay");
        !adopted)
        return std::move(adopted.error());
    auto relay = std::make_unique<TransparentRelay>(state, std::move(netns), ntohs(bound.sin_port));
    // What a previous run left (its table redirects to a relay port nobody serves now): the
    // first apply replaces it, and its routes, as it would replace this run's own.
    if (left_by) relay->applied_ = plan_transparent_egress(*left_by, 0);
    if (auto applied = relay->apply(spec); !applied) return std::move(applied.error());
    state->listener.start(state, [raw = state.get()](tcp::socket client) {
        raw->on_accepted(std::move(client));
    });
    return relay;
}

}  // namespace corral
