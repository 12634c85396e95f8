#include "isolation/seccomp_listener.hpp"

#include <linux/seccomp.h>
#include <poll.h>
#include <sys/ioctl.h>

#include <cerrno>

#include "isolation/seccomp_listing.hpp"
#include "isolation/seccomp_refusals.hpp"

namespace corral {
namespace {

/// The bucket of numbers past kMaxDistinct.
constexpr int kOtherNumber = -1;

std::map<std::string, uint64_t> by_name(const std::map<int, uint64_t>& by_number) {
    std::map<std::string, uint64_t> out;
    for (const auto& [nr, count] : by_number) {
        std::string name = nr == kOtherNumber ? "other" : syscall_name_of(nr);
        if (name.empty()) name = "syscall-" + std::to_string(nr);
        out[name] += count;
    }
    return out;
}

/// Whether a notification is queued now (poll with no wait); sets `hung_up` when the filter has
/// no process left.
bool notification_queued(int fd, bool& hung_up) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 0) <= 0) return false;
    if (p.revents & POLLIN) return true;
    if (p.revents & (POLLHUP | POLLERR | POLLNVAL)) hung_up = true;
    return false;
}

}  // namespace

SeccompRefusals::SeccompRefusals(std::shared_ptr<const std::vector<sock_filter>> marked)
    : marked_(std::move(marked)) {}

void SeccompRefusals::attach(UniqueFd listener) {
    listener_ = std::move(listener);
    ever_attached_ = listener_.valid();
    hung_up_ = false;
}

void SeccompRefusals::count(std::map<int, uint64_t>& by_number, int nr) {
    if (by_number.size() >= kMaxDistinct && by_number.count(nr) == 0) nr = kOtherNumber;
    ++by_number[nr];
}

size_t SeccompRefusals::serve(size_t max) {
    size_t answered = 0;
    for (size_t attempt = 0; listener_ && attempt < max; ++attempt) {
        if (!notification_queued(listener_.get(), hung_up_)) break;
        seccomp_notif request{};  // the kernel refuses a buffer that is not zeroed
        if (::ioctl(listener_.get(), SECCOMP_IOCTL_NOTIF_RECV, &request) != 0) {
            if (errno == EINTR || errno == ENOENT) continue;  // ENOENT: the caller was killed
            break;
        }
        seccomp_notif_resp response{};
        response.id = request.id;
        const RefusalVerdict verdict =
            marked_ ? refusal_verdict(*marked_, request.data) : RefusalVerdict{};
        if (verdict.kind == RefusalVerdict::logged) {
            // Allowed by the policy (action: log), decided on registers alone: see the header.
            response.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
            count(logged_, request.data.nr);
            ++logged_total_;
        } else {
            // A refusal: the filter's own errno. A notification the marked program does not mark
            // cannot come from our filter; it is refused as a closed listener would (ENOSYS),
            // never continued.
            response.error =
                verdict.kind == RefusalVerdict::refused ? -verdict.error : -ENOSYS;
            count(refused_, request.data.nr);
            ++refused_total_;
        }
        // ENOENT: the caller died (or was signalled) meanwhile; it was refused either way.
        (void)::ioctl(listener_.get(), SECCOMP_IOCTL_NOTIF_SEND, &response);
        ++answered;
    }
    return answered;
}

RefusalCounts SeccompRefusals::counts() const {
    RefusalCounts out;
    out.counted = ever_attached_;
    out.refused = by_name(refused_);
    out.refused_total = refused_total_;
    out.logged = by_name(logged_);
    out.logged_total = logged_total_;
    return out;
}

}  // namespace corral
