#include "policies/units.hpp"

#include <array>
#include <cctype>
#include <limits>

namespace corral {
namespace {

// A number as written: "1.5" is digits=15, decimals=1. Kept as integers so "1.5Gi" converts
// exactly and "0.1k" is 100 bytes, never 99.99999 rounded somewhere.
struct Decimal {
    uint64_t digits = 0;
    unsigned decimals = 0;
};

constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();

// Reads [0-9]+(\.[0-9]+)? from the front of `text`, advancing it. nullopt on no digits or overflow.
std::optional<Decimal> take_decimal(std::string_view& text) {
    Decimal value;
    size_t i = 0;
    bool any_digit = false;
    bool in_fraction = false;
    for (; i < text.size(); ++i) {
        char c = text[i];
        if (c == '.' && !in_fraction && any_digit) {
            in_fraction = true;
            continue;
        }
        if (!std::isdigit(static_cast<unsigned char>(c))) break;
        unsigned d = static_cast<unsigned>(c - '0');
        if (value.digits > (kMax - d) / 10) return std::nullopt;
        value.digits = value.digits * 10 + d;
        any_digit = true;
        if (in_fraction) ++value.decimals;
    }
    if (!any_digit || text[i - 1] == '.') return std::nullopt;
    text.remove_prefix(i);
    return value;
}

// value * multiplier, which must come out whole ("1.5k" = 1500 is fine, "1.0005k" is not).
std::optional<uint64_t> scale(Decimal value, uint64_t multiplier) {
    unsigned __int128 product = static_cast<unsigned __int128>(value.digits) * multiplier;
    unsigned __int128 divisor = 1;
    // At most 20 decimals fit in the uint64 digits, and 10^20 fits in 128 bits.
    for (unsigned i = 0; i < value.decimals; ++i) divisor *= 10;
    if (product % divisor != 0) return std::nullopt;
    unsigned __int128 result = product / divisor;
    if (result > kMax) return std::nullopt;
    return static_cast<uint64_t>(result);
}

// The multiplier of a size unit: "", "B", "k"/"K", "Ki", "KiB", "KB", ...; nullopt if unknown.
std::optional<uint64_t> size_multiplier(std::string_view unit) {
    if (!unit.empty() && unit.back() == 'B') unit.remove_suffix(1);
    if (unit.empty()) return 1;
    bool binary = unit.size() == 2 && unit[1] == 'i';
    if (unit.size() != 1 && !binary) return std::nullopt;
    static constexpr std::string_view prefixes = "kmgt";
    size_t power =
        prefixes.find(static_cast<char>(std::tolower(static_cast<unsigned char>(unit[0]))));
    if (power == std::string_view::npos) return std::nullopt;
    uint64_t base = binary ? 1024 : 1000;
    uint64_t multiplier = 1;
    for (size_t i = 0; i <= power; ++i) multiplier *= base;
    return multiplier;
}

struct DurationUnit {
    std::string_view suffix;
    uint64_t millis;
};
// Largest first: parse_duration requires components in this order, format_duration emits it.
constexpr std::array<DurationUnit, 5> kDurationUnits = {{
    {"d", 86'400'000},
    {"h", 3'600'000},
    {"m", 60'000},
    {"s", 1'000},
    {"ms", 1},
}};

// The index in kDurationUnits of the unit at the front of `text` ("ms" before "m").
std::optional<size_t> take_duration_unit(std::string_view& text) {
    if (text.starts_with("ms")) {
        text.remove_prefix(2);
        return 4;
    }
    for (size_t i = 0; i < kDurationUnits.size(); ++i) {
        if (text.starts_with(kDurationUnits[i].suffix)) {
            text.remove_prefix(kDurationUnits[i].suffix.size());
            return i;
        }
    }
    return std::nullopt;
}

}  // namespace

std::optional<uint64_t> parse_size(std::string_view text) {
    auto number = take_decimal(text);
    if (!number) return std::nullopt;
    auto multiplier = size_multiplier(text);
    if (!multiplier) return std::nullopt;
    return scale(*number, *multiplier);
}

std::optional<Millis> parse_duration(std::string_view text) {
    if (text == "0") return Millis{0};
    if (text.empty()) return std::nullopt;
    uint64_t total = 0;
    size_t next_allowed_unit = 0;  // components must go from larger to smaller units, once each
    while (!text.empty()) {
        auto number = take_decimal(text);
        if (!number) return std::nullopt;
        auto unit = take_duration_unit(text);
        if (!unit || *unit < next_allowed_unit) return std::nullopt;
        next_allowed_unit = *unit + 1;
        auto millis = scale(*number, kDurationUnits[*unit].millis);
        if (!millis || *millis > kMax - total) return std::nullopt;
        total += *millis;
    }
    if (total > static_cast<uint64_t>(std::numeric_limits<Millis::rep>::max())) return std::nullopt;
    return Millis{static_cast<Millis::rep>(total)};
}

std::string format_size(uint64_t bytes) {
    if (bytes == 0) return "0";
    static constexpr std::array<std::string_view, 4> binary = {"Ki", "Mi", "Gi", "Ti"};
    static constexpr std::array<std::string_view, 4> decimal = {"k", "M", "G", "T"};
    // Largest scale first, binary before decimal at the same scale: 2G stays "2G", not
    // "1953125Ki"; 1Gi is "1Gi".
    for (int power = 4; power >= 1; --power) {
        uint64_t binary_unit = uint64_t{1} << (10 * power);
        if (bytes % binary_unit == 0)
            return std::to_string(bytes / binary_unit) + std::string(binary[power - 1]);
        uint64_t decimal_unit = 1;
        for (int i = 0; i < power; ++i) decimal_unit *= 1000;
        if (bytes % decimal_unit == 0)
            return std::to_string(bytes / decimal_unit) + std::string(decimal[power - 1]);
    }
    return std::to_string(bytes);
}

std::string format_duration(Millis duration) {
    if (duration.count() <= 0) return "0";
    uint64_t remaining = static_cast<uint64_t>(duration.count());
    std::string text;
    for (const auto& unit : kDurationUnits) {
        if (remaining >= unit.millis) {
            text += std::to_string(remaining / unit.millis) + std::string(unit.suffix);
            remaining %= unit.millis;
        }
    }
    return text;
}

}  // namespace corral
