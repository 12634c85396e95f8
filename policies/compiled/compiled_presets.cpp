#include "policies/compiled/compiled_presets.hpp"

#include "policies/presets.hpp"

namespace corral {

std::optional<Policy> compiled_preset_from(std::string_view name, std::string_view source) {
    for (const auto& entry : detail::compiled_preset_entries()) {
        if (entry.name != name) continue;
        if (entry.source_hash != preset_source_hash(source)) return std::nullopt;
        return entry.build();
    }
    return std::nullopt;
}

std::optional<Policy> compiled_preset(std::string_view name) {
    const auto text = preset_yaml(name);
    if (!text) return std::nullopt;
    return compiled_preset_from(name, *text);
}

PolicyParseResult load_policy_compiled(const std::string& file_or_preset) {
    // A preset name never names a file (load_policy: a bare word is always a name), so this is
    // the answer load_policy would give, without parsing.
    if (auto policy = compiled_preset(file_or_preset)) {
        PolicyParseResult result;
        result.policy = std::move(*policy);
        return result;
    }
    return load_policy(file_or_preset);
}

}  // namespace corral
