#pragma once
// A numeric socket address as corrald names it (family, text, port) and the form the kernel takes
// in bind() and connect(), in one place for the sockets made in a session's namespace.

#include <sys/socket.h>

#include <cstdint>
#include <string>

#include "base/error.hpp"

namespace corral {

/// An IPv4 or IPv6 loopback (or any) address and a port, in host byte order.
struct SocketAddress {
    int family = 0;       ///< AF_INET or AF_INET6
    std::string address;  ///< numeric: "127.0.0.1", "::1"
    uint16_t port = 0;
};

/// A SocketAddress as the kernel takes it.
struct KernelSocketAddress {
    sockaddr_storage storage{};
    socklen_t length = 0;
    const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage); }
};

/// The kernel's form of `address`; fails with EINVAL ("bad address") when its family is neither
/// IPv4 nor IPv6 or its text is not a numeric address of that family.
Result<KernelSocketAddress> to_kernel_address(const SocketAddress& address);

/// `address` as a person reads it: "127.0.0.1:53", "[::1]:8080".
std::string describe(const SocketAddress& address);

}  // namespace corral
