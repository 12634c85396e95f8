#pragma once
// Presets shipped with corral (policies/presets/*.yaml, embedded into the binary at build time):
// "default", "strict", "none".

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace corral {

/// The YAML text of a preset, or nullopt if there is no preset of that name.
std::optional<std::string_view> preset_yaml(std::string_view name);
/// The names of all presets.
std::vector<std::string> preset_names();

}  // namespace corral
