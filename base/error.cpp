#include "base/error.hpp"

#include <cstring>

namespace corral {

Error& Error::context(std::string_view what) {
    if (!what.empty()) message = std::string(what) + ": " + message;
    return *this;
}

std::string errno_name(int code) {
    if (const char* name = strerrorname_np(code)) return name;
    // Not `"E" + std::to_string(code)`: GCC 12 warns (-Wrestrict, a false positive of its own in
    // Release builds, GCC bug 105329) on a literal prepended to a temporary string.
    std::string name = std::to_string(code);
    name.insert(name.begin(), 'E');
    return name;
}

std::string Error::describe() const {
    if (code == 0) return message;
    return message + ": " + errno_name(code) + " (" + std::strerror(code) + ")";
}

Error sys_error(std::string message) { return Error{errno, std::move(message)}; }
Error sys_error(int code, std::string message) { return Error{code, std::move(message)}; }
Error plain_error(std::string message) { return Error{0, std::move(message)}; }
Error policy_refusal(std::string message) { return Error{0, std::move(message), true}; }

}  // namespace corral
