#pragma once
// The name-bound allowances of one session: addresses its DNS resolver handed out for a name the
// egress rules allow (dns_resolver.hpp), which the transparent relay then lets a direct TCP
// connection reach although no allowedCIDRs entry covers them — what makes `git clone`, ssh or
// any non-HTTP client work towards an allowed host.
//
// An allowance lasts as long as the DNS record the sandbox got (its TTL) plus a short grace for a
// connect racing the expiry, and is renewed by asking again; the session closes it on a timer at
// next_expiry() (session_network.cpp), without waiting for more traffic. One address may be
// allowed for several names at once (two names of one CDN address, a name and its alias): each
// name keeps its own time, and the address stays open while any of its names is allowed and
// live. It opens the address only: the relay still judges every connection by the rules in force
// (deniedCIDRs, the protected ranges, and whether one of its names is still allowed after a
// PATCH). The table is bounded in addresses (when full, the address whose allowances all end
// soonest is dropped: its names must be asked again) and in names per address (when full, that
// address's name closest to expiring makes room).
//
// Pure data: no syscalls, no clock of its own (times are passed in). Unit-tested.

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <optional>
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

/// Address -> its names' allowances, bounded.
class NameAllowances {
  public:
    using Clock = std::chrono::steady_clock;
    static constexpr size_t kDefaultMax = 1024;
    static constexpr size_t kMaxNamesPerAddress = 16;

    explicit NameAllowances(size_t max = kDefaultMax) : max_(max == 0 ? 1 : max) {}

    /// What grant() changed: addresses new to the table, and addresses it dropped to make room.
    struct Change {
        std::vector<IpAddress> added;
        std::vector<IpAddress> dropped;
    };
    /// Allows `address` for `name` until `expires` (a later grant of the same address and name
    /// extends or shortens its time; another name is added beside it).
    Change grant(const IpAddress& address, const std::string& name, bool pinned,
                 Clock::time_point expires);
    /// The live allowances of `address` at `now`, one per name (empty: none).
    std::vector<const NameAllowance*> find(const IpAddress& address, Clock::time_point now) const;
    /// Removes every allowance expired at `now`; returns the addresses left with none.
    std::vector<IpAddress> expire(Clock::time_point now);
    /// Removes every allowance for which `drop` says true (a PATCH no longer allows its name);
    /// returns the addresses left with none.
    std::vector<IpAddress> remove_if(const std::function<bool(const NameAllowance&)>& drop);
    /// When the next allowance expires; nullopt when the table is empty.
    std::optional<Clock::time_point> next_expiry() const;
    /// Every address in the table (live or not yet swept).
    std::vector<IpAddress> addresses() const;
    /// Removes everything; returns the addresses.
    std::vector<IpAddress> clear();
    /// Addresses in the table.
    size_t size() const { return table_.size(); }

  private:
    struct Less {
        bool operator()(const IpAddress& a, const IpAddress& b) const {
            return a.family != b.family ? a.family < b.family : a.bytes < b.bytes;
        }
    };
    /// The latest expiry among `names`.
    static Clock::time_point last_expiry(const std::vector<NameAllowance>& names);
    size_t max_;
    std::map<IpAddress, std::vector<NameAllowance>, Less> table_;
};

}  // namespace corral
