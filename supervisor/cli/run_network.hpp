#pragma once
// What `corral run` does with a policy's network section. A one-shot run has no daemon, hence
// none of corrald's egress machinery (HTTP proxy, transparent relay, session DNS resolver,
// network.allow forwarders, leased ports): those run on corrald's event loop and live as long as
// a session does. So an isolated one-shot run reaches nothing outside its namespace, whatever
// network.egress says — the same as `mode: deny-all` — and its /etc/resolv.conf is the host's,
// which names resolvers it cannot reach. This is fail-closed: a policy that opens egress never
// gets more under `corral run`, only less; the note below says so before the job starts, and
// `corral policy check` prints it with the policy.

#include <string>

#include "policies/policy.hpp"

namespace corral::cli {

/// A one-line note ("# corral run: ...\n") when `policy` asks for network access corral run does
/// not give (isolated network with egress other than deny-all, network.allow or ports); empty
/// when the policy means the same under corral run as under corrald.
std::string describe_run_network(const Policy& policy);

}  // namespace corral::cli
