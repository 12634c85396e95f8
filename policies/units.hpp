#pragma once
// Sizes and durations with units, as policies write them: "512Mi", "2G", "64k", "30s", "10m",
// "1h30m", "250ms". Plain numbers are bytes / milliseconds... no: a plain number for a duration is
// rejected (ambiguous); a plain number for a size is bytes.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "policies/policy.hpp"

namespace corral {

/// Parses a size: digits with an optional unit k/K/Ki, M/Mi, G/Gi, T/Ti (K=1000, Ki=1024) or B.
std::optional<uint64_t> parse_size(std::string_view text);
/// Parses a duration: one or more <number><unit> with units ms, s, m, h, d. "0" is allowed.
std::optional<Millis> parse_duration(std::string_view text);
/// Formats a size the way parse_size reads it, using binary units when exact ("512Mi").
std::string format_size(uint64_t bytes);
/// Formats a duration the way parse_duration reads it ("1h30m", "250ms").
std::string format_duration(Millis duration);

}  // namespace corral
