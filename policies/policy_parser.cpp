// Documents -> Policy: YAML loading, `extends:` resolution (presets and files, cycle detection),
// and the entry points. The keys themselves are read in policy_fields.cpp.

#include "policies/policy_parser.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <filesystem>

#include "base/file_io.hpp"
#include "base/unique_fd.hpp"
#include "policies/policy_reader.hpp"
#include "policies/presets.hpp"

namespace corral {
namespace {

namespace fs = std::filesystem;

constexpr size_t kMaxExtendsDepth = 16;

// One document on the way from the outermost policy to the one being parsed.
struct Link {
    std::string id;       ///< "preset:NAME" or a canonical file path: what a cycle repeats
    std::string display;  ///< what the user wrote or sees: "default", "ci/base.yaml"
};

// A policy written by someone who must not read the host's files (an API caller): its
// `extends:` reaches presets and the daemon's policy dir only. Precedent: issue 10 item 2 —
// `extends: /etc/shadow` in POST /v1/policies/validate quoted the file to any token, and a FIFO
// or /dev/zero blocked corrald's event loop; compare CVE-2021-41091, where moby's data dir let
// unprivileged users read and probe paths they should not have seen.
struct Confinement {
    int dir_fd = -1;  ///< O_PATH fd of the policy dir; -1: the daemon has none
    std::string dir;  ///< its path, for diagnostics' file names
};

struct Document {
    std::string_view yaml;
    std::string source;    ///< diagnostics' file name
    std::string base_dir;  ///< resolves relative `extends:` paths; empty when inline. Confined:
                           ///< relative to the policy dir ("" = its top)
    Link link;
    const Confinement* confined = nullptr;  ///< set: extends reaches presets and the policy dir
};

PolicyParseResult parse_document(const Document& doc, std::vector<Link>& chain, bool outermost);

std::string chain_text(const std::vector<Link>& chain, const std::string& last) {
    std::string text;
    for (const auto& link : chain) text += link.display + " -> ";
    return text + last;
}

std::string preset_list() {
    std::string text;
    for (const auto& name : preset_names()) text += (text.empty() ? "" : ", ") + name;
    return text;
}

bool looks_like_file(const std::string& name) {
    return name.find('/') != std::string::npos || name.ends_with(".yaml") || name.ends_with(".yml");
}

std::string default_name(const std::string& source) {
    if (source.starts_with("preset:")) return source.substr(7);
    return fs::path(source).stem().string();
}

// The canonical identity of a file, so "a.yaml" and "./x/../a.yaml" are one link of a cycle.
std::string file_id(const fs::path& path) {
    std::error_code ec;
    fs::path canonical = fs::weakly_canonical(path, ec);
    return ec ? path.lexically_normal().string() : canonical.string();
}

// Unknown keys are found before values are read; report in reading order instead. Problems
// without a position (line 0) go last.
void sort_by_position(std::vector<PolicyDiagnostic>& diagnostics) {
    std::stable_sort(diagnostics.begin(), diagnostics.end(),
                     [](const PolicyDiagnostic& a, const PolicyDiagnostic& b) {
                         auto key = [](const PolicyDiagnostic& d) {
                             return std::pair(d.line == 0 ? INT_MAX : d.line, d.column);
                         };
                         return key(a) < key(b);
                     });
}

PolicyParseResult diagnostic_only(PolicyDiagnostic diagnostic) {
    PolicyParseResult result;
    result.diagnostics.push_back(std::move(diagnostic));
    return result;
}

// `target` relative to `base` within the policy dir, lexically; nullopt when it is absolute or
// climbs out (the file system is not asked, so the answer tells nothing about the host).
std::optional<std::string> beneath_path(const std::string& base, const std::string& target) {
    if (target.empty() || target[0] == '/' || target.find('\0') != std::string::npos)
        return std::nullopt;
    fs::path path = (fs::path(base) / target).lexically_normal();
    if (path.empty() || path == "." || *path.begin() == "..") return std::nullopt;
    return path.string();
}

// Reads a policy of the policy dir; ENOENT is reported as nullopt with no error.
Result<std::optional<Document>> read_dir_policy(const Confinement& confined,
                                                const std::string& relative, std::string& content) {
    if (confined.dir_fd < 0) return std::optional<Document>();
    auto text = read_regular_file(confined.dir_fd, relative, kMaxPolicyBytes, PathScope::beneath);
    if (!text) {
        if (text.error().code == ENOENT || text.error().code == ENOTDIR)
            return std::optional<Document>();
        return std::move(text.error());
    }
    content = std::move(*text);
    std::string dir = fs::path(relative).parent_path().string();
    return std::optional<Document>(Document{content, confined.dir + "/" + relative, dir,
                                            Link{"policy-dir:" + relative, relative}, &confined});
}

// The parent of a confined document: a preset, or a policy of the policy dir (by name, or by a
// path relative to the extending file that stays inside the dir). Nothing else is opened.
bool confined_parent(const detail::Entry& entry, const std::string& target, const Document& child,
                     detail::PolicyReader& reader, Document& parent, std::string& content) {
    const Confinement& confined = *child.confined;
    const bool named = !looks_like_file(target);
    if (named) {
        if (auto yaml = preset_yaml(target)) {
            parent = Document{*yaml, "preset:" + target, "", Link{"preset:" + target, target},
                              &confined};
            return true;
        }
    }
    auto relative = beneath_path(named ? "" : child.base_dir, target);
    if (!relative) {
        reader.error(entry, "a policy given to the daemon may extend a preset (" + preset_list() +
                                ") or a policy of its --policy-dir, by a name relative to that "
                                "dir; absolute paths and `..` are refused");
        return false;
    }
    std::vector<std::string> candidates;
    if (named) {
        candidates = {*relative + ".yaml", *relative + ".yml"};
    } else {
        candidates = {*relative};
    }
    for (const auto& candidate : candidates) {
        auto found = read_dir_policy(confined, candidate, content);
        if (!found) {
            reader.error(entry, "cannot read the policy dir's `" + candidate +
                                    "`: " + found.error().describe());
            return false;
        }
        if (*found) {
            parent = std::move(**found);
            return true;
        }
    }
    reader.error(entry, std::string(named ? "no preset and " : "") + "no policy `" + target +
                            "` in the daemon's policy dir" +
                            (confined.dir_fd < 0 ? " (it has none)" : "") +
                            " (presets: " + preset_list() + ")");
    return false;
}

// Parses the parent named by `extends:`; its diagnostics are the parent's own (its file).
PolicyParseResult parse_parent(const detail::Entry& entry, const std::string& target,
                               const Document& child, std::vector<Link>& chain,
                               detail::PolicyReader& reader, std::string& parent_display) {
    Document parent;
    std::string content;
    if (child.confined) {
        if (!confined_parent(entry, target, child, reader, parent, content)) return {};
    } else if (!looks_like_file(target)) {
        auto yaml = preset_yaml(target);
        if (!yaml) {
            reader.error(entry, "unknown preset `" + target + "` (presets: " + preset_list() +
                                    "; a file path must contain / or end in .yaml)");
            return {};
        }
        parent = Document{*yaml, "preset:" + target, "", Link{"preset:" + target, target}};
    } else {
        fs::path path(target);
        if (path.is_relative()) {
            if (child.base_dir.empty()) {
                reader.error(entry,
                             "a relative extends path needs the policy to be a file (this one "
                             "was given inline); use an absolute path or a preset");
                return {};
            }
            path = fs::path(child.base_dir) / path;
        }
        path = path.lexically_normal();
        auto text = read_regular_file(AT_FDCWD, path.string(), kMaxPolicyBytes);
        if (!text) {
            reader.error(entry, "cannot read parent policy (" + chain_text(chain, path.string()) +
                                    "): " + text.error().describe());
            return {};
        }
        content = std::move(*text);
        std::string dir = path.parent_path().string();
        parent = Document{content, path.string(), dir.empty() ? "." : dir,
                          Link{file_id(path), path.string()}};
    }
    for (const auto& link : chain) {
        if (link.id == parent.link.id) {
            reader.error(entry, "extends cycle: " + chain_text(chain, parent.link.display));
            return {};
        }
    }
    if (chain.size() >= kMaxExtendsDepth) {
        reader.error(entry, "extends chain deeper than " + std::to_string(kMaxExtendsDepth) + ": " +
                                chain_text(chain, parent.link.display));
        return {};
    }
    parent_display = parent.link.display;
    return parse_document(parent, chain, false);
}

// Resolves `extends:` into the policy the document's keys are applied on.
Policy resolve_base(const YAML::Node& root, const Document& doc, std::vector<Link>& chain,
                    detail::PolicyReader& reader, std::vector<PolicyDiagnostic>& diagnostics) {
    Policy base;  // the built-in defaults of policy.hpp
    if (!root.IsMap()) return base;
    for (auto it = root.begin(); it != root.end(); ++it) {
        if (!it->first.IsScalar() || it->first.Scalar() != "extends") continue;
        detail::Entry entry{it->second, it->first.Mark(), "extends"};
        auto target = reader.string(entry);
        if (!target) return base;
        std::string parent_display;
        PolicyParseResult parent = parse_parent(entry, *target, doc, chain, reader, parent_display);
        if (!parent.ok() && doc.confined && !parent.diagnostics.empty()) {
            // The parent is not the caller's text: say that it is broken, never what it says.
            const size_t count = parent.diagnostics.size();
            reader.error(entry, "parent policy `" + *target + "` of the policy dir is invalid (" +
                                    std::to_string(count) +
                                    (count == 1 ? " problem" : " problems") +
                                    "; GET /v1/policies lists them)");
            return base;
        }
        if (!parent.ok()) {
            if (!parent.diagnostics.empty()) {
                std::string parent_source = parent.diagnostics.front().file;
                diagnostics.insert(diagnostics.begin(), parent.diagnostics.begin(),
                                   parent.diagnostics.end());
                reader.error(entry, "parent policy `" + *target + "` is invalid (see " +
                                        parent_source + " above)");
            }
            return base;
        }
        base = std::move(*parent.policy);
        // Provenance: the direct parent first, the outermost ancestor last.
        base.extends_chain.insert(base.extends_chain.begin(), parent_display);
        return base;
    }
    return base;
}

PolicyParseResult parse_document(const Document& doc, std::vector<Link>& chain, bool outermost) {
    PolicyParseResult result;
    detail::PolicyReader reader(doc.source, result.diagnostics);
    if (doc.yaml.size() > kMaxPolicyBytes) {
        reader.error(YAML::Mark::null_mark(), "",
                     "policy is " + std::to_string(doc.yaml.size()) +
                         " bytes, more than the limit of " + std::to_string(kMaxPolicyBytes));
        return result;
    }
    YAML::Node root;
    try {
        std::vector<YAML::Node> documents = YAML::LoadAll(std::string(doc.yaml));
        if (documents.size() > 1) {
            // A second document would otherwise be ignored without a word.
            reader.error(
                documents[1].Mark(), "",
                "a policy is one YAML document; found " + std::to_string(documents.size()));
            return result;
        }
        if (!documents.empty()) root = documents[0];
    } catch (const YAML::Exception& e) {
        reader.error(e.mark, "", "invalid YAML: " + e.msg);
        return result;
    }
    if (root.IsNull()) root = YAML::Node(YAML::NodeType::Map);  // an empty file: all defaults
    if (!root.IsMap()) {
        reader.error(root.Mark(), "", "expected a mapping of policy keys (name, limits, ...)");
        return result;
    }
    chain.push_back(doc.link);
    std::vector<PolicyDiagnostic> parent_diagnostics;
    Policy policy = resolve_base(root, doc, chain, reader, parent_diagnostics);
    chain.pop_back();
    policy.name = default_name(doc.source);  // a name is never inherited
    detail::apply_policy_keys(root, policy, reader);
    if (outermost) detail::check_resolved_policy(policy, reader);
    sort_by_position(result.diagnostics);
    reader.note_suppressed();
    // The parent's problems come first: they are usually the cause of the child's.
    result.diagnostics.insert(result.diagnostics.begin(), parent_diagnostics.begin(),
                              parent_diagnostics.end());
    if (result.diagnostics.empty()) result.policy = std::move(policy);
    return result;
}

PolicyParseResult parse_outermost(const Document& doc) {
    std::vector<Link> chain;
    return parse_document(doc, chain, true);
}

}  // namespace

std::string PolicyDiagnostic::format() const {
    std::string text = file.empty() ? "<policy>" : file;
    if (line > 0) text += ":" + std::to_string(line) + ":" + std::to_string(column);
    text += ": ";
    if (!key.empty()) text += key + ": ";
    return text + message;
}

std::string PolicyParseResult::format_errors() const {
    std::string text;
    for (const auto& diagnostic : diagnostics) text += diagnostic.format() + "\n";
    return text;
}

PolicyParseResult parse_policy(std::string_view yaml, const std::string& source_name,
                               const std::string& base_dir) {
    Link link{source_name, source_name};
    if (source_name.starts_with("preset:")) {
        link.display = source_name.substr(7);
    } else if (!base_dir.empty()) {
        link.id = file_id(fs::path(base_dir) / fs::path(source_name).filename());
    }
    return parse_outermost(Document{yaml, source_name, base_dir, link});
}

PolicyParseResult parse_policy_file(const std::string& path) {
    auto text = read_regular_file(AT_FDCWD, path, kMaxPolicyBytes);
    if (!text) {
        return diagnostic_only(
            PolicyDiagnostic{path, 0, 0, "", "cannot read policy: " + text.error().describe()});
    }
    std::string dir = fs::path(path).parent_path().string();
    return parse_outermost(
        Document{*text, path, dir.empty() ? "." : dir, Link{file_id(path), path}});
}

PolicyParseResult load_policy(const std::string& file_or_preset) {
    // A bare word (no '/', no .yaml/.yml ending) is always a name, never a file of the current
    // directory: `corral run` in an untrusted checkout that holds a file called `default` (with
    // `extends: none`) must still get the default preset. A file is written `./default`.
    if (looks_like_file(file_or_preset)) return parse_policy_file(file_or_preset);
    if (auto yaml = preset_yaml(file_or_preset)) {
        return parse_outermost(Document{*yaml, "preset:" + file_or_preset, "",
                                        Link{"preset:" + file_or_preset, file_or_preset}});
    }
    std::string message = "no preset of that name (presets: " + preset_list() + ")";
    std::error_code ec;
    if (fs::symlink_status(file_or_preset, ec).type() != fs::file_type::not_found && !ec)
        message += "; to use the file of that name, write ./" + file_or_preset;
    return diagnostic_only(PolicyDiagnostic{file_or_preset, 0, 0, "", message});
}

namespace {

Confinement open_confinement(const std::string& policy_dir, UniqueFd& holder) {
    Confinement confined;
    confined.dir = policy_dir;
    if (!policy_dir.empty()) {
        holder = UniqueFd(::open(policy_dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
        confined.dir_fd = holder.get();
    }
    return confined;
}

bool valid_policy_name(const std::string& name) {
    if (name.empty() || name.size() > 255 || name[0] == '.') return false;
    return std::all_of(name.begin(), name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
    });
}

/// The policy-dir files a valid name may mean, in the order they are tried.
std::vector<std::string> named_policy_candidates(const std::string& name) {
    std::vector<std::string> candidates = {name + ".yaml", name + ".yml"};
    if (looks_like_file(name)) candidates.insert(candidates.begin(), name);
    return candidates;
}

}  // namespace

PolicyParseResult parse_confined_policy(std::string_view yaml, const std::string& source_name,
                                        const std::string& policy_dir) {
    UniqueFd dir_fd;
    const Confinement confined = open_confinement(policy_dir, dir_fd);
    return parse_outermost(
        Document{yaml, source_name, "", Link{source_name, source_name}, &confined});
}

bool policy_dir_may_hold(const std::string& name, const std::string& policy_dir) {
    if (!valid_policy_name(name)) return true;  // refused by load_named_policy, before any lookup
    if (policy_dir.empty()) return false;
    // What read_dir_policy() takes for "not there": ENOENT, or ENOTDIR (the dir is a file). Any
    // entry at all (a symlink, a FIFO, a directory) or any other error sends the caller to
    // load_named_policy, which reads it and answers as always.
    for (const auto& candidate : named_policy_candidates(name)) {
        struct stat st;
        const std::string path = policy_dir + "/" + candidate;
        if (::fstatat(AT_FDCWD, path.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) return true;
        if (errno != ENOENT && errno != ENOTDIR) return true;
    }
    return false;
}

PolicyParseResult load_named_policy(const std::string& name, const std::string& policy_dir,
                                    PresetSource presets) {
    if (!valid_policy_name(name)) {
        return diagnostic_only(PolicyDiagnostic{
            "<policy>", 0, 0, "policy",
            "`" + name + "` is not a policy name: name a preset (" + preset_list() +
                ") or a policy of the daemon's --policy-dir ([A-Za-z0-9._-]); paths are not "
                "accepted (send your own policy as policyYaml)"});
    }
    UniqueFd dir_fd;
    const Confinement confined = open_confinement(policy_dir, dir_fd);
    for (const auto& candidate : named_policy_candidates(name)) {
        std::string content;
        auto found = read_dir_policy(confined, candidate, content);
        if (!found) {
            return diagnostic_only(
                PolicyDiagnostic{policy_dir + "/" + candidate, 0, 0, "",
                                 "cannot read policy: " + found.error().describe()});
        }
        if (*found) return parse_outermost(**found);
    }
    if (presets != nullptr) {
        if (auto compiled = presets(name)) {
            PolicyParseResult result;
            result.policy = std::move(*compiled);
            return result;
        }
    }
    if (auto yaml = preset_yaml(name)) {
        return parse_outermost(
            Document{*yaml, "preset:" + name, "", Link{"preset:" + name, name}, &confined});
    }
    return diagnostic_only(PolicyDiagnostic{
        "<policy>", 0, 0, "policy",
        "no policy `" + name +
            "` in the daemon's policy dir and no preset of that name (presets: " + preset_list() +
            ")"});
}

}  // namespace corral
