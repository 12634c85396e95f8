#include "policies/egress_destination.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <charconv>

namespace corral {
namespace {

Error invalid_entry(const std::string& entry, const std::string& why) {
    return sys_error(EINVAL, "`" + entry + "`: " + why);
}

bool is_loopback(const EgressDestination& destination) {
    if (destination.family == AF_INET) {
        in_addr in{};
        return ::inet_pton(AF_INET, destination.address.c_str(), &in) == 1 &&
               (ntohl(in.s_addr) >> 24) == 127;
    }
    in6_addr in6{};
    return ::inet_pton(AF_INET6, destination.address.c_str(), &in6) == 1 &&
           IN6_IS_ADDR_LOOPBACK(&in6);
}

}  // namespace

Result<EgressDestination> parse_egress_destination(const std::string& entry) {
    size_t colon = entry.rfind(':');
    if (colon == std::string::npos || colon == 0)
        return invalid_entry(entry, "expected host:port (e.g. 127.0.0.1:8080 or [::1]:443)");
    std::string host = entry.substr(0, colon);
    std::string port_text = entry.substr(colon + 1);
    unsigned port = 0;
    auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (port_text.empty() || ec != std::errc() || end != port_text.data() + port_text.size() ||
        port == 0 || port > 65535)
        return invalid_entry(entry, "expected host:port with a port from 1 to 65535");
    EgressDestination destination{AF_INET, host, static_cast<uint16_t>(port)};
    if (host == "localhost") {
        destination.address = "127.0.0.1";
    } else if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
        destination = {AF_INET6, host.substr(1, host.size() - 2), static_cast<uint16_t>(port)};
    } else if (host.find(':') != std::string::npos) {
        return invalid_entry(entry, "write IPv6 addresses in brackets: [::1]:PORT");
    }
    if (!is_loopback(destination))
        return invalid_entry(entry,
                             "only host loopback destinations (127.0.0.0/8, [::1], localhost) "
                             "can be allowed");
    return destination;
}

}  // namespace corral
