#pragma once
// YAML -> Policy. Unknown keys, wrong types, bad units and bad values are errors naming
// file:line:column and the key. `extends:` names a preset (policies/presets/*.yaml, compiled in)
// or another file (relative to the extending file's directory); cycles are errors.

#include <string>
#include <string_view>
#include <vector>

#include "base/error.hpp"
#include "policies/policy.hpp"

namespace corral {

/// One problem in a policy document.
struct PolicyDiagnostic {
    std::string file;  ///< source name ("ci.yaml", "<inline>", "preset:default")
    int line = 0;      ///< 1-based; 0 when unknown
    int column = 0;    ///< 1-based; 0 when unknown
    std::string key;   ///< dotted key path, e.g. "limits.memory"; empty for document-level errors
    std::string message;
    /// "ci.yaml:4:11: limits.memory: bad size `12XB` (expected e.g. 512Mi, 2G)"
    std::string format() const;
};

/// The outcome of parsing: a policy, or every diagnostic found (not just the first).
struct PolicyParseResult {
    std::optional<Policy> policy;
    std::vector<PolicyDiagnostic> diagnostics;
    bool ok() const { return policy.has_value(); }
    /// All diagnostics, one per line.
    std::string format_errors() const;
};

/// Parses YAML text. `source_name` is used in diagnostics; `base_dir` resolves relative
/// `extends:` file paths (empty: extends may only name presets).
PolicyParseResult parse_policy(std::string_view yaml, const std::string& source_name,
                               const std::string& base_dir = "");

/// Reads and parses a file.
PolicyParseResult parse_policy_file(const std::string& path);

/// Resolves what a user typed after --policy: an existing file path, else a preset name.
PolicyParseResult load_policy(const std::string& file_or_preset);

/// The resolved policy as YAML, in the same keys a user writes (what `corral policy check` prints).
std::string policy_to_yaml(const Policy& policy);

}  // namespace corral
