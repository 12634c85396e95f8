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

#include <optional>
#include <string>
#include <string_view>
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

/// The largest policy document corral reads (a request body, a file, a parent): 1 MiB. Larger
/// ones are refused with a diagnostic saying so, before any parsing.
inline constexpr size_t kMaxPolicyBytes = 1u << 20;

/// Parses YAML text written by the user running this program (`corral`): `extends:` may name
/// any file they can read. `source_name` is used in diagnostics; `base_dir` resolves relative
/// `extends:` file paths (empty: relative paths are refused). Files are read with
/// read_regular_file(): FIFOs, devices and sockets are refused, and so are files over the limit.
PolicyParseResult parse_policy(std::string_view yaml, const std::string& source_name,
                               const std::string& base_dir = "");

/// Reads and parses a file (a regular file of at most kMaxPolicyBytes).
PolicyParseResult parse_policy_file(const std::string& path);

/// Parses a policy from someone who must not read the host's files: a caller of corrald's API.
/// Its `extends:` may name a preset or a policy of `policy_dir` (the daemon's --policy-dir; ""
/// for none): a name (`team` = team.yaml or team.yml, when no preset has the name) or a path
/// relative to the extending document that stays inside the dir. Absolute paths and `..` are
/// refused without asking the file system (so the answer says nothing about which host paths
/// exist); dir entries are opened with openat2(RESOLVE_BENEATH), so a symlink cannot lead out.
/// A parent of the dir that is invalid is reported as such, with the number of its problems, but
/// its diagnostics (its text) are not passed on: the caller sees only their own text quoted.
PolicyParseResult parse_confined_policy(std::string_view yaml, const std::string& source_name,
                                        const std::string& policy_dir);
/// The policy an API caller names: <policy_dir>/NAME.yaml (or .yml, or NAME itself when it ends
/// so), else the preset NAME; confined as parse_confined_policy(). A name holding `/` (a path) is
/// refused with a diagnostic on key `policy`.
/// `presets`, when given, supplies a preset's resolved Policy instead of parsing its text (corrald
/// passes the compiled presets, policies/compiled/, a library above this one); nullopt from it
/// means: parse the text.
using PresetSource = std::optional<Policy> (*)(std::string_view name);
PolicyParseResult load_named_policy(const std::string& name, const std::string& policy_dir,
                                    PresetSource presets = nullptr);
/// Whether load_named_policy(name, policy_dir) may read a file of the policy dir: false only when
/// `name` is a valid policy name and no file it may mean (NAME.yaml, NAME.yml) exists there, so
/// its answer is the preset's (or "no policy of that name"). An invalid name is true without
/// asking the file system (load_named_policy refuses it); otherwise one fstatat per candidate.
bool policy_dir_may_hold(const std::string& name, const std::string& policy_dir);

/// Resolves what a user typed after --policy: an existing file path, else a preset name.
PolicyParseResult load_policy(const std::string& file_or_preset);

/// The resolved policy as YAML, in the same keys a user writes (what `corral policy check` prints):
/// every key, no `extends:` (the chain is in a leading comment), so parse_policy() of the text gives
/// an equal policy except for extends_chain.
std::string policy_to_yaml(const Policy& policy);

}  // namespace corral
