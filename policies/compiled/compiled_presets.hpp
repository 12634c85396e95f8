#pragma once
// The presets (policies/presets/*.yaml) as Policy values compiled into the binary, so that
// `corral run --policy default` does not parse YAML on every launch: yaml-cpp took ~75 % of the
// user-space instructions of a `default` launch (3.4 M of 4.3 M, callgrind; ~0.35 ms CPU on the
// 2-vCPU machine, docs/BENCHMARKS.md).
//
// At build time corral_preset_codegen (preset_codegen.cpp) runs the real parser on each
// embedded preset and writes C++ that constructs the resolved Policy; that file is compiled
// into corral_compiled_presets. Nothing is read at run time, so there is nothing to trust: the
// compiled form is part of the binary like the code. It is still checked before use: the entries
// carry the hash of the preset texts they were compiled from, all of them (a preset's resolved
// Policy depends on the presets it extends: strict extends default), and entries whose hash is
// not that of the preset texts this binary embeds (a stale generated file) are not used: the text
// is parsed, as without compiled presets. tests/unit/compiled_presets_test.cpp checks that every
// compiled preset equals what the parser makes of the text.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "policies/policy.hpp"
#include "policies/policy_parser.hpp"
#include "policies/preset_hash.hpp"
#include "policies/presets.hpp"

namespace corral {

/// A preset's name and its YAML text.
struct PresetText {
    std::string_view name;
    std::string_view text;
};

/// preset_set_hash_of() (policies/preset_hash.hpp) of `presets`.
inline uint64_t preset_set_hash(const std::vector<PresetText>& presets) {
    return preset_set_hash_of(presets);
}

/// The presets this binary embeds (policies/presets.hpp), in preset_names() order. Inline: the
/// build-time generator (which this library's generated file comes from) uses it too.
inline std::vector<PresetText> embedded_preset_texts() {
    static const std::vector<std::string> names = preset_names();
    std::vector<PresetText> presets;
    presets.reserve(names.size());
    for (const auto& name : names) presets.push_back({name, preset_yaml(name).value_or("")});
    return presets;
}

/// The compiled preset `name` if the compiled presets were made from preset texts whose
/// preset_set_hash() is `set_hash`; nullopt for another name or other texts.
std::optional<Policy> compiled_preset_from(std::string_view name, uint64_t set_hash);

/// The compiled preset `name`, checked against the preset texts this binary embeds; nullopt when
/// there is no such preset or the compiled forms are not of those texts.
std::optional<Policy> compiled_preset(std::string_view name);

/// load_policy() (policy_parser.hpp) with compiled presets: a preset name gives its compiled
/// Policy, anything else (a file, an unknown name, a stale entry) goes to load_policy.
PolicyParseResult load_policy_compiled(const std::string& file_or_preset);

/// load_named_policy() (policy_parser.hpp) with compiled presets: a policy-dir file of that name
/// still comes first and is parsed; a preset gives its compiled Policy (corrald's session
/// creation: ~0.3 ms of yaml-cpp less per session).
PolicyParseResult load_named_policy_compiled(const std::string& name,
                                             const std::string& policy_dir);

/// What load_named_policy_compiled(name, policy_dir) gives when that needs no file read: the
/// compiled preset `name`, when no policy-dir file may shadow it (policy_dir_may_hold: an fstatat
/// per candidate name, nothing read or parsed). nullopt otherwise (a file of that name, an invalid
/// name, no such preset): ask load_named_policy_compiled.
std::optional<Policy> unshadowed_compiled_preset(const std::string& name,
                                                 const std::string& policy_dir);

namespace detail {
/// One generated entry: the preset's name and a function that builds its Policy.
struct CompiledPresetEntry {
    std::string_view name;
    Policy (*build)();
};
/// Defined in the generated compiled_presets_generated.cpp: the entries, and the
/// preset_set_hash() of the texts they were compiled from.
const std::vector<CompiledPresetEntry>& compiled_preset_entries();
uint64_t compiled_preset_set_hash();
}  // namespace detail

}  // namespace corral
