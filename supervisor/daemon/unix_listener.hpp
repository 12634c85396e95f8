#pragma once
// corrald's Unix socket on disk: the file clients connect to. It is made from the directory's
// descriptor only (no path is resolved twice, CVE-2018-15664's shape), born 0660 root:root, and
// a socket this made is never left on disk when setting it up fails.

#include <string>

#include "base/error.hpp"
#include "base/unique_fd.hpp"

namespace corral::daemon {

/// A Unix stream socket bound at a path, not listening yet.
struct BoundUnixSocket {
    UniqueFd socket;
    UniqueFd dir;      ///< the socket's directory, opened once (no path lookups after bind)
    std::string name;  ///< the socket's name in it
};

/// Binds a Unix stream socket at `path`: a stale socket file is removed, but if another daemon
/// answers on it this fails (EADDRINUSE) rather than stealing the path; the directory must be
/// writable by corrald's user alone (or sticky). The socket gets mode 0660 and owner root:root.
/// When anything after the bind fails (chown, chmod), the socket file is removed before the
/// error returns, unless what the name points to is no longer the socket (then it is not ours).
Result<BoundUnixSocket> bind_unix_socket(const std::string& path);

/// Removes the socket file of `bound` (through its directory's descriptor, never the path).
void remove_socket_file(const BoundUnixSocket& bound);

/// True when a process accepts connections on the Unix socket at `path` (another daemon).
bool unix_socket_in_use(const std::string& path);

}  // namespace corral::daemon
