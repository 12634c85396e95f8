#include "sessions/network/egress_proxy.hpp"

namespace corral {

namespace {

bool same(const SocketAddress& a, const SocketAddress& b) {
    return a.family == b.family && a.address == b.address && a.port == b.port;
}

}  // namespace

Result<std::unique_ptr<EgressProxy>> EgressProxy::start(boost::asio::io_context& io,
                                                        const std::shared_ptr<NetnsRunner>& netns,
                                                        const std::vector<std::string>& allow) {
    auto proxy = std::make_unique<EgressProxy>();
    for (const auto& entry : allow) {
        // The parser checked the entries already; a policy built in code is checked here.
        auto parsed = parse_egress_destination(entry);
        if (!parsed) return std::move(parsed.error().context("network.allow"));
        const SocketAddress destination{parsed->family, parsed->address, parsed->port};
        bool duplicate = false;
        for (const auto& known : proxy->destinations_)
            duplicate = duplicate || same(known, destination);
        if (duplicate) continue;
        // Inside, the same address and port as on the host: the session's programs keep their
        // usual configuration ("postgres://127.0.0.1:5432").
        auto forwarder = PortForwarder::out_of_namespace(io, netns, destination, destination);
        if (!forwarder)
            return std::move(forwarder.error().context("network.allow `" + entry + "`"));
        proxy->destinations_.push_back(destination);
        proxy->forwarders_.push_back(std::move(*forwarder));
    }
    return proxy;
}

void EgressProxy::stop() {
    for (auto& forwarder : forwarders_) forwarder->stop();
}

size_t EgressProxy::connection_count() const {
    size_t count = 0;
    for (const auto& forwarder : forwarders_) count += forwarder->connection_count();
    return count;
}

}  // namespace corral
