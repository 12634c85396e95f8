#include "sessions/network/socket_address.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

namespace corral {

Result<KernelSocketAddress> to_kernel_address(const SocketAddress& address) {
    KernelSocketAddress out;
    // Where each family keeps its address and port; the family field is the same in both
    // (sockaddr_storage's ss_family overlays sin_family and sin6_family).
    void* bytes = nullptr;
    in_port_t* port = nullptr;
    if (address.family == AF_INET) {
        auto& in = reinterpret_cast<sockaddr_in&>(out.storage);
        bytes = &in.sin_addr;
        port = &in.sin_port;
        out.length = sizeof in;
    } else if (address.family == AF_INET6) {
        auto& in6 = reinterpret_cast<sockaddr_in6&>(out.storage);
        bytes = &in6.sin6_addr;
        port = &in6.sin6_port;
        out.length = sizeof in6;
    } else {
        return sys_error(EINVAL, "bad address `" + describe(address) + "`");
    }
    out.storage.ss_family = static_cast<sa_family_t>(address.family);
    *port = htons(address.port);
    if (::inet_pton(address.family, address.address.c_str(), bytes) != 1)
        return sys_error(EINVAL, "bad address `" + describe(address) + "`");
    return out;
}

std::string describe(const SocketAddress& address) {
    if (address.family == AF_INET6)
        return "[" + address.address + "]:" + std::to_string(address.port);
    return address.address + ":" + std::to_string(address.port);
}

}  // namespace corral
