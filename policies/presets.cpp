#include "policies/presets.hpp"

#include <string_view>
#include <utility>
#include <vector>

namespace corral {
namespace detail {
/// Generated at build time from policies/presets/*.yaml by embed_presets.cmake: {name, yaml}.
const std::vector<std::pair<std::string_view, std::string_view>>& embedded_presets();
}  // namespace detail

std::optional<std::string_view> preset_yaml(std::string_view name) {
    for (const auto& [preset, yaml] : detail::embedded_presets()) {
        if (preset == name) return yaml;
    }
    return std::nullopt;
}

std::vector<std::string> preset_names() {
    std::vector<std::string> names;
    for (const auto& entry : detail::embedded_presets()) names.emplace_back(entry.first);
    return names;
}

}  // namespace corral
