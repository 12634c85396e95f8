#pragma once
// The daemon's pool of host loopback TCP ports. Sessions lease ports from it, so no two sessions
// (or two leases of one session) are ever handed the same port. One pool per daemon, passed
// explicitly.
//
// Before a port is handed out the pool binds a probe socket to 127.0.0.1:port: a port some other
// program on the host already listens on is skipped (it stays in the range and is retried on a
// later lease). The probe uses SO_REUSEADDR so a port whose previous connection lingers in
// TIME_WAIT still counts as free, as it does for the session's own server (which should set
// SO_REUSEADDR too).
//
// Leases are handed out round-robin through the range (a cursor after the last lease), so a port
// released a moment ago is the last to be reused and stale clients do not reach a new owner.
//
// Thread-safe: every member locks one mutex.

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/error.hpp"

namespace corral {

/// Pool of loopback ports in [first, last], leased to owners (session ids).
class PortPool {
  public:
    /// A pool over [first, last]; fails (EINVAL) when first == 0 or first > last.
    static Result<std::unique_ptr<PortPool>> create(uint16_t first, uint16_t last);

    /// Leases a free port to `owner`. Error EADDRNOTAVAIL naming the range when none is free.
    Result<uint16_t> lease(const std::string& owner);
    /// Leases exactly `port` to `owner` (a session a previous run of the daemon leased it to):
    /// EINVAL outside the range, EBUSY when it is leased already.
    Status claim(uint16_t port, const std::string& owner);
    /// Returns `port` to the pool; true if it was leased. Releasing twice is harmless (false).
    bool release(uint16_t port);
    /// Releases every port of `owner` (session end); returns the ports released, ascending.
    std::vector<uint16_t> release_all(const std::string& owner);
    /// Ports leased to `owner`, ascending.
    std::vector<uint16_t> leases_of(const std::string& owner) const;
    /// The owner of `port`, if it is leased.
    std::optional<std::string> owner_of(uint16_t port) const;
    /// Number of ports leased now.
    std::size_t leased_count() const;

    /// First port of the range.
    uint16_t first() const { return first_; }
    /// Last port of the range (inclusive).
    uint16_t last() const { return last_; }

  private:
    PortPool(uint16_t first, uint16_t last);

    uint16_t first_;
    uint16_t last_;
    mutable std::mutex mutex_;
    std::map<uint16_t, std::string> leases_;  // port -> owner
    uint32_t cursor_;                         // next port to try
};

/// True if nothing on this host holds 127.0.0.1:`port` (a TCP bind probe succeeds).
bool loopback_port_is_free(uint16_t port);

}  // namespace corral
