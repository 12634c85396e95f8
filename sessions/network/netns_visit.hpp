#pragma once
// A thread's visit to a network namespace: setns() in, the work, setns() back to the thread's own.
// corrald's namespace thread (netns_runner.hpp) visits a session's namespace for each job and its
// nftables worker (netns_routing.cpp) the caller's namespace for each command; both must never
// run work where the entry failed, nor stay behind once it is done.
//
// Returning home must not fail: a thread left in a session's namespace would keep that namespace
// alive after its session, and whatever it ran next outside a visit would run in the session's
// namespace. setns() to a namespace the thread was in a moment ago fails only when the process
// itself is broken (its capabilities lost, memory exhausted), so the visit aborts corrald then,
// loudly, as the launcher does for its pid namespace (PidNamespaceForChildren): the daemon's
// restart adopts the sessions (DESIGN.md "Surviving the daemon").

#include "base/error.hpp"

namespace corral {

/// The calling thread inside a network namespace from enter() to the end of the visit's scope.
class NetnsVisit {
  public:
    /// Enters the network namespace of `netns` (an fd of one, or a pidfd). `home` is an fd of the
    /// thread's own network namespace, kept open by the caller for the visit's life: where the
    /// visit returns. Fails (EBADF without a way home, else setns's errno) with the thread
    /// where it was: the caller must not run the work then.
    static Result<NetnsVisit> enter(int netns, int home);
    NetnsVisit(NetnsVisit&& other) noexcept;
    NetnsVisit& operator=(NetnsVisit&&) = delete;
    /// Back to `home`; aborts corrald when that fails (see above).
    ~NetnsVisit();

  private:
    explicit NetnsVisit(int home) : home_(home) {}
    int home_ = -1;  ///< not ours to close; -1 once moved from
};

}  // namespace corral
