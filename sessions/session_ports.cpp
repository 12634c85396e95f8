// The network side of a session: with `network: isolated`, every leased port is forwarded from
// the host's loopback into the session's namespace and `network.allow` gets its egress proxy
// (SessionNetwork); with `network: host`, the session's server binds the leased port itself.
#include <sys/socket.h>

#include <algorithm>

#include "sessions/session.hpp"
#include "sessions/network/session_network.hpp"

namespace corral {

Status Session::start_network(const NetworkLeftovers* leftovers) {
    if (policy_.namespaces.network != NetworkMode::isolated) return {};
    std::optional<NetworkLeftovers> left;
    if (leftovers) left = *leftovers;
    auto network =
        SessionNetwork::create(context_.io, sandbox_, policy_, id_, context_.egress, left);
    if (!network) return std::move(network.error());
    network_ = std::move(*network);
    return {};
}

Status Session::forward_port(uint16_t port) {
    if (!network_) return {};
    return network_->forward(port);
}

void Session::unforward_port(uint16_t port) {
    if (network_) network_->unforward(port);
}

// Before the holder goes: forwarders and their connections close cleanly (clients see EOF)
// rather than hanging on a namespace whose servers are gone.
void Session::stop_network() {
    if (network_) {
        final_egress_ = network_->egress_info();
        final_egress_->proxy_port = 0;
        final_egress_->dns_port = 0;
    }
    if (network_) network_->stop();
    network_.reset();
}

Status Session::set_egress(const EgressSpec& spec) {
    if (!network_) {
        if (policy_.namespaces.network != NetworkMode::isolated)
            return sys_error(ENOTSUP, "session " + id_ +
                                          " has the host's network (namespaces.network: host): "
                                          "there is no egress to filter");
        return sys_error(ESHUTDOWN, "session " + id_ + " has no network any more");
    }
    CORRAL_TRY(network_->set_egress(spec), "");
    // Before the client hears of it: a restart keeps these rules, not the policy's.
    return journal_session();
}

Result<PortWait> Session::wait_for_port(uint16_t port, Millis timeout, PortWait::Handler handler) {
    if (std::find(leased_.begin(), leased_.end(), port) == leased_.end()) {
        return sys_error(ENOENT, "session " + id_ + " holds no port " + std::to_string(port));
    }
    if (state_ != SessionState::active) {
        return sys_error(ESHUTDOWN, "session " + id_ + " is " + std::string(to_string(state_)));
    }
    if (network_) return network_->wait_for_port(port, timeout, std::move(handler));
    return corral::wait_for_port(context_.io, make_tcp_socket,
                                 {{AF_INET, "127.0.0.1", port}, {AF_INET6, "::1", port}}, timeout,
                                 std::move(handler));
}

}  // namespace corral
