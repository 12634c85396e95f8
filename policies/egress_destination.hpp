#pragma once
// `network.allow` entries: which host services an isolated session may reach. Only host loopback
// destinations can be allowed (127.0.0.0/8, [::1], `localhost` meaning 127.0.0.1): the daemon
// serves each one from inside the session's namespace and forwards it to the same address on the
// host. Checked when the policy is parsed, so `corral policy check` already says what is wrong.

#include <cstdint>
#include <string>

#include "base/error.hpp"

namespace corral {

/// One allowed destination, numeric.
struct EgressDestination {
    int family = 0;       ///< AF_INET or AF_INET6
    std::string address;  ///< "127.0.0.1", "::1"
    uint16_t port = 0;
};

/// Parses "127.0.0.1:5432", "localhost:6379" or "[::1]:443". EINVAL naming the entry and what is
/// wrong with it: malformed, a bad port, or not a loopback address (hostnames included).
Result<EgressDestination> parse_egress_destination(const std::string& entry);

}  // namespace corral
