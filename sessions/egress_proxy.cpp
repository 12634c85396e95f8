#include "sessions/egress_proxy.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <charconv>

namespace corral {

namespace {

Error invalid_entry(const std::string& entry, const std::string& why) {
    return sys_error(EINVAL, "network.allow `" + entry + "`: " + why);
}

bool is_loopback(const SocketAddress& address) {
    if (address.family == AF_INET) {
        in_addr in{};
        return ::inet_pton(AF_INET, address.address.c_str(), &in) == 1 &&
               (ntohl(in.s_addr) >> 24) == 127;
    }
    in6_addr in6{};
    return ::inet_pton(AF_INET6, address.address.c_str(), &in6) == 1 && IN6_IS_ADDR_LOOPBACK(&in6);
}

bool same(const SocketAddress& a, const SocketAddress& b) {
    return a.family == b.family && a.address == b.address && a.port == b.port;
}

}  // namespace

Result<SocketAddress> parse_allowed_destination(const std::string& entry) {
    size_t colon = entry.rfind(':');
    if (colon == std::string::npos || colon == 0) return invalid_entry(entry, "expected host:port");
    std::string host = entry.substr(0, colon);
    std::string port_text = entry.substr(colon + 1);
    unsigned port = 0;
    auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (port_text.empty() || ec != std::errc() || end != port_text.data() + port_text.size() ||
        port == 0 || port > 65535)
        return invalid_entry(entry, "bad port");
    SocketAddress address{AF_INET, host, static_cast<uint16_t>(port)};
    if (host == "localhost") {
        address.address = "127.0.0.1";
    } else if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
        address = {AF_INET6, host.substr(1, host.size() - 2), static_cast<uint16_t>(port)};
    } else if (host.find(':') != std::string::npos) {
        return invalid_entry(entry, "write IPv6 addresses in brackets: [::1]:PORT");
    }
    if (!is_loopback(address))
        return invalid_entry(entry,
                             "only host loopback destinations (127.0.0.0/8, [::1], localhost) "
                             "can be allowed");
    return address;
}

Result<std::unique_ptr<EgressProxy>> EgressProxy::start(boost::asio::io_context& io,
                                                        const std::shared_ptr<NetnsThread>& netns,
                                                        const std::vector<std::string>& allow) {
    auto proxy = std::make_unique<EgressProxy>();
    for (const auto& entry : allow) {
        auto destination = parse_allowed_destination(entry);
        if (!destination) return std::move(destination.error());
        bool duplicate = false;
        for (const auto& known : proxy->destinations_)
            duplicate = duplicate || same(known, *destination);
        if (duplicate) continue;
        // Inside, the same address and port as on the host: the session's programs keep their
        // usual configuration ("postgres://127.0.0.1:5432").
        auto forwarder = PortForwarder::out_of_namespace(io, netns, *destination, *destination);
        if (!forwarder)
            return std::move(forwarder.error().context("network.allow `" + entry + "`"));
        proxy->destinations_.push_back(*destination);
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
