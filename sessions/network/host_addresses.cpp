#include "sessions/network/host_addresses.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "base/unique_fd.hpp"

namespace corral {

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
    UniqueFd probe(::socket(address.family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (!probe) return false;
    return ::bind(probe.get(), reinterpret_cast<const sockaddr*>(&storage), length) == 0;
}

}  // namespace corral
