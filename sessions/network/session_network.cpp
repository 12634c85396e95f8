#include "sessions/network/session_network.hpp"

#include <sched.h>
#include <sys/socket.h>

namespace corral {

SessionNetwork::SessionNetwork(boost::asio::io_context& io, std::shared_ptr<NetnsRunner> netns)
    : io_(io), netns_(std::move(netns)), expiry_timer_(io) {}

SessionNetwork::~SessionNetwork() {
    alive_.reset();
    stop();
}

Result<std::unique_ptr<SessionNetwork>> SessionNetwork::create(
    boost::asio::io_context& io, const Sandbox& sandbox, const Policy& policy,
    const std::string& session_id, EgressEnvironment egress,
    const std::optional<NetworkLeftovers>& leftovers) {
    if (!sandbox.active() || !(sandbox.namespace_flags() & CLONE_NEWNET))
        return sys_error(EINVAL, "the session has no network namespace of its own");
    auto netns_fd = open_network_namespace(sandbox.holder_pid(), sandbox.holder_pidfd());
    if (!netns_fd) return std::move(netns_fd.error().context("network namespace"));
    auto thread = NetnsRunner::start(std::move(*netns_fd));
    if (!thread) return std::move(thread.error().context("network namespace"));
    auto network = std::make_unique<SessionNetwork>(io, std::move(*thread));
    if (!policy.network.allow.empty()) {
        auto egress = EgressProxy::start(io, network->netns_, policy.network.allow);
        if (!egress) return std::move(egress.error());
        network->egress_ = std::move(*egress);
    }
    auto rules = EgressRules::compile(policy.network.egress, policy.network.allow);
    if (!rules) return std::move(rules.error().context("network.egress"));
    network->allow_ = policy.network.allow;
    network->environment_ = egress;
    network->gate_ = std::make_shared<EgressGate>(session_id, std::move(*rules), std::move(egress));
    auto proxy = Result<std::unique_ptr<HttpEgressProxy>>(sys_error(ENOENT, "no proxy yet"));
    if (leftovers && leftovers->proxy_port != 0) {
        proxy =
            HttpEgressProxy::start(io, network->netns_, network->gate_, {}, leftovers->proxy_port);
        // Taken meanwhile by a program of the session itself: only processes started before the
        // restart, which hold the old address, lose their way out; new ones get the new port.
        if (!proxy)
            network->log("session " + session_id + ": egress proxy not back at port " +
                         std::to_string(leftovers->proxy_port) + ": " + proxy.error().describe() +
                         "; processes started before the restart lose their proxy");
    }
    if (!proxy) proxy = HttpEgressProxy::start(io, network->netns_, network->gate_);
    if (!proxy) return std::move(proxy.error());
    network->http_proxy_ = std::move(*proxy);
    // The transparent path is an addition to the proxy, not a condition for the session: on a
    // kernel without nf_tables the session still gets its proxy, and direct TCP stays refused.
    auto transparent = TransparentRelay::start(io, network->netns_, network->gate_, 256,
                                               leftovers ? leftovers->egress : std::nullopt);
    if (transparent) {
        network->transparent_ = std::move(*transparent);
    } else {
        network->transparent_error_ = transparent.error().describe();
        network->log("session " + session_id + ": no transparent egress path: " +
                     transparent.error().describe());
    }
    // DNS answers allowed names only; without it (port 53 taken inside, which a fresh namespace
    // never has) names still work through the proxy, so this is logged, not fatal.
    SessionNetwork* raw = network.get();
    DnsResolverLimits limits;
    limits.answer_ttl = network->environment_.dns_ttl;
    limits.allowance_grace = network->environment_.dns_grace;
    auto resolver = SessionResolver::start(
        io, network->netns_, network->gate_,
        [raw](const std::string& name, bool pinned, const std::vector<IpAddress>& addresses,
              std::chrono::seconds lifetime) {
            raw->grant_names(name, pinned, addresses, lifetime);
        },
        limits);
    if (resolver) {
        network->resolver_ = std::move(*resolver);
    } else {
        network->log("session " + session_id + ": no DNS resolver: " + resolver.error().describe());
    }
    return network;
}

void SessionNetwork::grant_names(const std::string& name, bool pinned,
                                 const std::vector<IpAddress>& addresses,
                                 std::chrono::seconds lifetime) {
    if (!gate_) return;
    NameAllowances& table = gate_->allowances();
    const auto now = std::chrono::steady_clock::now();
    std::vector<IpAddress> removed = table.expire(now);
    std::vector<IpAddress> added;
    for (const auto& address : addresses) {
        if (address.family != AF_INET) continue;  // the transparent path is IPv4-only
        auto change = table.grant(address, name, pinned, now + lifetime);
        added.insert(added.end(), change.added.begin(), change.added.end());
        removed.insert(removed.end(), change.dropped.begin(), change.dropped.end());
    }
    if (transparent_)
        if (auto changed = transparent_->change_named(added, removed); !changed)
            log("name-bound egress for `" + name + "` not opened: " + changed.error().describe());
    schedule_expiry();
}

void SessionNetwork::close_named(const std::vector<IpAddress>& addresses, const std::string& why) {
    if (!transparent_ || addresses.empty()) return;
    if (auto closed = transparent_->change_named({}, addresses); !closed)
        log(why + ", name-bound addresses not closed: " + closed.error().describe());
}

void SessionNetwork::close_expired() {
    if (!gate_) return;
    close_named(gate_->allowances().expire(std::chrono::steady_clock::now()),
                "DNS allowances expired");
    schedule_expiry();
}

void SessionNetwork::schedule_expiry() {
    if (!gate_ || !netns_) return;
    const auto next = gate_->allowances().next_expiry();
    if (next == expiry_armed_) return;  // already waiting for exactly that
    expiry_armed_ = next;
    if (!next) {
        expiry_timer_.cancel();
        return;
    }
    // On the loop: the handler only runs close_expired (a netlink/nft change on the NetnsRunner,
    // as every answer's grant does), so the loop never sleeps here.
    expiry_timer_.expires_at(*next);
    expiry_timer_.async_wait([this, alive = std::weak_ptr<int>(alive_)](
                                 const boost::system::error_code& error) {
        if (error || alive.expired()) return;
        expiry_armed_.reset();
        close_expired();
    });
}

Status SessionNetwork::forward(uint16_t port) {
    if (forwarders_.count(port)) return {};
    if (!netns_) return sys_error(ESHUTDOWN, "session network stopped");
    auto forwarder = PortForwarder::into_namespace(io_, netns_, port, port);
    if (!forwarder)
        return std::move(forwarder.error().context("forward port " + std::to_string(port)));
    forwarders_.emplace(port, std::move(*forwarder));
    return {};
}

void SessionNetwork::unforward(uint16_t port) {
    forwarders_.erase(port);
}

PortWait SessionNetwork::wait_for_port(uint16_t port, std::chrono::milliseconds timeout,
                                       PortWait::Handler handler) {
    if (!netns_) {
        SocketMaker stopped = [](int) -> Result<UniqueFd> {
            return sys_error(ESHUTDOWN, "session network stopped");
        };
        return corral::wait_for_port(io_, std::move(stopped), {{AF_INET, "127.0.0.1", port}},
                                     timeout, std::move(handler));
    }
    return wait_for_port_in_namespace(io_, netns_, port, timeout, std::move(handler));
}

Status SessionNetwork::set_egress(const EgressSpec& spec) {
    auto rules = EgressRules::compile(spec, allow_);
    if (!rules) return std::move(rules.error());
    if (!gate_) return sys_error(ESHUTDOWN, "session network stopped");
    gate_->set_rules(std::move(*rules));
    // Allowances of names the new rules refuse end now (the relay would refuse them anyway, but
    // their addresses go back to being unrouted, or the session's own loopback).
    auto current = gate_->rules();
    const auto revoked = gate_->allowances().remove_if([&](const NameAllowance& allowance) {
        return !current->check_name(allowance.name).allowed;
    });
    close_named(revoked, "egress rules changed");
    schedule_expiry();
    // The relay judges every connection by the gate's rules, so a failure here can only leave
    // the namespace routing less or more to the relay, never let more through.
    if (transparent_)
        if (auto applied = transparent_->apply(spec); !applied)
            log("egress rules changed, transparent path not updated: " +
                applied.error().describe());
    return {};
}

void SessionNetwork::log(const std::string& line) const {
    if (environment_.log) environment_.log(line);
}

EgressInfo SessionNetwork::egress_info() const {
    EgressInfo info;
    if (!gate_) return info;
    info.policy = gate_->rules()->spec();
    info.refused = gate_->refused();
    info.proxy_port = proxy_port();
    info.dns_port = dns_port();
    info.transparent = transparent_ != nullptr;
    info.transparent_error = transparent_error_;
    return info;
}

void SessionNetwork::stop() {
    expiry_timer_.cancel();
    expiry_armed_.reset();
    if (resolver_) resolver_->stop();
    resolver_.reset();
    if (http_proxy_) http_proxy_->stop();
    http_proxy_.reset();
    if (transparent_) transparent_->stop();
    transparent_.reset();
    forwarders_.clear();
    if (egress_) egress_->stop();
    egress_.reset();
    if (netns_) netns_->stop();
    netns_.reset();
}

}  // namespace corral
