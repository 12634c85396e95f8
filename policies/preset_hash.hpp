#pragma once
// FNV-1a (64 bit) over every preset's name and text, in the order given: what ties the compiled
// presets to their source (compiled/compiled_presets.hpp). The whole set, not one preset's text,
// because `extends:` makes a preset's resolved Policy depend on other presets' texts.
// constexpr: the hash of the texts a binary embeds is computed when it is compiled
// (embed_presets.cmake), not on every `corral run` (~10 KiB a byte at a time; issue 18).

#include <cstdint>
#include <string_view>

namespace corral {

constexpr void preset_hash_mix(uint64_t& hash, std::string_view bytes) {
    for (unsigned char c : bytes) {
        hash ^= c;
        hash *= 1099511628211ull;
    }
    hash ^= 0xff;  // a separator no YAML text holds: "ab"+"c" and "a"+"bc" differ
    hash *= 1099511628211ull;
}

/// `presets`: a range of {name, text} pairs (structured bindings), in preset_names() order.
template <typename Presets>
constexpr uint64_t preset_set_hash_of(const Presets& presets) {
    uint64_t hash = 1469598103934665603ull;
    for (const auto& [name, text] : presets) {
        preset_hash_mix(hash, name);
        preset_hash_mix(hash, text);
    }
    return hash;
}

}  // namespace corral
