// The pathname unix sockets bound on the host, and where their files are now: what the mount plan
// masks so that a sandbox cannot connect() to a host service it happens to see (issue 10 item 3).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <vector>

namespace corral {

/// A unix socket bound to a path in the caller's network namespace.
struct BoundUnixSocket {
    /// The path as its binder passed it, byte for byte: absolute, or relative to the binder's
    /// working directory at the time; any byte but NUL (a newline included).
    std::string name;
    /// Its file's inode number as the kernel reports it (sock_diag's UNIX_DIAG_VFS: 32 bits);
    /// 0 when only a name is known. Its device is not kept: on overlayfs stat() says the upper
    /// layer's for a file, on btrfs a subvolume's, where the kernel names the superblock's.
    ino_t inode = 0;
    /// The socket's own inode (what /proc/<pid>/fd links name as "socket:[N]"); 0 when unknown.
    ino_t socket_inode = 0;
};

/// Every pathname socket bound in the caller's network namespace, from the kernel's sock_diag
/// (NETLINK_SOCK_DIAG: UNIX_DIAG_NAME, UNIX_DIAG_VFS), or, where that is unavailable (a kernel
/// without unix_diag; said once on stderr), from /proc/net/unix's text: names only, where a
/// name holding a newline is lost.
std::vector<BoundUnixSocket> bound_unix_sockets();


/// The files of the sockets bound_unix_sockets() lists, where they can be found:
/// - the socket file at its name, whichever socket it is now (masking one more is safe);
/// - unless that is its own, the entry of its name's directory with its inode number (a socket
///   bound under one name and renamed into place, the usual way to replace one atomically);
/// - for a relative name, the same from the working directory of each process holding the
///   socket (its descriptors in /proc, as `ss -xp` finds them: at most kMaxDescriptorsRead
///   read per call, and what was found remembered while the socket exists; a socket no holder
///   explained is looked for again after a while).
/// Not found: a file moved to another directory (with a directory renamed above it, too: a
/// sandbox that can write where a host socket is masked can do that, and the next session there
/// does not find the socket; README, residual risk), linked elsewhere, or removed. The real paths
/// (symbolic links resolved), sorted, each once. Directories are read at most once per call, and
/// kMaxDirectoryEntries entries in all, keeping only the inodes looked for.
std::vector<std::string> host_unix_socket_files();

/// Bounds on what one host_unix_socket_files() reads (a local user, or a sandbox sharing the
/// host's network namespace, can make both large).
inline constexpr size_t kMaxDescriptorsRead = 100000;
inline constexpr size_t kMaxDirectoryEntries = 100000;

}  // namespace corral
