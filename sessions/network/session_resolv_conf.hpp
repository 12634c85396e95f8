#pragma once
// The resolv.conf an isolated sandbox sees: the daemon writes it once, at start, as
// <state_dir>/resolv.conf (root's, mode 0444), and every isolated session's mount plan binds it
// read-only over /etc/resolv.conf (mount_plan.hpp). It names the session's own resolver at
// 127.0.0.1:53 inside the namespace (dns_resolver.hpp), so getaddrinfo asks the daemon.
//
// What the sandbox can and cannot change: the file is the daemon's (a sandbox under its own user
// namespace is an unprivileged host uid: even with the bind remounted writable it cannot write a
// root-owned 0444 file), and what matters is not the file but the resolver behind it, which runs
// in the daemon and judges every query by the session's rules. A sandbox that points its own
// resolv.conf elsewhere (or unmounts ours) reaches no other resolver: its namespace routes
// nothing out, and UDP leaves it only as DNS to the daemon.
//
// Whatever the host has at /etc/resolv.conf — a file, a symlink (systemd-resolved's
// ../run/systemd/resolve/stub-resolv.conf) or nothing — the sandbox reads this file there: the
// mount plan follows a link beneath the sandbox's root and binds where it ends, creating the
// mount point in a corral tmpfs when the host has none (isolation/mounts.cpp, add_resolv_conf).

#include <string>

#include "base/error.hpp"

namespace corral {

/// The file's text.
std::string session_resolv_conf_text();
/// Writes <state_dir>/resolv.conf (atomically, 0444) and returns its path.
Result<std::string> write_session_resolv_conf(const std::string& state_dir);

}  // namespace corral
