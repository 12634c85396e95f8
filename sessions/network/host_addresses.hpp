#pragma once
// Whether an address is one of the daemon host's own (in corrald's network namespace).
//
// Why: egress's protected ranges keep a sandbox away from the host's loopback services, but a
// service listening on 0.0.0.0 or :: is just as reachable through any of the host's interface
// addresses (stop 44's red-team finding: under `allow-all`, http://192.0.2.2:PORT/ and
// [fd00::2]:PORT reached a host service through the proxy and the transparent relay, seen by it as
// a connection from the host itself). policies/egress_rules.hpp refuses such an address unless
// allowedCIDRs names it exactly.
//
// How: the kernel is asked, not a list kept: bind(2) to the address (port 0, no IP_FREEBIND)
// succeeds exactly for the addresses the host would deliver locally (RTN_LOCAL: every interface
// address, `local` routes included), as of this moment. Three system calls, no cache to go stale.
// Where the namespace binds any address (ip_nonlocal_bind) the interface list answers instead.
// Any failure to ask counts as "the host's" (refused): never open on an error.
//
// Not covered by design: corrald in a network namespace of its own (a container) does not see the
// real host's addresses as its own (a docker0 gateway), nor an address reached back through NAT.

#include "policies/egress_rules.hpp"

namespace corral {

/// True when `address` is local to the calling thread's network namespace (corrald's own when
/// called from the event loop). False for an address it cannot tell about (a link-local IPv6
/// without a scope: protected anyway).
bool is_host_address(const IpAddress& address);

}  // namespace corral
