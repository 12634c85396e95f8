#include "sessions/network/host_addresses.hpp"

#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <fstream>

#include "base/unique_fd.hpp"

namespace corral {

namespace {

/// Whether the calling namespace binds any address (net.ipv{4,6}.ip_nonlocal_bind, set on
/// keepalived and HAProxy hosts): then bind(2) succeeds for every address and says nothing.
bool binds_nonlocal(int family) {
    const char* path = family == AF_INET ? "/proc/sys/net/ipv4/ip_nonlocal_bind"
                                         : "/proc/sys/net/ipv6/ip_nonlocal_bind";
    std::ifstream in(path);
    int value = 0;
    return (in >> value) && value != 0;
}

/// The answer of the interface list (getifaddrs), for hosts where bind(2) cannot tell; true
/// where even that cannot be read (refusing a connection is the safe side).
bool listed_on_an_interface(const IpAddress& address) {
    ifaddrs* list = nullptr;
    if (::getifaddrs(&list) != 0) return true;
    bool found = false;
    for (ifaddrs* i = list; i != nullptr && !found; i = i->ifa_next) {
        if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != address.family) continue;
        const void* bytes =
            address.family == AF_INET
                ? static_cast<const void*>(&reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr)
                : static_cast<const void*>(
                      &reinterpret_cast<const sockaddr_in6*>(i->ifa_addr)->sin6_addr);
        found = IpAddress::from_bytes(address.family, bytes) == address;
    }
    ::freeifaddrs(list);
    return found;
}

}  // namespace

bool is_host_address(const IpAddress& address) {
    sockaddr_storage storage{};
    socklen_t length = 0;
    if (address.family == AF_INET) {
        auto* in = reinterpret_cast<sockaddr_in*>(&storage);
        in->sin_family = AF_INET;
        std::memcpy(&in->sin_addr, address.bytes.data(), 4);
        length = sizeof *in;
    } else if (address.family == AF_INET6) {
        auto* in6 = reinterpret_cast<sockaddr_in6*>(&storage);
        in6->sin6_family = AF_INET6;
        std::memcpy(&in6->sin6_addr, address.bytes.data(), 16);
        length = sizeof *in6;
    } else {
        return false;
    }
    // Every failure but "not an address of this host" counts as one of the host's: a sandbox that
    // pushes corrald towards its descriptor limit must not make the check fail open (review of
    // stop 44).
    UniqueFd probe(::socket(address.family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (!probe) return true;
    if (::bind(probe.get(), reinterpret_cast<const sockaddr*>(&storage), length) != 0)
        return errno != EADDRNOTAVAIL;
    return binds_nonlocal(address.family) ? listed_on_an_interface(address) : true;
}

}  // namespace corral
