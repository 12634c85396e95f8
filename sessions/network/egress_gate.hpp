#pragma once
// What one session's egress proxy consults for every new connection: the current rules (replaced
// wholesale by PATCH .../network, so a connection is judged by one consistent rule set, and
// connections already open keep going), the operator's hosts-file override, and the count of
// refusals the session record reports (`egress.refused`). Every refusal is also logged, and counted
// daemon-wide (`corral_egress_refused_total` in GET /metrics), which outlives the sessions.
//
// Threading: the daemon's io_context thread, like the session.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "policies/egress_rules.hpp"
#include "sessions/network/egress_hosts.hpp"

namespace corral {

/// The daemon-wide side of egress: hosts override, where refusals are logged and counted.
struct EgressEnvironment {
    std::shared_ptr<const EgressHosts> hosts;        ///< --egress-hosts-file; may be null
    std::function<void(const std::string&)> log;     ///< one line per refusal; may be empty
    /// Refusals of every session since the daemon started (a session's own count ends with its
    /// record; this one does not, so the metric is a true counter); may be null.
    std::shared_ptr<uint64_t> refused_total;
};

/// The egress side of an isolated session's record (`egress` in the API).
struct EgressInfo {
    EgressSpec policy;      ///< the rules in force now (policy file, then PATCH .../network)
    uint64_t refused = 0;   ///< connections the proxy refused so far
    uint16_t proxy_port = 0;  ///< the HTTP proxy's port inside the namespace (127.0.0.1)
};

/// One session's egress rules and refusal count.
class EgressGate {
  public:
    EgressGate(std::string session_id, EgressRules rules, EgressEnvironment environment)
        : session_id_(std::move(session_id)),
          rules_(std::make_shared<const EgressRules>(std::move(rules))),
          environment_(std::move(environment)) {}

    /// The rules in force now (a snapshot: later changes do not alter it).
    std::shared_ptr<const EgressRules> rules() const { return rules_; }
    /// Replaces the rules for every connection from now on.
    void set_rules(EgressRules rules) { rules_ = std::make_shared<const EgressRules>(std::move(rules)); }
    /// The hosts override, or nullptr.
    const EgressHosts* hosts() const { return environment_.hosts.get(); }
    /// Counts and logs one refused connection to `destination` by `rule`.
    void refuse(const std::string& destination, const std::string& rule) {
        ++refused_;
        if (environment_.refused_total) ++*environment_.refused_total;
        if (environment_.log)
            environment_.log("session " + session_id_ + ": egress to " + destination +
                             " refused: " + rule);
    }
    /// Connections refused so far.
    uint64_t refused() const { return refused_; }

  private:
    std::string session_id_;
    std::shared_ptr<const EgressRules> rules_;
    EgressEnvironment environment_;
    uint64_t refused_ = 0;
};

}  // namespace corral
