#pragma once
// The session holder's descriptor store (issue 12.2, DESIGN.md "Surviving the daemon": output
// written while the daemon was down is not lost).
//
// A process's stdout/stderr read ends (a terminal's pty master) live in corrald; when corrald dies
// the pipes lose their last reader and the sandboxed writer gets SIGPIPE. So the session's holder
// (its PID 1, sandbox.hpp; a "keeper" without namespaces for policy `none`) keeps a copy of each:
// the daemon passes them over a socketpair (SCM_RIGHTS, one non-blocking sendmsg) and the holder
// dup2()s each into a slot number the daemon picked and journalled. The holder keeps its own end
// AND a copy of the daemon's end at fixed descriptors, so the daemon's death never hangs the
// channel up and requests still queued in it are served after. A restarted corrald takes the
// channel and every slot back with pidfd_getfd(2) (PTRACE_MODE_ATTACH_REALCREDS over the holder:
// root is allowed; a sandboxed process is not, because the holder stays non-dumpable for its whole
// life — see sandbox.cpp) and resumes reading where the pipes stand.
//
// Bounded by construction: a pipe holds 1 MiB (F_SETPIPE_SZ); a writer whose pipe is full blocks
// while the daemon is down — never SIGPIPE, never disk. Slots are bounded by the holder's
// RLIMIT_NOFILE: a slot it could not take (the limit lowered with prlimit from inside the
// session's user namespace) is simply not held, and take() answers EBADF.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <span>

#include "base/error.hpp"
#include "base/unique_fd.hpp"

namespace corral {

/// The holder's end of the store channel, at a fixed descriptor of the holder.
inline constexpr int kStoreHolderFd = 4;
/// The holder's copy of the daemon's end (what a restarted daemon takes back).
inline constexpr int kStoreDaemonFd = 5;
/// The first slot a held descriptor may be put in; every fd below is the holder's own.
inline constexpr int kFirstStoreSlot = 16;
/// Slots above this are refused whatever the holder's limit (a bound on a forged request too).
inline constexpr int kLastStoreSlot = (1 << 20) - 1;
/// Descriptors one hold request carries at most (stdout and stderr, or a pty master).
inline constexpr int kMaxHeldPerRequest = 2;

/// Holder side: serves every request queued on kStoreHolderFd, without blocking. Before each, the
/// holder checks it is still non-dumpable and exits (fail closed) when it is not: a dumpable
/// holder would let a process with CAP_SYS_PTRACE in the session's user namespace take every held
/// descriptor. Async-signal-safe (the holder is a clone of a multi-threaded daemon that never
/// execs).
void serve_store_requests() noexcept;

/// The daemon's end of one holder's store channel.
class DescriptorStore {
  public:
    DescriptorStore() = default;

    /// A new channel: this end, and the holder's end (give it to the holder at clone, which also
    /// keeps a copy of this end's descriptor, channel_fd()).
    static Result<DescriptorStore> create(UniqueFd& holder_end);
    /// Takes back the channel of a holder a previous run of the daemon started (pidfd_getfd of
    /// kStoreDaemonFd), then waits (up to `bound`) until the holder has served every request the
    /// previous run queued, so its slots are what the journal says.
    static Result<DescriptorStore> take_over(int holder_pidfd, std::chrono::milliseconds bound);

    bool valid() const { return channel_.valid(); }
    int channel_fd() const { return channel_.get(); }

    /// Asks the holder to keep copies of `fds` in slots slot, slot+1, ... One non-blocking
    /// sendmsg: EAGAIN when the channel is full (the process is then not held).
    Status hold(int slot, std::span<const int> fds);
    /// Asks the holder to close slots slot .. slot+count-1 (best effort).
    void release(int slot, int count);
    /// Waits until the holder answered a request sent now: every earlier one was served.
    Status sync(std::chrono::milliseconds bound);

    /// A copy of the descriptor in `slot` of the holder (pidfd_getfd). EBADF: nothing is held
    /// there.
    static Result<UniqueFd> take(int holder_pidfd, int slot);

  private:
    explicit DescriptorStore(UniqueFd channel) : channel_(std::move(channel)) {}
    UniqueFd channel_;
    uint64_t next_nonce_ = 1;
};

}  // namespace corral
