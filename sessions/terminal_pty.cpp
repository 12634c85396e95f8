#include "sessions/terminal_pty.hpp"
#include "base/openat2.hpp"

#include <fcntl.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <termios.h>
#include <unistd.h>

#include <string>

namespace corral {
namespace {

/// The sandbox's /dev/pts/ptmx, resolved inside its root: no symlink (its own or a magic link)
/// may lead out, and `..` cannot climb above its root.
Result<UniqueFd> open_sandbox_ptmx(pid_t holder_pid) {
    const std::string root_path = "/proc/" + std::to_string(holder_pid) + "/root";
    UniqueFd root(::open(root_path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!root) return sys_error("open the sandbox's root `" + root_path + "`");
    open_how how{};
    how.flags = O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK;
    how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
    const int fd = openat2_retrying(root.get(), "dev/pts/ptmx", how);
    if (fd < 0) return sys_error("open the sandbox's /dev/pts/ptmx");
    UniqueFd master(fd);

    // Whatever is at that path now must be a ptmx of a devpts instance that is not the host's.
    struct statfs fs {};
    struct stat st {};
    if (::fstatfs(master.get(), &fs) != 0 || ::fstat(master.get(), &st) != 0)
        return sys_error("stat the sandbox's /dev/pts/ptmx");
    if (fs.f_type != DEVPTS_SUPER_MAGIC || !S_ISCHR(st.st_mode) || major(st.st_rdev) != 5 ||
        minor(st.st_rdev) != 2)
        return sys_error(EPERM, "the sandbox's /dev/pts/ptmx is not a devpts ptmx");
    struct stat host {};
    if (::stat("/dev/pts/ptmx", &host) == 0 && host.st_dev == st.st_dev)
        return sys_error(EPERM, "the sandbox's /dev/pts is the host's devpts instance");
    return master;
}

}  // namespace

Status set_terminal_size(int master_fd, TerminalSize size) {
    if (size.cols == 0 || size.rows == 0 || size.cols > kMaxTerminalCells ||
        size.rows > kMaxTerminalCells)
        return sys_error(EINVAL, "terminal size " + std::to_string(size.cols) + "x" +
                                     std::to_string(size.rows) + " is outside 1.." +
                                     std::to_string(kMaxTerminalCells));
    winsize ws{};
    ws.ws_col = size.cols;
    ws.ws_row = size.rows;
    if (::ioctl(master_fd, TIOCSWINSZ, &ws) != 0) return sys_error("TIOCSWINSZ");
    return {};
}

Result<PtyPair> open_session_pty(pid_t holder_pid, bool mount_namespace, TerminalSize size) {
    PtyPair pair;
    if (holder_pid > 0 && mount_namespace) {
        auto master = open_sandbox_ptmx(holder_pid);
        if (!master) return std::move(master.error());
        pair.master = std::move(*master);
    } else {
        pair.master.reset(::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK));
        if (!pair.master) return sys_error("posix_openpt");
    }
    int unlock = 0;
    if (::ioctl(pair.master.get(), TIOCSPTLCK, &unlock) != 0) return sys_error("unlock the pty");
    const int slave = ::ioctl(pair.master.get(), TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (slave < 0) return sys_error("open the pty's slave (TIOCGPTPEER)");
    pair.slave.reset(slave);
    CORRAL_TRY(set_terminal_size(pair.master.get(), size), "");
    return pair;
}

}  // namespace corral
