#pragma once
// corrald's share of the host's inotify limits, and each session's share of that.
//
// Why: the kernel counts inotify instances (fs.inotify.max_user_instances, 128 on Debian) and
// watches (max_user_watches) per user, and corrald's file watches are root's: every root process
// on the host (systemd, udev, log shippers) draws on the same two counts. Without a bound, one
// session's restricted token could open a watch per connection until the host's root had none
// left (a red-team finding of stop 44: 130 watches of one session, and a root process outside
// corral then got EMFILE from inotify_init1). The same class as containers sharing one host user's
// inotify instances, where one container's watchers starve the others and the host's daemons.
//
// So a watch takes a lease first: one instance, and its directories one by one as it grows. A
// session may hold `instances_per_session` leases and `directories_per_session` directories;
// corrald as a whole half of the host's limits (the rest stays for the host's own use). Event-loop
// thread only.

#include <cstddef>
#include <memory>
#include <string>
#include <unordered_map>

#include "base/error.hpp"

namespace corral {

class InotifyBudget {
    struct State;  // the counts, shared by the budget and its leases (below)

  public:
    struct Limits {
        size_t instances = 64;                  ///< corrald's file watches at once
        size_t directories = 65536;             ///< directories all of them watch together
        size_t instances_per_session = 8;       ///< one session's watches at once
        size_t directories_per_session = 8192;  ///< one session's directories together
    };
    /// Half of the host's max_user_instances and max_user_watches (read now; the defaults above
    /// where they cannot be read), per session the fixed shares above, never above corrald's.
    static Limits from_host();

    explicit InotifyBudget(Limits limits) : state_(std::make_shared<State>(limits)) {}
    InotifyBudget(const InotifyBudget&) = delete;
    InotifyBudget& operator=(const InotifyBudget&) = delete;

    /// One watch's share: its instance and the directories it has charged. Gives them back when
    /// it goes. It holds the budget's counts itself: a watch coroutine destroyed with the
    /// io_context at shutdown may outlive the Api that owned the budget (review of stop 44).
    class Lease {
      public:
        Lease(const Lease&) = delete;
        Lease& operator=(const Lease&) = delete;
        ~Lease();
        /// Charges one more directory; E2BIG, naming the share that is full, when the session's
        /// or corrald's directories are all in use.
        Status add_directory();
        /// Gives back `count` directories this lease charged.
        void remove_directories(size_t count);
        size_t directories() const { return directories_; }

      private:
        friend class InotifyBudget;
        Lease(std::shared_ptr<State> budget, std::string sid)
            : budget_(std::move(budget)), sid_(std::move(sid)) {}
        std::shared_ptr<State> budget_;
        std::string sid_;
        size_t directories_ = 0;
    };

    /// A lease for a new watch of session `sid`: EUSERS when the session holds
    /// instances_per_session watches already, EMFILE when corrald holds its whole share.
    Result<std::unique_ptr<Lease>> acquire(const std::string& sid);

    const Limits& limits() const { return state_->limits; }
    size_t instances_in_use() const { return state_->instances; }
    size_t directories_in_use() const { return state_->directories; }

  private:
    struct SessionShare {
        size_t instances = 0;
        size_t directories = 0;
    };
    struct State {
        explicit State(Limits l) : limits(l) {}
        Limits limits;
        size_t instances = 0;
        size_t directories = 0;
        std::unordered_map<std::string, SessionShare> sessions;
    };
    std::shared_ptr<State> state_;
};

}  // namespace corral
