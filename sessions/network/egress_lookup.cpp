#include "sessions/network/egress_lookup.hpp"

#include <sys/socket.h>

namespace corral {

using boost::asio::ip::tcp;
using boost::system::error_code;

namespace {

IpAddress from_endpoint(const tcp::endpoint& endpoint) {
    const auto address = endpoint.address();
    if (address.is_v4()) {
        const auto bytes = address.to_v4().to_bytes();
        return IpAddress::from_bytes(AF_INET, bytes.data());
    }
    const auto bytes = address.to_v6().to_bytes();
    return IpAddress::from_bytes(AF_INET6, bytes.data());
}

}  // namespace

void EgressLookup::start(const EgressHosts* hosts, const std::string& host, uint16_t port,
                         int family, std::chrono::milliseconds timeout, Handler handler) {
    if (hosts)
        if (const auto* pinned = hosts->find(host)) {
            EgressLookupResult result;
            result.pinned = true;
            for (const auto& address : *pinned)
                if (family == AF_UNSPEC || address.family == family)
                    result.addresses.push_back(address);
            // A name the operator pinned is never asked of DNS, even for the other family.
            if (result.addresses.empty()) {
                result.not_found = true;
                result.error = "no address of that family in the egress hosts file";
            }
            return handler(std::move(result));
        }
    timed_out_ = false;
    timer_.expires_after(timeout);
    timer_.async_wait([self = shared_from_this()](const error_code& error) {
        if (error) return;
        self->timed_out_ = true;
        self->resolver_.cancel();
    });
    auto done = [self = shared_from_this(), family, handler = std::move(handler)](
                    const error_code& error, tcp::resolver::results_type results) {
        self->timer_.cancel();
        EgressLookupResult result;
        if (error) {
            result.not_found = error == boost::asio::error::host_not_found;
            result.error = self->timed_out_ ? "the lookup timed out" : error.message();
            return handler(std::move(result));
        }
        for (const auto& entry : results) {
            const IpAddress address = from_endpoint(entry.endpoint());
            if (family == AF_UNSPEC || address.family == family)
                result.addresses.push_back(address);
        }
        if (result.addresses.empty()) {
            result.not_found = true;
            result.error = "no address of that family";
        }
        handler(std::move(result));
    };
    const std::string service = std::to_string(port);
    // Asio's resolver runs getaddrinfo on a thread of its own: the event loop never blocks.
    if (family == AF_INET)
        resolver_.async_resolve(tcp::v4(), host, service, tcp::resolver::numeric_service,
                                std::move(done));
    else if (family == AF_INET6)
        resolver_.async_resolve(tcp::v6(), host, service, tcp::resolver::numeric_service,
                                std::move(done));
    else
        resolver_.async_resolve(host, service, tcp::resolver::numeric_service, std::move(done));
}

void EgressLookup::cancel() {
    timer_.cancel();
    resolver_.cancel();
}

}  // namespace corral
