#pragma once
// YAML -> Policy. Unknown keys, duplicate keys, wrong types, bad units and bad values are errors
// naming file:line:column (1-based) and the dotted key ("limits.memory", "filesystem.hidden[2]",
// "filesystem.tmpfs[/tmp]"); all of a document's errors are reported, in reading order.
//
// `extends:` names a preset (policies/presets/*.yaml, compiled in) when it has no `/` and does not
// end in .yaml/.yml; otherwise a file, relative to the extending file's directory. Cycles, missing
// parents and chains deeper than 16 are errors naming the chain ("a.yaml -> b.yaml -> a.yaml").
//
// Inheritance: the child starts from the fully resolved parent (without extends: from the
// defaults in policy.hpp), and every leaf key the child writes replaces the parent's value for
// that key wholesale. Leaves are the keys inside a section (limits.memory, filesystem.hidden,
// env.set, ...) and the top-level name, user, enforcement. Lists and maps are leaves too: a child's
// `filesystem: { hidden: [/srv] }` replaces the parent's list, it does not append; keys of the
// section the child leaves out keep the parent's values. `name` is never inherited: without it,
// the name is the source's file stem ("ci" for ci.yaml).
//
// Values: sizes and durations as in units.hpp. Optional limits, timeouts and workdir.size take
// `unlimited`, `none` or null to mean "no limit" (which also clears an inherited one). user is
// `inherit` or {uid, gid (defaults to uid), groups}. Capability names are checked for syntax only
// and normalized to "CAP_X"; syscall names only for syntax ([a-z0-9_] or @group). Checks on the
// resolved policy: filesystem changes need namespaces.mount, network.allow needs an isolated
// network.

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

/// The resolved policy as YAML, in the same keys a user writes (what `corral policy check` prints):
/// every key, no `extends:` (the chain is in a leading comment), so parse_policy() of the text gives
/// an equal policy except for extends_chain.
std::string policy_to_yaml(const Policy& policy);

}  // namespace corral
