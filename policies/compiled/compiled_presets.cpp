#include "policies/compiled/compiled_presets.hpp"

#include "policies/presets.hpp"

namespace corral {

std::optional<Policy> compiled_preset_from(std::string_view name, uint64_t set_hash) {
    if (set_hash != detail::compiled_preset_set_hash()) return std::nullopt;
    for (const auto& entry : detail::compiled_preset_entries())
        if (entry.name == name) return entry.build();
    return std::nullopt;
}

std::optional<Policy> compiled_preset(std::string_view name) {
    return compiled_preset_from(name, embedded_presets_hash());
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

PolicyParseResult load_named_policy_compiled(const std::string& name,
                                             const std::string& policy_dir) {
    return load_named_policy(name, policy_dir, &compiled_preset);
}

std::optional<Policy> unshadowed_compiled_preset(const std::string& name,
                                                 const std::string& policy_dir) {
    if (policy_dir_may_hold(name, policy_dir)) return std::nullopt;
    return compiled_preset(name);
}

}  // namespace corral
