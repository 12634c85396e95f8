#pragma once
// A name-to-address override for the egress proxy, read from an /etc/hosts-style file given to
// corrald with `--egress-hosts-file` (for tests and air-gapped hosts: "10.0.0.5 registry.local").
// Names found here are answered from the file and never asked of DNS; their addresses count as
// the operator's own choice (pinned), so the protected-range rule of egress_rules.hpp does not
// apply to them — deniedCIDRs still do. The host's /etc/hosts is never read or changed by this.

#include <map>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "policies/egress_rules.hpp"

namespace corral {

/// Parsed hosts file: lower-case name -> addresses in file order.
struct EgressHosts {
    std::map<std::string, std::vector<IpAddress>> names;
    /// The addresses of `name` (case-insensitive, trailing dot ignored), or nullptr.
    const std::vector<IpAddress>* find(std::string name) const;
};

/// Parses hosts-file text: `ADDRESS NAME [NAME...]` per line, `#` comments. EINVAL naming the
/// line for a bad address or name.
Result<EgressHosts> parse_egress_hosts(const std::string& text);
/// The largest hosts file corrald reads.
inline constexpr size_t kMaxHostsFileBytes = 1u << 20;
/// Reads and parses `path`: a regular file of at most kMaxHostsFileBytes (EINVAL for a FIFO,
/// device or directory, EFBIG beyond the cap; never blocks).
Result<EgressHosts> load_egress_hosts(const std::string& path);

}  // namespace corral
