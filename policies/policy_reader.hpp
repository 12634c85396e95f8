#pragma once
// Internal to policies/: turns YAML nodes into typed policy values, recording a diagnostic with
// file:line:column and the dotted key for every problem instead of stopping at the first.

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "policies/policy.hpp"
#include "policies/policy_parser.hpp"

namespace corral::detail {

/// One key/value pair being read, with where the key was written (a null value has no mark).
struct Entry {
    YAML::Node value;
    YAML::Mark key_mark;
    std::string key;  ///< dotted path, e.g. "limits.memory"
    /// The value's position, or the key's when the value has none (`memory:` with nothing after).
    YAML::Mark mark() const;
    /// The same entry for a list item or map value below this one.
    Entry child(const YAML::Node& node, std::string suffix) const;
};

/// Converts values and collects diagnostics for one document.
class PolicyReader {
  public:
    PolicyReader(std::string source, std::vector<PolicyDiagnostic>& out);

    /// Records a problem at `mark` (0-based, as yaml-cpp gives it). Bounded, so that no document
    /// can make its diagnostics larger than itself many times over: the first kMaxDiagnostics are
    /// kept (each message cut at kMaxMessageBytes), later ones only counted (see note_suppressed).
    void error(const YAML::Mark& mark, std::string key, std::string message);
    /// Records a problem with an entry's value.
    void error(const Entry& entry, std::string message);
    /// Remembers where a key was written, for checks made after all keys are applied.
    void note_key(const std::string& key, const YAML::Mark& mark);
    /// Where `key` was written in this document, if it was.
    std::optional<YAML::Mark> where(const std::string& key) const;
    const std::string& source() const { return source_; }
    /// Adds one diagnostic saying how many were not kept, if any were dropped.
    void note_suppressed();
    /// Charges `units` (bytes of a value read, or one per entry) against the document's reading
    /// budget. YAML aliases let a short document name one large value many times (the
    /// "billion laughs" attack on XML entities, CVE-2003-1564, works the same way with anchors);
    /// past kReadBudget the reader records one error and reads nothing more.
    bool spend(size_t units);

    static constexpr size_t kMaxDiagnostics = 100;
    static constexpr size_t kMaxMessageBytes = 1024;
    static constexpr size_t kReadBudget = 16u << 20;

    /// A map's entries, after checking the node is a map, its keys are strings, unique and among
    /// `known`. A null node is an empty map (`limits:` with nothing under it).
    std::vector<Entry> entries(const Entry& map, std::span<const std::string_view> known);
    /// A map with user-chosen keys (env.set, filesystem.tmpfs), each checked by `valid_key`.
    /// Entry keys are "map.KEY", or "map[KEY]" when `bracket` (for keys holding dots or slashes).
    std::vector<Entry> free_entries(const Entry& map, std::string (*valid_key)(std::string_view),
                                    bool bracket);

    std::optional<bool> boolean(const Entry& entry);
    std::optional<std::string> string(const Entry& entry);
    /// An integer in [min, max].
    std::optional<uint64_t> integer(const Entry& entry, uint64_t min, uint64_t max);
    std::optional<uint64_t> size(const Entry& entry, uint64_t min = 0);
    std::optional<Millis> duration(const Entry& entry);
    /// One of `choices`, spelled exactly.
    std::optional<std::string> choice(const Entry& entry,
                                      std::span<const std::string_view> choices);
    /// A list of strings, each checked by `valid` (which returns an error message or "").
    std::optional<std::vector<std::string>> string_list(const Entry& entry,
                                                        std::string (*valid)(std::string_view));
    /// Whether the value is null or the word `none` / `unlimited`: "no limit".
    bool is_unset(const Entry& entry) const;

  private:
    std::optional<std::string> scalar(const Entry& entry, std::string_view expected);

    std::string source_;
    std::vector<PolicyDiagnostic>& out_;
    std::map<std::string, YAML::Mark> marks_;
    size_t recorded_ = 0;
    size_t suppressed_ = 0;
    size_t spent_ = 0;
    bool exhausted_ = false;
};

/// Applies every key of a policy document except `extends` onto `policy` (each key present
/// replaces that leaf of the parent).
void apply_policy_keys(const YAML::Node& document, Policy& policy, PolicyReader& reader);
/// Checks across keys that only make sense on the final, resolved policy.
void check_resolved_policy(const Policy& policy, PolicyReader& reader);

/// "" if `path` is an absolute path without `..`; else what is wrong with it.
std::string check_absolute_path(std::string_view path);
/// Errno value for a name like "EPERM" (case-insensitive), or nullopt.
std::optional<int> errno_from_name(std::string_view name);
/// "CAP_NET_BIND_SERVICE" for "net_bind_service", "CAP_NET_BIND_SERVICE" or "cap_net_bind_service".
std::optional<std::string> normalize_capability(std::string_view name);

}  // namespace corral::detail
