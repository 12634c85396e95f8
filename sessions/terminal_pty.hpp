#pragma once
// The pseudo-terminal pair of one terminal process (issue 14), opened by the daemon from the
// SANDBOX's own devpts instance when the session has a mount namespace (its /dev/pts is a private
// `newinstance` devpts, mounts.cpp add_dev), never from the host's /dev/ptmx: a slave of the host's
// devpts would let the sandbox see and reach host terminals under /dev/pts (firejail
// CVE-2016-9016-style confusions) and would put the terminal's number space next to the daemon's.
// The master is opened through /proc/<holder>/root with openat2(RESOLVE_IN_ROOT|NO_SYMLINKS) and
// checked to be a devpts ptmx that is not the host's, so a sandbox that rearranged its own /dev
// cannot make the daemon open anything else. The slave comes from TIOCGPTPEER (no path lookup).
// A session without a mount namespace (preset `none`: no isolation at all) gets a host pty.

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

#include "base/error.hpp"
#include "base/unique_fd.hpp"

namespace corral {

/// A terminal's window size in character cells.
struct TerminalSize {
    uint16_t cols = 80;
    uint16_t rows = 24;
};

/// Largest accepted cols/rows (a bound, so a bad client cannot ask for absurd sizes).
inline constexpr uint16_t kMaxTerminalCells = 4096;

/// Bytes of a terminal's output the daemon keeps for a client that (re)attaches (its scrollback).
inline constexpr size_t kTerminalScrollback = 64u << 10;

/// Master (daemon side, O_NONBLOCK|O_CLOEXEC) and slave (the process's stdio) of one pty.
struct PtyPair {
    UniqueFd master;
    UniqueFd slave;
};

/// Opens a pty pair for a session. `holder_pid` > 0 and `mount_namespace`: from the sandbox's
/// devpts; otherwise from the host's /dev/ptmx. The window size is set before anyone reads it.
Result<PtyPair> open_session_pty(pid_t holder_pid, bool mount_namespace, TerminalSize size);

/// TIOCSWINSZ on a master; EINVAL for a size of 0 or above kMaxTerminalCells.
Status set_terminal_size(int master_fd, TerminalSize size);

}  // namespace corral
