#pragma once
// Session bearer tokens: 256 random bits from getrandom(2), hex-encoded, compared in constant time
// so response timing says nothing about how much of a guess matched.

#include <string>
#include <string_view>

#include "base/error.hpp"

namespace corral {

/// A new token: "crl_" + 64 hex digits of getrandom(2) output.
Result<std::string> generate_token();
/// Compares without an early exit on the first differing byte (length is not secret).
bool tokens_equal(std::string_view a, std::string_view b);

}  // namespace corral
