#pragma once
// corrald's command line.

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "supervisor/daemon/connection_limits.hpp"

namespace corral::daemon {

/// Everything corrald is told on its command line.
struct DaemonOptions {
    std::string socket_path = "/run/corral/corrald.sock";
    std::string listen;  ///< "127.0.0.1:PORT"; empty = no TCP listener
    std::string state_dir = "/var/lib/corral";
    std::string policy_dir;  ///< extra named policies (*.yaml)
    uint16_t port_first = 40000;
    uint16_t port_last = 40999;
    std::string instance = "corral";  ///< cgroup subtree name (tests use unique ones)
    ConnectionLimits connections;     ///< --max-connections, --header-/--body-/--idle-timeout
    size_t max_process_records = 256;  ///< finished process records kept per session
    /// /etc/hosts-style names the egress proxy answers from instead of DNS (tests, air-gapped
    /// hosts); their addresses are the operator's choice, so loopback/link-local protection is
    /// lifted for them (deniedCIDRs still apply).
    std::string egress_hosts_file;
    /// --egress-idle-timeout: an egress tunnel (CONNECT or transparent relay) with no byte either
    /// way for this long is closed.
    std::chrono::milliseconds egress_idle_timeout{std::chrono::minutes(10)};
    /// --egress-dns-ttl / --egress-dns-grace: the TTL of the session resolver's answers, and how
    /// much longer an address it answered stays open to direct TCP (short ones for tests).
    std::chrono::seconds egress_dns_ttl{60};
    std::chrono::seconds egress_dns_grace{30};
    /// --allow-workdir ROOT (repeatable): sessions may work in existing directories beneath.
    std::vector<std::string> allow_workdir;
    /// --recover: on start, re-adopt journalled sessions that still run (adopt), or end
    /// everything a previous run left (reap).
    bool recover_adopt = true;
    /// --keep-output=on|off: sessions' holders keep output pipes across a restart (on).
    bool keep_output = true;
    bool journal_sync_data = false;  ///< --journal-sync=data: fdatasync every journal record
    /// --prepare POLICY=N (repeatable; issue 18): N (1-64) sessions of named policy POLICY kept
    /// prepared for creations that ask for nothing else. The names are checked at start-up.
    std::map<std::string, size_t> prepare;
    bool help = false;
    bool version = false;  ///< --version: print it and exit
};

/// Parses argv (without argv[0]); EINVAL naming the bad option or value.
Result<DaemonOptions> parse_daemon_options(const std::vector<std::string>& args);
/// The usage text.
std::string daemon_usage();
/// The most sessions one --prepare policy may keep prepared.
inline constexpr size_t kMaxPrepared = 64;

}  // namespace corral::daemon
