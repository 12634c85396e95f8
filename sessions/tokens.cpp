#include "sessions/tokens.hpp"

#include <sys/random.h>

#include <array>
#include <cerrno>

namespace corral {

Result<std::string> generate_token() {
    std::array<unsigned char, 32> raw{};
    size_t filled = 0;
    while (filled < raw.size()) {
        const ssize_t n = ::getrandom(raw.data() + filled, raw.size() - filled, 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            return sys_error("getrandom for a session token");
        }
        filled += static_cast<size_t>(n);
    }
    static constexpr char digits[] = "0123456789abcdef";
    std::string token = "crl_";
    for (unsigned char byte : raw) {
        token += digits[byte >> 4];
        token += digits[byte & 0xf];
    }
    return token;
}

bool tokens_equal(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    unsigned char diff = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        diff |= static_cast<unsigned char>(a[i] ^ b[i]);
    }
    // Launder through volatile so the compiler cannot turn the loop into an early-exit memcmp.
    volatile unsigned char result = diff;
    return result == 0;
}

}  // namespace corral
