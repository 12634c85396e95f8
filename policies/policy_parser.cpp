// Documents -> Policy: YAML loading, `extends:` resolution (presets and files, cycle detection),
// and the entry points. The keys themselves are read in policy_fields.cpp.

#include "policies/policy_parser.hpp"

#include <algorithm>
#include <climits>
#include <filesystem>

#include "base/file_io.hpp"
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

struct Document {
    std::string_view yaml;
    std::string source;    ///< diagnostics' file name
    std::string base_dir;  ///< resolves relative `extends:` paths; empty when inline
    Link link;
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

// Parses the parent named by `extends:`; its diagnostics are the parent's own (its file).
PolicyParseResult parse_parent(const detail::Entry& entry, const std::string& target,
                               const Document& child, std::vector<Link>& chain,
                               detail::PolicyReader& reader, std::string& parent_display) {
    Document parent;
    std::string content;
    if (!looks_like_file(target)) {
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
        auto text = read_file(path.string());
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
    auto text = read_file(path);
    if (!text) {
        return diagnostic_only(
            PolicyDiagnostic{path, 0, 0, "", "cannot read policy: " + text.error().describe()});
    }
    std::string dir = fs::path(path).parent_path().string();
    return parse_outermost(
        Document{*text, path, dir.empty() ? "." : dir, Link{file_id(path), path}});
}

PolicyParseResult load_policy(const std::string& file_or_preset) {
    std::error_code ec;
    if (looks_like_file(file_or_preset) || fs::is_regular_file(file_or_preset, ec)) {
        return parse_policy_file(file_or_preset);
    }
    if (auto yaml = preset_yaml(file_or_preset)) {
        return parse_outermost(Document{*yaml, "preset:" + file_or_preset, "",
                                        Link{"preset:" + file_or_preset, file_or_preset}});
    }
    return diagnostic_only(
        PolicyDiagnostic{file_or_preset, 0, 0, "",
                         "no policy file or preset of that name (presets: " + preset_list() + ")"});
}

}  // namespace corral
