#pragma once
// Sizes and durations with units, as policies write them: "512Mi", "2G", "64k", "30s", "10m",
// "1h30m", "250ms". A plain number for a size is bytes; a plain number for a duration is rejected
// (seconds or milliseconds? ambiguous), except "0". A decimal fraction is accepted when the result
// is whole ("1.5Gi", "0.5s"); one that is not ("1.0001k" bytes, "0.0001s") is rejected rather than
// rounded, so what a policy says is exactly what is enforced. No signs, spaces or exponents.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "policies/policy.hpp"

namespace corral {

/// Parses a size: a number with an optional unit k/K/Ki, M/Mi, G/Gi, T/Ti (K=1000, Ki=1024),
/// optionally followed by B ("512MiB"), or B alone. Letter case of the prefix is ignored.
std::optional<uint64_t> parse_size(std::string_view text);
/// Parses a duration: one or more <number><unit> with units d, h, m, s, ms, each at most once and
/// larger units first ("1h30m", not "30m1h"). "0" is allowed.
std::optional<Millis> parse_duration(std::string_view text);
/// Formats a size the way parse_size reads it, using binary units when exact ("512Mi").
std::string format_size(uint64_t bytes);
/// Formats a duration the way parse_duration reads it ("1h30m", "250ms").
std::string format_duration(Millis duration);

}  // namespace corral
