#pragma once
// A delegated transient scope from systemd over D-Bus (libsystemd's sd-bus), for hosts where the
// cgroup corral starts in holds other processes (a login shell's session-N.scope). What
// `systemd-run --scope -p Delegate=yes` does: StartTransientUnit with PIDs=[ours] and
// Delegate=yes, then wait for the job to finish, when systemd has moved us into the scope.
//
// Kept out of corral_isolation (its own library, corral_systemd_scope) because libsystemd has no
// static archive on Debian and the `corral` command is linked statically by default.

#include <string>

#include "base/error.hpp"
#include "isolation/cgroup_placement.hpp"

namespace corral {

/// Asks the system manager (the user manager when not root) for transient scope `unit`
/// (".scope") holding this process, with Delegate=yes, and waits (bounded, 30 s) until its start
/// job is done. Errors name the bus call and systemd's own message.
Status request_delegated_scope(const std::string& unit);

/// What this binary can ask systemd for: request_delegated_scope where it links libsystemd
/// (library corral_systemd_scope), an empty requester where it does not (corral_no_systemd_scope,
/// for the statically linked `corral`): place_cgroups then says so.
ScopeRequester scope_requester();

}  // namespace corral
