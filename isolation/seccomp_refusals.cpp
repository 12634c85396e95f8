#include "isolation/seccomp_refusals.hpp"

#include "isolation/seccomp_listing.hpp"

namespace corral {
namespace {

constexpr uint32_t kMaxErrno = 4095;

bool is_mark(const sock_filter& insn) {
    return insn.code == (BPF_RET | BPF_K) &&
           (insn.k & SECCOMP_RET_ACTION_FULL) == SECCOMP_RET_TRACE;
}

template <typename Rewrite>
std::vector<sock_filter> rewrite_marks(const std::vector<sock_filter>& marked, Rewrite rewrite) {
    std::vector<sock_filter> out = marked;
    for (sock_filter& insn : out) {
        if (is_mark(insn)) insn.k = rewrite(static_cast<uint16_t>(insn.k & SECCOMP_RET_DATA));
    }
    return out;
}

}  // namespace

std::vector<sock_filter> without_listener(const std::vector<sock_filter>& marked) {
    return rewrite_marks(marked, [](uint16_t data) -> uint32_t {
        return data == kLoggedData ? SECCOMP_RET_LOG : SECCOMP_RET_ERRNO | data;
    });
}

std::vector<sock_filter> notifying(const std::vector<sock_filter>& marked) {
    return rewrite_marks(marked, [](uint16_t) -> uint32_t { return SECCOMP_RET_USER_NOTIF; });
}

bool has_refusal_marks(const std::vector<sock_filter>& marked) {
    for (const sock_filter& insn : marked)
        if (is_mark(insn)) return true;
    return false;
}

RefusalVerdict refusal_verdict(const std::vector<sock_filter>& marked, const seccomp_data& data) {
    const uint32_t answer = evaluate_seccomp(marked, data);
    if ((answer & SECCOMP_RET_ACTION_FULL) != SECCOMP_RET_TRACE) return {};
    const uint32_t value = answer & SECCOMP_RET_DATA;
    if (value == kLoggedData) return {RefusalVerdict::logged, 0};
    if (value > kMaxErrno) return {};
    return {RefusalVerdict::refused, static_cast<int>(value)};
}

}  // namespace corral
