#pragma once
// Which answers of a seccomp filter are refusals the supervisor counts (issue 17.6), and the
// three forms one compiled program takes.
//
// compile_marked_seccomp (confinement.hpp) returns the "marked" program: every answer that is a
// refusal by policy (a deny rule's errno, strict's ENOSYS for what it does not list, the guard's
// setuid/personality/socket refusals) is written SECCOMP_RET_TRACE | errno, and every `action:
// log` answer SECCOMP_RET_TRACE | kLoggedData. No policy uses RET_TRACE, so the mark is free.
// Compatibility answers that are not refusals (clone3 and openat2 -> ENOSYS so libc falls back,
// unassigned numbers -> ENOSYS) stay plain RET_ERRNO and are never counted. From the marked
// program:
//   - without_listener(): the marks become RET_ERRNO | errno and RET_LOG: the filter as it was
//     before counting, exported by `corral policy seccomp` and installed when no supervisor can
//     listen (nested under another listener: EBUSY; sendmsg refused by the policy).
//   - notifying(): the marks become RET_USER_NOTIF: the kernel stops the calling thread and hands
//     the call to the supervisor's listener (seccomp_listener.hpp).
//   - the marked program itself is what the supervisor runs (evaluate_seccomp,
//     seccomp_listing.hpp) on the notification's seccomp_data to get the answer: the very errno
//     the filter would have given, by construction, since the filter reads nothing but
//     seccomp_data.

#include <linux/filter.h>
#include <linux/seccomp.h>

#include <cstdint>
#include <vector>

namespace corral {

/// RET_TRACE data of an `action: log` answer (errnos stop at 4095).
inline constexpr uint16_t kLoggedData = 0x8000;

/// The marked answer for a counted refusal with `error`.
constexpr uint32_t refusal_mark(uint16_t error) {
    return SECCOMP_RET_TRACE | error;
}

/// The marks become RET_ERRNO / RET_LOG: what the kernel enforces when nobody listens.
std::vector<sock_filter> without_listener(const std::vector<sock_filter>& marked);
/// The marks become RET_USER_NOTIF.
std::vector<sock_filter> notifying(const std::vector<sock_filter>& marked);
/// Whether any answer of the program is marked (otherwise there is nothing to count).
bool has_refusal_marks(const std::vector<sock_filter>& marked);

/// What the marked program answers one call.
struct RefusalVerdict {
    enum Kind { not_marked, refused, logged } kind = not_marked;
    int error = 0;  ///< refused: the errno to answer with
};
/// The marked program's verdict on `data`.
RefusalVerdict refusal_verdict(const std::vector<sock_filter>& marked, const seccomp_data& data);

}  // namespace corral
