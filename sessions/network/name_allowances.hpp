#pragma once
// The name-bound allowances of one session: addresses its DNS resolver handed out for a name the
// egress rules allow (dns_resolver.hpp), which the transparent relay then lets a direct TCP
// connection reach although no allowedCIDRs entry covers them — what makes `git clone`, ssh or
// any non-HTTP client work towards an allowed host.
//
// An allowance lasts as long as the DNS record the sandbox got (its TTL) plus a short grace for a
// connect racing the expiry, and is renewed by asking again. It opens the address only: the
// relay still judges every connection by the rules in force (deniedCIDRs, the protected ranges,
// and whether the name is still allowed after a PATCH). The table is bounded; when full, the
// allowance closest to expiring is dropped (its name must be asked again).
//
// Pure data: no syscalls, no clock of its own (times are passed in). Unit-tested.

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "policies/egress_rules.hpp"

namespace corral {

/// One allowance: the name it was handed out for, and until when.
struct NameAllowance {
    std::string name;
    bool pinned = false;  ///< the address came from the operator's hosts file
    std::chrono::steady_clock::time_point expires;
};

/// Address -> allowance, bounded.
class NameAllowances {
  public:
    using Clock = std::chrono::steady_clock;
    static constexpr size_t kDefaultMax = 1024;

    explicit NameAllowances(size_t max = kDefaultMax) : max_(max == 0 ? 1 : max) {}

    /// What grant() changed: addresses new to the table, and addresses it dropped to make room.
    struct Change {
        std::vector<IpAddress> added;
        std::vector<IpAddress> dropped;
    };
    /// Allows `address` for `name` until `expires` (a later grant of the same address replaces
    /// the name and extends or shortens the time).
    Change grant(const IpAddress& address, const std::string& name, bool pinned,
                 Clock::time_point expires);
    /// The live allowance of `address` at `now`, or nullptr.
    const NameAllowance* find(const IpAddress& address, Clock::time_point now) const;
    /// Removes every allowance expired at `now`; returns their addresses.
    std::vector<IpAddress> expire(Clock::time_point now);
    /// Removes every allowance for which `drop` says true (a PATCH no longer allows its name);
    /// returns their addresses.
    std::vector<IpAddress> remove_if(const std::function<bool(const NameAllowance&)>& drop);
    /// Every address in the table (live or not yet swept).
    std::vector<IpAddress> addresses() const;
    /// Removes everything; returns the addresses.
    std::vector<IpAddress> clear();
    size_t size() const { return table_.size(); }

  private:
    struct Less {
        bool operator()(const IpAddress& a, const IpAddress& b) const {
            return a.family != b.family ? a.family < b.family : a.bytes < b.bytes;
        }
    };
    size_t max_;
    std::map<IpAddress, NameAllowance, Less> table_;
};

}  // namespace corral
