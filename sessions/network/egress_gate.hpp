#pragma once
// What one session's egress proxy, relay and DNS resolver consult for every new connection or
// query: the current rules (replaced wholesale by PATCH .../network, so a connection is judged by
// one consistent rule set, and connections already open keep going), the operator's hosts-file
// override, the name-bound allowances the resolver handed out (name_allowances.hpp), and the
// count of refusals the session record reports (`egress.refused`). Every refusal is counted
// daemon-wide too (`corral_egress_refused_total` in GET /metrics, which outlives the sessions) and
// logged, at most kLogBurst lines per kLogWindow: a sandbox sending refused DNS queries in a loop
// must not fill the daemon's log (the count stays exact, and a line says how many went unlogged).
//
// Threading: the daemon's io_context thread, like the session.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "policies/egress_rules.hpp"
#include "sessions/network/egress_hosts.hpp"
#include "sessions/network/host_addresses.hpp"
#include "sessions/network/name_allowances.hpp"

namespace corral {

/// The daemon-wide side of egress: hosts override, where refusals are logged and counted.
struct EgressEnvironment {
    std::shared_ptr<const EgressHosts> hosts;        ///< --egress-hosts-file; may be null
    std::function<void(const std::string&)> log;     ///< one line per refusal; may be empty
    /// Refusals of every session since the daemon started (a session's own count ends with its
    /// record; this one does not, so the metric is a true counter); may be null.
    std::shared_ptr<uint64_t> refused_total;
    /// The resolv.conf bound over isolated sandboxes' /etc/resolv.conf (session_resolv_conf.hpp);
    /// empty: the sandbox keeps the host's.
    std::string resolv_conf;
    /// An egress tunnel (CONNECT, transparent relay) with no byte either way for this long is
    /// closed (corrald --egress-idle-timeout); zero: never.
    std::chrono::milliseconds tunnel_idle{kDefaultTunnelIdle};
    static constexpr std::chrono::milliseconds kDefaultTunnelIdle{std::chrono::minutes(10)};
    /// The TTL of the session resolver's answers and the grace an answered address stays open
    /// beyond it (corrald --egress-dns-ttl, --egress-dns-grace).
    std::chrono::seconds dns_ttl{60};
    std::chrono::seconds dns_grace{30};
};

/// The egress side of an isolated session's record (`egress` in the API).
struct EgressInfo {
    EgressSpec policy;      ///< the rules in force now (policy file, then PATCH .../network)
    uint64_t refused = 0;   ///< connections the proxy refused so far
    uint16_t proxy_port = 0;  ///< the HTTP proxy's port inside the namespace (127.0.0.1)
    uint16_t dns_port = 0;    ///< the DNS resolver's port inside (127.0.0.1); 0 when none
    /// Whether direct TCP has its transparent path (nf_tables present and programmed); when
    /// not, `transparent_error` says why (e.g. the kernel has no nf_tables) and direct TCP stays
    /// unrouted.
    bool transparent = false;
    std::string transparent_error;
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
    void set_rules(EgressRules rules) {
        rules_ = std::make_shared<const EgressRules>(std::move(rules));
    }
    /// How long an egress tunnel may carry nothing before it is closed (zero: forever).
    std::chrono::milliseconds tunnel_idle() const { return environment_.tunnel_idle; }
    /// The hosts override, or nullptr.
    const EgressHosts* hosts() const { return environment_.hosts.get(); }
    /// Counts and logs one refused connection (or DNS query) to `destination` by `rule`.
    void refuse(const std::string& destination, const std::string& rule) {
        refuse_described([&] { return std::pair<std::string, std::string>(destination, rule); });
    }
    /// The same, for refusals a sandbox can make as fast as it sends (direct TCP SYNs):
    /// `describe()` returns {destination, rule} and is called only for a refusal that is logged,
    /// so past the log budget a refusal costs corrald's loop a counter, not strings and a rule
    /// lookup.
    template <typename Describe>
    void refuse_described(Describe&& describe) {
        ++refused_;
        if (environment_.refused_total) ++*environment_.refused_total;
        if (!environment_.log) return;
        const auto now = std::chrono::steady_clock::now();
        if (now - window_start_ >= kLogWindow) {
            if (unlogged_ != 0)
                environment_.log("session " + session_id_ + ": " + std::to_string(unlogged_) +
                                 " more egress refusals were not logged");
            window_start_ = now;
            logged_ = unlogged_ = 0;
        }
        if (logged_ >= kLogBurst) {
            ++unlogged_;
            return;
        }
        ++logged_;
        const auto [destination, rule] = describe();
        environment_.log("session " + session_id_ + ": egress to " + destination +
                         " refused: " + rule);
    }
    /// Connections refused so far.
    uint64_t refused() const { return refused_; }
    /// Logs `line` about this session's egress (not a refusal).
    void log(const std::string& line) const {
        if (environment_.log) environment_.log("session " + session_id_ + ": " + line);
    }

    /// The addresses the session's DNS resolver handed out for allowed names.
    NameAllowances& allowances() { return allowances_; }
    /// Judges a direct TCP connection (the transparent relay): by the rules alone, and else by a
    /// live name-bound allowance of `address` whose name the rules in force still allow — judged
    /// again as an address of that name, so deniedCIDRs and the protected ranges still refuse.
    /// Any one of the address's names that passes opens it.
    EgressVerdict check_direct(const IpAddress& address, uint16_t port) const {
        const bool host_local = is_host_address(address);
        EgressVerdict verdict = rules_->check_address(address, port, false, false, host_local);
        if (verdict.allowed) return verdict;
        for (const NameAllowance* allowance :
             allowances_.find(address, std::chrono::steady_clock::now())) {
            if (!rules_->check_name(allowance->name).allowed) continue;
            EgressVerdict named =
                rules_->check_address(address, port, true, allowance->pinned, host_local);
            if (named.allowed) return named;
            verdict = named;  // the reason an allowed name's address is still refused
        }
        return verdict;
    }

    static constexpr size_t kLogBurst = 50;
    static constexpr std::chrono::seconds kLogWindow{10};

  private:
    std::string session_id_;
    std::shared_ptr<const EgressRules> rules_;
    EgressEnvironment environment_;
    NameAllowances allowances_;
    uint64_t refused_ = 0;
    std::chrono::steady_clock::time_point window_start_{};
    size_t logged_ = 0;
    size_t unlogged_ = 0;
};

}  // namespace corral
