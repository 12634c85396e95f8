#include "sessions/network/dns_resolver.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <map>
#include <set>
#include <span>

#include "base/loop_scratch.hpp"
#include "sessions/network/accept_loop.hpp"
#include "sessions/network/dns_message.hpp"
#include "sessions/network/egress_lookup.hpp"
#include "sessions/network/host_addresses.hpp"
#include "sessions/network/socket_address.hpp"

namespace corral {

using boost::asio::ip::tcp;
using boost::asio::ip::udp;
using boost::system::error_code;

namespace {


/// Where an answer goes: a UDP sender or a TCP connection. An empty answer means "send
/// nothing" (a response or a runt datagram; a TCP connection is closed then).
using Reply = std::function<void(std::vector<uint8_t>)>;

Result<UniqueFd> make_udp_socket(const SocketAddress& address) {
    auto kernel_address = to_kernel_address(address);
    if (address.family != AF_INET || !kernel_address)
        return sys_error(EINVAL, "resolver address `" + address.address + "` is not IPv4");
    UniqueFd fd(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (!fd) return sys_error("udp socket");
    // No SO_REUSEADDR/SO_REUSEPORT: nothing in the sandbox may bind beside us and take queries.
    if (::bind(fd.get(), kernel_address->get(), kernel_address->length) != 0)
        return sys_error("bind udp " + describe(address));
    return fd;
}

/// Datagrams served per wake-up of one resolver before it waits again: others' turn comes.
constexpr int kDatagramsPerWake = 16;

// Every session's UDP resolver receives into the loop's scratch buffer (base/loop_scratch.hpp):
// each datagram is parsed (dns::Query owns what it keeps) before the next is received.
static_assert(kLoopScratchBytes >= dns::kMaxMessage);

}  // namespace

class DnsTcpConnection;

struct SessionResolver::State : std::enable_shared_from_this<State> {
    State(boost::asio::io_context& io, std::shared_ptr<EgressGate> gate, GrantHandler grant,
          DnsResolverLimits limits)
        : io(io),
          udp_socket(io),
          listener(io),
          gate(std::move(gate)),
          grant(std::move(grant)),
          limits(limits) {}

    void receive_next();
    void serve_waiting_datagrams();
    void on_accepted(tcp::socket client);
    void handle(std::span<const uint8_t> message, bool over_tcp, Reply reply);
    void answer(const dns::Query& query, size_t limit, Reply reply);
    void stop();

    boost::asio::io_context& io;
    udp::socket udp_socket;
    AcceptLoop listener;
    std::shared_ptr<EgressGate> gate;
    GrantHandler grant;
    DnsResolverLimits limits;
    std::set<std::shared_ptr<EgressLookup>> lookups;
    std::map<DnsTcpConnection*, std::shared_ptr<DnsTcpConnection>> connections;
    uint64_t answered = 0;
    bool stopped = false;
};

/// One TCP client: 2-byte length, message, answer; one query at a time (RFC 7766 framing).
class DnsTcpConnection : public std::enable_shared_from_this<DnsTcpConnection> {
  public:
    DnsTcpConnection(std::shared_ptr<SessionResolver::State> resolver, tcp::socket socket)
        : resolver_(std::move(resolver)), socket_(std::move(socket)), idle_(resolver_->io) {}

    void read_next() {
        arm_idle();
        boost::asio::async_read(socket_, boost::asio::buffer(length_),
                                [self = shared_from_this()](const error_code& error, size_t) {
                                    if (self->closed_) return;
                                    if (error) return self->close();
                                    const size_t length =
                                        size_t(self->length_[0]) << 8 | self->length_[1];
                                    if (length < dns::kHeaderBytes) return self->close();
                                    self->read_message(length);
                                });
    }

    void close() {
        if (closed_) return;
        closed_ = true;
        error_code ignored;
        idle_.cancel();
        socket_.close(ignored);
        resolver_->connections.erase(this);  // may destroy *this: nothing after
    }

  private:
    void arm_idle() {
        idle_.expires_after(resolver_->limits.tcp_idle);
        idle_.async_wait([self = shared_from_this()](const error_code& error) {
            if (!error) self->close();
        });
    }

    void read_message(size_t length) {
        message_.resize(length);
        boost::asio::async_read(socket_, boost::asio::buffer(message_),
                                [self = shared_from_this()](const error_code& error, size_t) {
                                    if (self->closed_) return;
                                    if (error) return self->close();
                                    // No idle limit while the daemon looks the name up (the lookup
                                    // has its own).
                                    self->idle_.cancel();
                                    self->resolver_->handle(self->message_, true,
                                                            [self](std::vector<uint8_t> answer) {
                                                                self->write(std::move(answer));
                                                            });
                                });
    }

