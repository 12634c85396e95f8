#pragma once
// The supervisor's end of a notifying seccomp filter (seccomp_refusals.hpp): it answers every
// call the filter hands over and counts them by syscall name (issue 17.6).
//
// Why a user-notification listener (seccomp_unotify(2)): the kernel hands each marked call to
// the process that holds the listener, so counts are exact, per process tree, and need no
// privileges or host-global state (RET_LOG + the audit stream is host-wide and needs
// CAP_AUDIT_READ; RET_TRAP would send the program a SIGSYS it never had before).
//
// The answers (TOCTOU, seccomp_unotify(2) "Caveats"; the CVE-2022-30594 class of tracer /
// seccomp interplay): a refused call is answered with the errno the marked program gives for
// the notification's seccomp_data: registers copied by the kernel before the filter ran, never
// memory the program can change afterwards. A refused call is never answered
// SECCOMP_USER_NOTIF_FLAG_CONTINUE. Only an `action: log` call, which the policy allows, is
// continued: its verdict, like the filter's, depends on those frozen registers alone, so letting
// it run is exactly what RET_LOG did.
//
// The listener is read without ever blocking: serve() takes only notifications poll() shows as
// queued, at most `max` per call, so a sandbox that floods refused calls costs its caller bounded
// work per readiness (its threads wait in the kernel meanwhile). The counts live in a map keyed
// by syscall number that stops growing at kMaxDistinct numbers (the rest go to one bucket), so a
// flood cannot grow memory either.
//
// When the listener is closed (the supervisor ended or crashed) the kernel answers every later
// marked call ENOSYS: refused calls stay refused, with ENOSYS instead of their errno, and
// `action: log` calls fail the same way.

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <linux/filter.h>

#include "base/unique_fd.hpp"

namespace corral {

/// What a process tree had refused (and logged), by syscall name.
struct RefusalCounts {
    /// Whether a listener counted them; false when the filter had to go without one (nested
    /// under another corral, a kernel without user notification, kill-process, sendmsg refused).
    bool counted = false;
    std::map<std::string, uint64_t> refused;
    uint64_t refused_total = 0;
    std::map<std::string, uint64_t> logged;  ///< `action: log`: allowed, counted
    uint64_t logged_total = 0;
};

/// Counts and answers the notifications of one filter.
class SeccompRefusals {
  public:
    /// Distinct syscall numbers counted on their own; any further ones share one bucket.
    static constexpr size_t kMaxDistinct = 512;

    /// `marked`: the marked program the filter was made from (its answers).
    explicit SeccompRefusals(std::shared_ptr<const std::vector<sock_filter>> marked);

    /// Takes the listener the child handed over.
    void attach(UniqueFd listener);
    /// Whether a listener is attached (false: the filter is installed without one, nothing is
    /// counted).
    bool attached() const { return listener_.valid(); }
    /// The listener's descriptor, for poll/asio (-1 when none).
    int fd() const { return listener_.get(); }
    /// Answers up to `max` notifications already queued, never blocking. Returns how many it
    /// answered. When the filter has no process left and nothing is queued, hung_up() turns true.
    size_t serve(size_t max);
    /// The filter's processes are all gone: nothing will ever be queued again.
    bool hung_up() const { return hung_up_; }
    /// Closes the listener (later marked calls get ENOSYS from the kernel).
    void close() { listener_.reset(); }
    /// A snapshot of the counts.
    RefusalCounts counts() const;

  private:
    void count(std::map<int, uint64_t>& by_number, int nr);

    std::shared_ptr<const std::vector<sock_filter>> marked_;
    UniqueFd listener_;
    bool ever_attached_ = false;
    bool hung_up_ = false;
    std::map<int, uint64_t> refused_;  ///< by number; kOtherNumber collects the overflow
    std::map<int, uint64_t> logged_;
    uint64_t refused_total_ = 0;
    uint64_t logged_total_ = 0;
};

}  // namespace corral
