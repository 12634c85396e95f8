#pragma once
// The kernel side of the transparent egress path, for one session's network namespace: which
// IPv4 destinations are routed at all, which are refused at connect() time, and where the rest
// is redirected. Every function here must run in a job of the session's NetnsRunner (the netlink
// sockets they open belong to the calling thread's network namespace).
//
//   routes:   `local 0.0.0.0/0 dev lo` (RTN_LOCAL in the local table), in every mode, so a
//             connect() to any IPv4 address reaches the output hook below, where it is refused
//             or relayed, and never fails with ENETUNREACH before the daemon could count it.
//   nftables: table `ip corral_egress`: a filter chain (output, priority -150) that answers a SYN
//             to deniedCIDRs, to the protected ranges (unless allowedCIDRs names them) and to
//             every address the rules do not open (all of them under deny-all) with a TCP reset,
//             so connect() fails with ECONNREFUSED at once, and logs each such SYN to NFLOG group
//             `log_group`, from which the daemon counts it (refusal_log.hpp); a nat chain
//             (output, priority -100) that redirects every other TCP connection but loopback to
//             the daemon's relay listener at 127.0.0.1:<relay_port>, which reads SO_ORIGINAL_DST.
//   named:    the table's set `name_bound` holds the addresses the session's DNS resolver
//             handed out for allowed names (name_allowances.hpp); they are redirected to the
//             relay even inside 127.0.0.0/8 (a hosts-file name may point at a host loopback
//             address), and those outside loopback get a `local <a>/32 dev lo` route while they
//             are allowed (redundant beside 0.0.0.0/0, and harmless).
//
// Loopback (127.0.0.0/8) is the session's own and untouched, but for addresses allowedCIDRs names
// explicitly (127.0.0.14/32: the host's, as through the proxy; never 127.0.0.1). IPv6 gets no
// routes: it stays ENETUNREACH except through the HTTP proxy. nftables is programmed through
// libnftables (the library behind the `nft` command), not by running a command.

#include <cstdint>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "policies/egress_rules.hpp"

namespace corral {

/// The NFLOG group the refusing rules log to (per namespace, so one number serves every session).
constexpr uint16_t kRefusalLogGroup = 7117;

/// What the namespace should route and redirect for one rule set.
struct TransparentPlan {
    std::vector<Cidr> routes;  ///< IPv4 ranges given a local route (0.0.0.0/0)
    /// IPv4 ranges the rules open to direct TCP (0.0.0.0/0 under allow-all, allowedCIDRs under
    /// custom, none under deny-all); SYNs to anything else but loopback and `name_bound` get a
    /// reset.
    std::vector<Cidr> open;
    std::vector<Cidr> denied;            ///< IPv4 deniedCIDRs: SYNs get a reset
    std::vector<Cidr> protected_ranges;  ///< 0.0.0.0/8, 169.254.0.0/16: SYNs get a reset...
    std::vector<Cidr> protected_open;    ///< ...except in these allowedCIDRs that name them
    /// allowedCIDRs strictly inside 127.0.0.0/8 and without 127.0.0.1 (where the proxy and the
    /// relay listen): named explicitly, they mean the host's loopback address, as through the
    /// proxy, and are redirected; the rest of 127.0.0.0/8 stays the session's own.
    std::vector<Cidr> loopback_open;
    /// Whether DNS may hand out name-bound addresses (allow-all, or custom with allowedHosts):
    /// then the table exists even with nothing routed, to redirect them.
    bool named = false;
    std::vector<IpAddress> named_addresses;  ///< the `named` set's elements when (re)created
    uint16_t relay_port = 0;
    uint16_t log_group = kRefusalLogGroup;  ///< NFLOG group of refused SYNs; 0: not logged
};

/// Computes the plan for `spec` (pure): every mode routes 0.0.0.0/0 to lo; allow-all opens
/// everything but the denied and protected ranges, custom its IPv4 allowedCIDRs and name-bound
/// addresses, deny-all nothing.
TransparentPlan plan_transparent_egress(const EgressSpec& spec, uint16_t relay_port);
/// The nftables script for `plan` (pure). `replace`: the table may exist, and is replaced
/// atomically (declared and deleted first, in the same batch); false only for a namespace that
/// never had it.
std::string nft_script(const TransparentPlan& plan, bool replace = true);
/// Applies `next` in the calling thread's namespace, replacing `previous` (routes of `previous`
/// not in `next` are deleted). Fails naming the step (netlink route, nftables).
Status apply_transparent_egress(const TransparentPlan& previous, const TransparentPlan& next);
/// Closes `removed` then opens `added` name-bound IPv4 addresses in the calling thread's
/// namespace (the `name_bound` set, and routes outside loopback; `keep_routes` are CIDR routes of
/// the plan that a removed /32 must not take with it). Needs a plan with `named` applied.
Status change_named_addresses(const std::vector<IpAddress>& added,
                              const std::vector<IpAddress>& removed,
                              const std::vector<Cidr>& keep_routes);

}  // namespace corral
