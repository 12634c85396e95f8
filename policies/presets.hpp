#pragma once
// Presets shipped with corral (policies/presets/*.yaml, embedded into the binary at build time):
// "default", "strict", "none".

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace corral {

/// The YAML text of a preset, or nullopt if there is no preset of that name.
std::optional<std::string_view> preset_yaml(std::string_view name);
/// The names of all presets.
std::vector<std::string> preset_names();
/// preset_set_hash_of() (preset_hash.hpp) of every preset's name and text in preset_names()
/// order, computed when the binary was compiled.
uint64_t embedded_presets_hash();

}  // namespace corral
