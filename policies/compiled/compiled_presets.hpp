#pragma once
// The presets (policies/presets/*.yaml) as Policy values compiled into the binary, so that
// `corral run --policy default` does not parse YAML on every launch: yaml-cpp took ~75 % of the
// user-space instructions of a `default` launch (3.4 M of 4.3 M, callgrind; ~0.35 ms CPU on the
// 2-vCPU machine, docs/BENCHMARKS.md).
//
// At build time corral_preset_codegen (preset_codegen.cpp) runs the real parser on each
// embedded preset and writes C++ that constructs the resolved Policy; that file is compiled
// into corral_compiled_presets. Nothing is read at run time, so there is nothing to trust: the
// compiled form is part of the binary like the code. It is still checked before use: each entry
// carries the hash of the YAML text it was compiled from, and an entry whose hash is not that of
// the preset text this binary embeds (a stale generated file) is not used: the text is parsed,
// as without compiled presets. tests/unit/compiled_presets_test.cpp checks that every compiled
// preset equals what the parser makes of the text.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "policies/policy.hpp"
#include "policies/policy_parser.hpp"

namespace corral {

/// FNV-1a (64 bit) of a preset's YAML text: what ties a compiled preset to its source.
inline uint64_t preset_source_hash(std::string_view text) {
    uint64_t hash = 1469598103934665603ull;
    for (unsigned char c : text) {
        hash ^= c;
        hash *= 1099511628211ull;
    }
    return hash;
}

/// The compiled preset `name` if it was compiled from exactly `source` (its YAML text); nullopt
/// for another name or another text.
std::optional<Policy> compiled_preset_from(std::string_view name, std::string_view source);

/// The compiled preset `name`, checked against the preset text this binary embeds; nullopt when
/// there is no such preset or the compiled form is not that text's.
std::optional<Policy> compiled_preset(std::string_view name);

/// load_policy() (policy_parser.hpp) with compiled presets: a preset name gives its compiled
/// Policy, anything else (a file, an unknown name, a stale entry) goes to load_policy.
PolicyParseResult load_policy_compiled(const std::string& file_or_preset);

namespace detail {
/// One generated entry: the preset's name, the hash of the text it was compiled from, and a
/// function that builds the Policy.
struct CompiledPresetEntry {
    std::string_view name;
    uint64_t source_hash;
    Policy (*build)();
};
/// Defined in the generated compiled_presets_generated.cpp.
const std::vector<CompiledPresetEntry>& compiled_preset_entries();
}  // namespace detail

}  // namespace corral
