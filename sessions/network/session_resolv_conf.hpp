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
// The bind needs a regular /etc/resolv.conf on the host as its mount point; where the host has a
// symlink there (systemd-resolved's stub) or none, sandboxes keep the host's view and the daemon
// says so in its log. The resolver still answers at 127.0.0.1:53 then.

#include <string>

#include "base/error.hpp"

namespace corral {

/// The file's text.
std::string session_resolv_conf_text();
/// Writes <state_dir>/resolv.conf (atomically, 0444) and returns its path; EINVAL naming why
/// when the host's /etc/resolv.conf (`host_resolv_conf`) is not a regular file to bind over.
Result<std::string> write_session_resolv_conf(
    const std::string& state_dir, const std::string& host_resolv_conf = "/etc/resolv.conf");

}  // namespace corral
