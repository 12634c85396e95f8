#include "sessions/session_types.hpp"

#include <csignal>
#include <cstring>
#include <string>

namespace corral {

std::optional<int> parse_signal(std::string_view text) {
    if (text.empty()) return std::nullopt;
    if (text.find_first_not_of("0123456789") == std::string_view::npos) {
        if (text.size() > 3) return std::nullopt;
        const int number = std::stoi(std::string(text));
        if (number < 1 || number >= NSIG) return std::nullopt;
        return number;
    }
    std::string name;
    for (char c : text) name += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (name.rfind("SIG", 0) == 0) name.erase(0, 3);
    for (int number = 1; number < NSIG; ++number) {
        const char* abbrev = ::sigabbrev_np(number);
        if (abbrev != nullptr && name == abbrev) return number;
    }
    return std::nullopt;
}

std::string signal_name(int signal) {
    const char* abbrev = ::sigabbrev_np(signal);
    if (abbrev == nullptr) return "SIG" + std::to_string(signal);
    return std::string("SIG") + abbrev;
}

std::string ProcessInfo::status() const {
    if (running || !reason) return "running";
    return std::string(to_string(*reason));
}

std::string_view to_string(SessionState state) {
    switch (state) {
        case SessionState::starting:
            return "starting";
        case SessionState::active:
            return "active";
        case SessionState::ending:
            return "ending";
        case SessionState::ended:
            return "ended";
    }
    return "unknown";
}

}  // namespace corral