    void write(std::vector<uint8_t> answer) {
        if (closed_) return;
        if (answer.empty()) return close();
        out_.clear();
        out_.push_back(static_cast<uint8_t>(answer.size() >> 8));
        out_.push_back(static_cast<uint8_t>(answer.size()));
        out_.insert(out_.end(), answer.begin(), answer.end());
        arm_idle();  // a client that never reads its answer is closed like an idle one
        boost::asio::async_write(socket_, boost::asio::buffer(out_),
                                 [self = shared_from_this()](const error_code& error, size_t) {
                                     if (self->closed_) return;
                                     if (error) return self->close();
                                     self->read_next();
                                 });
    }

    std::shared_ptr<SessionResolver::State> resolver_;
    tcp::socket socket_;
    boost::asio::steady_timer idle_;
    std::array<uint8_t, 2> length_{};
    std::vector<uint8_t> message_;
    std::vector<uint8_t> out_;
    bool closed_ = false;
};

void SessionResolver::State::receive_next() {
    // Wait for readability, not for a datagram: a pending receive would need a buffer of its own.
    udp_socket.async_wait(udp::socket::wait_read, [self = shared_from_this()](const error_code&) {
        if (self->stopped || !self->udp_socket.is_open()) return;
        self->serve_waiting_datagrams();
        if (!self->stopped) self->receive_next();
    });
}

void SessionResolver::State::serve_waiting_datagrams() {
    // Room for the largest DNS message (64 KiB), and so for any UDP datagram (65,507 bytes).
    const std::span<std::byte> buffer = loop_scratch().first(dns::kMaxMessage);
    for (int served = 0; served < kDatagramsPerWake && !stopped; ++served) {
        udp::endpoint sender;
        error_code error;
        const size_t length = udp_socket.receive_from(
            boost::asio::buffer(buffer.data(), buffer.size()), sender, 0, error);
        if (error == boost::asio::error::would_block || error == boost::asio::error::try_again)
            return;
        // Errors on a UDP socket are per datagram (an ICMP error for an earlier answer): the
        // next one is served all the same.
        if (error) continue;
        handle({reinterpret_cast<const uint8_t*>(buffer.data()), length}, false,
               [self = shared_from_this(), sender](std::vector<uint8_t> answer) {
                   if (answer.empty() || self->stopped) return;
                   // Non-blocking: when the socket buffer is full the answer is dropped (the
                   // client asks again), never queued without bound.
                   error_code ignored;
                   self->udp_socket.send_to(boost::asio::buffer(answer), sender, 0, ignored);
               });
    }
}

void SessionResolver::State::on_accepted(tcp::socket client) {
    if (connections.size() >= limits.max_tcp_connections) {
        error_code ignored;
        client.close(ignored);
        return;
    }
    auto connection = std::make_shared<DnsTcpConnection>(shared_from_this(), std::move(client));
    connections.emplace(connection.get(), connection);
    connection->read_next();
}

void SessionResolver::State::handle(std::span<const uint8_t> message, bool over_tcp, Reply reply) {
    auto parsed = dns::parse_query(message);
    if (!parsed.query) {
        if (parsed.failure.drop) return reply({});
        ++answered;
        return reply(dns::build_failure(parsed.failure));
    }
    answer(*parsed.query, over_tcp ? dns::kMaxMessage : dns::udp_answer_limit(*parsed.query),
           std::move(reply));
}

void SessionResolver::State::answer(const dns::Query& query, size_t limit, Reply reply) {
    const uint32_t ttl = static_cast<uint32_t>(limits.answer_ttl.count());
    auto send = [self = shared_from_this(), query, limit, ttl, reply](
                    dns::Rcode rcode, const std::vector<IpAddress>& addresses) {
        ++self->answered;
        reply(dns::build_answer(query, rcode, addresses, ttl, limit));
    };
    if (query.klass != dns::kClassIn) return send(dns::Rcode::notimp, {});
    if (query.name.empty()) return send(dns::Rcode::nxdomain, {});
    // The rules when the query arrived judge it to the end, as a proxy connection is judged.
    auto rules = gate->rules();
    const EgressVerdict verdict = rules->check_name(query.name);
    // Refused without a lookup: the query itself would tell a resolver outside what the sandbox
    // wanted. As through the proxy, a name allowedCIDRs could still open is looked up.
    if (!verdict.allowed && !rules->names_reach_cidrs()) {
        gate->refuse(query.name + " (DNS)", verdict.rule);
        return send(dns::Rcode::nxdomain, {});
    }
    // AAAA: empty, the transparent path is IPv4-only (see the header). Other types: empty.
    if (query.type != dns::kTypeA) return send(dns::Rcode::noerror, {});
    if (lookups.size() >= limits.max_pending_lookups) return send(dns::Rcode::servfail, {});
    auto lookup = std::make_shared<EgressLookup>(io);
    lookups.insert(lookup);
    const bool name_allowed = verdict.allowed;
    lookup->start(
        gate->hosts(), query.name, 0, AF_INET, limits.lookup_timeout,
        [self = shared_from_this(), lookup, query, rules, name_allowed,
         send](EgressLookupResult result) {
            self->lookups.erase(lookup);
            if (self->stopped) return;
            if (!result.error.empty())
                return send(result.not_found ? dns::Rcode::nxdomain : dns::Rcode::servfail, {});
            std::vector<IpAddress> passed;
            std::string first_refusal;
            for (const auto& address : result.addresses) {
                const EgressVerdict check =
                    rules->check_address(address, 0, name_allowed, result.pinned,
                                         is_host_address(address));
                if (check.allowed) {
                    passed.push_back(address);
                } else if (first_refusal.empty()) {
                    first_refusal = "it resolves to " + address.to_string() + ": " + check.rule;
                }
            }
            if (passed.empty()) {
                self->gate->refuse(query.name + " (DNS)", first_refusal);
                return send(dns::Rcode::nxdomain, {});
            }
            if (name_allowed && self->grant)
                self->grant(query.name, result.pinned, passed,
                            self->limits.answer_ttl + self->limits.allowance_grace);
            send(dns::Rcode::noerror, passed);
        });
}

void SessionResolver::State::stop() {
    if (stopped) return;
    stopped = true;
    error_code ignored;
    udp_socket.close(ignored);
    listener.stop();
    auto pending = std::move(lookups);
    lookups.clear();
    for (const auto& lookup : pending) lookup->cancel();
    auto open = std::move(connections);
    connections.clear();
    for (auto& [key, connection] : open) connection->close();
}

SessionResolver::SessionResolver(std::shared_ptr<State> state, uint16_t port)
    : state_(std::move(state)), port_(port) {}

SessionResolver::~SessionResolver() {
    stop();
}

void SessionResolver::stop() {
    if (state_) state_->stop();
}

uint64_t SessionResolver::answered() const {
    return state_->answered;
}

size_t SessionResolver::tcp_connections() const {
    return state_->connections.size();
}

Result<std::unique_ptr<SessionResolver>> SessionResolver::start(
    boost::asio::io_context& io, const std::shared_ptr<NetnsRunner>& netns,
    std::shared_ptr<EgressGate> gate, GrantHandler grant, DnsResolverLimits limits,
    SocketAddress address) {
    auto datagram = netns->run([address] { return make_udp_socket(address); });
    if (!datagram) return std::move(datagram.error().context("session resolver: listen inside"));
    sockaddr_in bound{};
    socklen_t length = sizeof bound;
    if (::getsockname(datagram->get(), reinterpret_cast<sockaddr*>(&bound), &length) != 0)
        return sys_error("session resolver: getsockname");
    // TCP on the same port (a test may ask for port 0: the kernel's choice for UDP, then TCP).
    SocketAddress stream = address;
    stream.port = ntohs(bound.sin_port);
    auto listener = netns->tcp_listener(stream);
    if (!listener) return std::move(listener.error().context("session resolver: listen inside"));
    auto state = std::make_shared<State>(io, std::move(gate), std::move(grant), limits);
    error_code error;
    const int udp_fd = datagram->release();
    state->udp_socket.assign(udp::v4(), udp_fd, error);
    if (error) {
        ::close(udp_fd);
        return sys_error(error.value(), "session resolver: adopt the udp socket");
    }
    state->udp_socket.non_blocking(true, error);
    if (auto adopted = state->listener.adopt(std::move(*listener), AF_INET, "session resolver");
        !adopted)
        return std::move(adopted.error());
    state->receive_next();
    state->listener.start(state, [raw = state.get()](tcp::socket client) {
        raw->on_accepted(std::move(client));
    });
    return std::make_unique<SessionResolver>(std::move(state), stream.port);
}

}  // namespace corral
