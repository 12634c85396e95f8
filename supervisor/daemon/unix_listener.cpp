#include "supervisor/daemon/unix_listener.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace corral::daemon {
namespace {

/// `path` as a sockaddr_un; false when it does not fit.
bool unix_address(const std::string& path, sockaddr_un& addr) {
    addr = {};
    addr.sun_family = AF_UNIX;
    if (path.size() >= sizeof addr.sun_path) return false;
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    return true;
}

}  // namespace

bool unix_socket_in_use(const std::string& path) {
    sockaddr_un addr;
    if (!unix_address(path, addr)) return false;
    UniqueFd probe(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!probe) return false;
    return ::connect(probe.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0;
}

void remove_socket_file(const BoundUnixSocket& bound) {
    if (bound.dir) (void)::unlinkat(bound.dir.get(), bound.name.c_str(), 0);
}

Result<BoundUnixSocket> bind_unix_socket(const std::string& path) {
    if (path.size() >= sizeof(sockaddr_un::sun_path))
        return sys_error(ENAMETOOLONG, "socket path `" + path + "` is too long");
    const size_t slash = path.rfind('/');
    const std::string dir = slash == std::string::npos ? "."
                            : slash == 0               ? "/"
                                                       : path.substr(0, slash);
    BoundUnixSocket bound;
    bound.name = slash == std::string::npos ? path : path.substr(slash + 1);
    const std::string& name = bound.name;
    if (name.empty() || name == "." || name == "..")
        return sys_error(EINVAL, "socket path `" + path + "` names a directory");
    // The socket's directory is opened once; from here on only its descriptor is used (the
    // bind goes through /proc/self/fd/N/NAME), so nothing resolves the path again (issue 10,
    // second round: chmod and chown by path after bind followed whatever the path named by
    // then, a symlink to /etc/shadow included: CVE-2018-15664's shape).
    UniqueFd dir_fd(::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!dir_fd) return sys_error("socket directory `" + dir + "`");
    struct stat dir_st {};
    if (::fstat(dir_fd.get(), &dir_st) != 0) return sys_error("stat `" + dir + "`");
    // Whoever else may write the directory can swap the socket between our calls, or before
    // clients connect: only our own directory, or a sticky one (/tmp), where nobody else may
    // rename or remove what we created.
    const bool others_write = (dir_st.st_mode & (S_IWGRP | S_IWOTH)) != 0;
    if (dir_st.st_uid != ::geteuid() || (others_write && !(dir_st.st_mode & S_ISVTX))) {
        char mode[8];
        std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(dir_st.st_mode & 07777));
        return sys_error(EPERM, "socket directory `" + dir + "` (owner uid " +
                                    std::to_string(dir_st.st_uid) + ", mode " + mode +
                                    ") may be written by others, who could swap the socket: put "
                                    "it in a directory only corrald's user may write (e.g. "
                                    "/run/corral)");
    }
    const std::string pinned = "/proc/self/fd/" + std::to_string(dir_fd.get()) + "/" + name;
    sockaddr_un addr;
    if (!unix_address(pinned, addr))
        return sys_error(ENAMETOOLONG, "socket name `" + name + "` is too long");
    struct stat st {};
    if (::fstatat(dir_fd.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
        if (!S_ISSOCK(st.st_mode))
            return sys_error(EEXIST, "`" + path + "` exists and is not a socket");
        if (unix_socket_in_use(pinned))
            return sys_error(EADDRINUSE, "another daemon answers on `" + path + "`");
        if (::unlinkat(dir_fd.get(), name.c_str(), 0) != 0)
            return sys_error("remove stale socket `" + path + "`");
    }
    bound.socket.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!bound.socket) return sys_error("socket for `" + path + "`");
    // The socket is born 0660: no chmod by path afterwards. umask is per process: a file another
    // thread creates in this instant gets a stricter mode, never a looser one.
    const mode_t saved_umask = ::umask(0117);
    const int bound_ok =
        ::bind(bound.socket.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
    const int bind_errno = errno;
    ::umask(saved_umask);
    if (bound_ok != 0) return sys_error(bind_errno, "bind `" + path + "`");
    bound.dir = std::move(dir_fd);
    // From here on the file is ours: a failure removes it, or the next start finds a socket
    // nobody answers on and the path a client was told about names nothing that works.
    auto fail = [&](Error error) -> Result<BoundUnixSocket> {
        remove_socket_file(bound);
        return error;
    };
    // Nobody can connect before listen(), so fixing owner and mode here leaves no window; both go
    // through the directory's descriptor and never follow a symlink.
    if (::fchownat(bound.dir.get(), name.c_str(), 0, 0, AT_SYMLINK_NOFOLLOW) != 0)
        return fail(sys_error("chown root:root `" + path + "`"));
    if (::fstatat(bound.dir.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISSOCK(st.st_mode))
        return sys_error(EEXIST, "`" + path + "` is no longer our socket");  // not ours to remove
    // A default ACL on the directory overrides the umask: set the mode, never through a link.
    if ((st.st_mode & 07777) != 0660 &&
        ::fchmodat(bound.dir.get(), name.c_str(), 0660, AT_SYMLINK_NOFOLLOW) != 0)
        return fail(sys_error("chmod 0660 `" + path + "`"));
    return bound;
}

}  // namespace corral::daemon
