#pragma once
// The egress decision of an isolated session, as pure logic: which host names and which
// addresses the daemon will connect the session to (policy `network.egress`, PATCH .../network).
//
// A destination is judged twice: by the name the session asked for (CONNECT or absolute-URI
// host), then by each address the daemon resolved for it itself, so a name that resolves into a
// denied range (DNS rebinding, a public name pointing at 169.254.169.254) is refused. Order:
//   1. deniedCIDRs win over everything;
//   2. `network.allow` entries (host loopback address + port) are always open;
//   3. mode deny-all refuses the rest;
//   4. protected ranges — loopback (the daemon host's own services), 0.0.0.0/8, link-local
//      169.254.0.0/16 and fe80::/10 (cloud metadata 169.254.169.254 lives there), fd00:ec2::254
//      (AWS IPv6 metadata) — are refused unless an allowedCIDRs entry lying inside the range
//      names them explicitly (0.0.0.0/0 does not open them), or the address came from the
//      operator's own hosts file (`pinned`); so are the daemon host's own addresses
//      (`host_local`: a service on 0.0.0.0 is as reachable through them as through loopback)
//      unless allowedCIDRs names the address itself (a /32 or /128);
//   5. allow-all opens the rest; custom opens allowedCIDRs and, for a name on allowedHosts,
//      every address it resolves to.
// No syscalls: unit-testable without privileges.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.hpp"
#include "policies/policy.hpp"

namespace corral {

/// An IPv4 or IPv6 address in network byte order. IPv4-mapped IPv6 (::ffff:a.b.c.d) is
/// normalised to IPv4, so a mapped address cannot slip past an IPv4 rule.
struct IpAddress {
    int family = 0;  ///< AF_INET or AF_INET6
    std::array<uint8_t, 16> bytes{};

    /// Parses a numeric address ("10.0.0.1", "::1", "[::1]"); nullopt for anything else.
    static std::optional<IpAddress> parse(std::string_view text);
    /// From raw bytes (4 or 16), normalising IPv4-mapped addresses.
    static IpAddress from_bytes(int family, const void* bytes);
    /// "10.0.0.1", "2001:db8::1".
    std::string to_string() const;
    bool operator==(const IpAddress&) const = default;  ///< same family and bytes
};

/// A CIDR block ("10.0.0.0/8"; a bare address is a /32 or /128).
struct Cidr {
    IpAddress base;
    unsigned prefix = 0;
    std::string text;  ///< as written

    /// Whether `address` lies in this block (same family).
    bool contains(const IpAddress& address) const;
    /// Whether every address of this block lies in `outer`.
    bool inside(const Cidr& outer) const;
};

/// Parses a CIDR; EINVAL naming the entry and what is wrong (not an address, prefix out of
/// range, host bits set below the prefix).
Result<Cidr> parse_cidr(std::string_view text);
/// "" when `pattern` is a valid allowedHosts entry (an exact DNS name, or "*." and a name of at
/// least two labels), else what is wrong with it.
std::string check_host_pattern(std::string_view pattern);
/// Whether `host` matches `pattern` (case-insensitive, a trailing dot ignored); "*.example.com"
/// matches every name below example.com but not example.com itself.
bool host_matches(std::string_view pattern, std::string_view host);
/// "allow-all", "deny-all", "custom".
std::string_view to_string(EgressMode mode);
/// The mode named `text`, spelled as the AI SDK does.
std::optional<EgressMode> egress_mode_from(std::string_view text);
/// Checks every entry of `spec`; EINVAL naming the list, index and entry of the first bad one.
Status check_egress_spec(const EgressSpec& spec);

/// What the rules say about one name or address, and which rule said it.
struct EgressVerdict {
    bool allowed = false;
    std::string rule;  ///< "deniedCIDRs 10.0.0.0/8", "mode deny-all", "allowedHosts *.example.com"
};

/// Compiled egress rules (immutable; replaced wholesale when the policy changes).
class EgressRules {
  public:
    /// Compiles `spec` and the `network.allow` entries (each becomes an address+port rule).
    static Result<EgressRules> compile(const EgressSpec& spec,
                                       const std::vector<std::string>& allow = {});
    /// Whether the name itself is allowed: by the mode, or by allowedHosts in custom mode. A
    /// name refused here may still reach an address that allowedCIDRs opens.
    EgressVerdict check_name(std::string_view host) const;
    /// Whether the daemon may connect to `address`:`port`. `name_allowed`: the address was
    /// resolved for a name check_name allowed. `pinned`: the address came from the operator's
    /// hosts file, not from DNS (step 4 above does not apply). `host_local`: the address is one
    /// of the daemon host's own (sessions/network/host_addresses.hpp says so; step 4).
    EgressVerdict check_address(const IpAddress& address, uint16_t port, bool name_allowed,
                                bool pinned = false, bool host_local = false) const;
    /// Whether resolving a name refused by check_name could still lead anywhere (custom mode
    /// with allowedCIDRs); when false the daemon refuses without asking DNS.
    bool names_reach_cidrs() const;
    /// The policy these rules were compiled from.
    const EgressSpec& spec() const { return spec_; }

  private:
    struct PortRule {
        IpAddress address;
        uint16_t port = 0;
        std::string text;
    };
    EgressSpec spec_;
    std::vector<Cidr> allowed_;
    std::vector<Cidr> denied_;
    std::vector<PortRule> ports_;
};

}  // namespace corral
