// The pathname unix sockets bound on the host, and where their files are now: what the mount plan
// masks so that a sandbox cannot connect() to a host service it happens to see (issue 10 item 3).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace corral {

/// A unix socket bound to a path in the caller's network namespace.
struct BoundUnixSocket {
    /// The path as its binder passed it, byte for byte: absolute, or relative to the binder's
    /// working directory at the time; any byte but NUL (a newline included).
    std::string name;
    /// Its file's device and inode as the kernel reports them (sock_diag: a 32-bit inode number,
    /// the kernel's device encoding turned into st_dev's; on overlayfs, the overlay's device,
    /// which stat() does not say for a file); 0 and 0 when only a name is known.
    dev_t device = 0;
    ino_t inode = 0;
    /// The socket's own inode (what /proc/<pid>/fd links name as "socket:[N]"); 0 when unknown.
    ino_t socket_inode = 0;
};

/// Every pathname socket bound in the caller's network namespace, from the kernel's sock_diag
/// (NETLINK_SOCK_DIAG: UNIX_DIAG_NAME, UNIX_DIAG_VFS), or, where that is unavailable (a kernel
/// without unix_diag), from /proc/net/unix's text: names only, and a name holding a newline is
/// lost there.
std::vector<BoundUnixSocket> bound_unix_sockets();

/// The real paths (symbolic links resolved, sorted, each once) of the files of every socket
/// bound_unix_sockets() lists that can be found: the socket file at its name (whichever socket it
/// is now: masking one more is safe); unless that is its own, the entry of its name's directory
/// with its inode number (a socket bound under one name and renamed into place, the usual way to
/// replace one atomically).
/// A relative name is taken from the working directory of a process that holds the socket (found
/// by its descriptors in /proc, as `ss -xp` does; once per socket, remembered while it exists).
/// Not found: a file moved to another directory or removed, a relative name whose binders all
/// changed directory since. Each directory is read at most once per call.
std::vector<std::string> host_unix_socket_files();

}  // namespace corral
