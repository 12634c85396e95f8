#include "policies/policy_reader.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <set>

#include "base/error.hpp"
#include "policies/units.hpp"

namespace corral::detail {
namespace {

std::string join(std::span<const std::string_view> words, std::string_view separator) {
    std::string text;
    for (const auto& word : words) {
        if (!text.empty()) text += separator;
        text += word;
    }
    return text;
}

std::string quoted(std::string_view text) {
    return "`" + std::string(text) + "`";
}

}  // namespace

YAML::Mark Entry::mark() const {
    YAML::Mark value_mark = value.IsDefined() ? value.Mark() : YAML::Mark::null_mark();
    // A null value written as nothing (`memory:`) sits where the next token is; the key is
    // where the user should look.
    if (value_mark.is_null() || value.IsNull()) return key_mark;
    return value_mark;
}

Entry Entry::child(const YAML::Node& node, std::string suffix) const {
    return Entry{node, node.Mark().is_null() ? key_mark : node.Mark(), key + suffix};
}

PolicyReader::PolicyReader(std::string source, std::vector<PolicyDiagnostic>& out)
    : source_(std::move(source)), out_(out) {}

void PolicyReader::error(const YAML::Mark& mark, std::string key, std::string message) {
    if (recorded_ >= kMaxDiagnostics) {
        ++suppressed_;
        return;
    }
    ++recorded_;
    if (message.size() > kMaxMessageBytes) {
        size_t cut = kMaxMessageBytes;
        // Do not split a UTF-8 sequence: back up over continuation bytes.
        while (cut > 0 && (static_cast<unsigned char>(message[cut]) & 0xC0) == 0x80) --cut;
        message.resize(cut);
        message += "... (cut)";
    }
    if (key.size() > kMaxMessageBytes) key.resize(kMaxMessageBytes);
    PolicyDiagnostic diagnostic;
    diagnostic.file = source_;
    if (!mark.is_null()) {
        diagnostic.line = mark.line + 1;
        diagnostic.column = mark.column + 1;
    }
    diagnostic.key = std::move(key);
    diagnostic.message = std::move(message);
    out_.push_back(std::move(diagnostic));
}

void PolicyReader::error(const Entry& entry, std::string message) {
    error(entry.mark(), entry.key, std::move(message));
}

void PolicyReader::note_suppressed() {
    if (suppressed_ == 0) return;
    PolicyDiagnostic diagnostic;
    diagnostic.file = source_;
    diagnostic.message = std::to_string(suppressed_) + " more problems not shown (the first " +
                         std::to_string(kMaxDiagnostics) + " are)";
    out_.push_back(std::move(diagnostic));
    suppressed_ = 0;
}

bool PolicyReader::spend(size_t units) {
    if (exhausted_) return false;
    spent_ += units;
    if (spent_ <= kReadBudget) return true;
    exhausted_ = true;
    error(YAML::Mark::null_mark(), "",
          "the document refers to more than " + std::to_string(kReadBudget >> 20) +
              " MiB of values (YAML aliases repeating large values?); not read further");
    return false;
}

void PolicyReader::note_key(const std::string& key, const YAML::Mark& mark) {
    marks_[key] = mark;
}

std::optional<YAML::Mark> PolicyReader::where(const std::string& key) const {
    auto it = marks_.find(key);
    if (it == marks_.end()) return std::nullopt;
    return it->second;
}

std::vector<Entry> PolicyReader::entries(const Entry& map,
                                         std::span<const std::string_view> known) {
    std::vector<Entry> result;
    if (!map.value.IsDefined() || map.value.IsNull()) return result;
    if (!map.value.IsMap()) {
        error(map, "expected a mapping with keys " + join(known, ", "));
        return result;
    }
    std::set<std::string> seen;
    for (auto it = map.value.begin(); it != map.value.end(); ++it) {
        if (!spend(1 + (it->first.IsScalar() ? it->first.Scalar().size() : 0))) break;
        // A copy: `it->first` lives in a proxy that dies at the end of the statement.
        YAML::Node key = it->first;
        if (!key.IsScalar()) {
            error(key.Mark(), map.key, "expected a string key");
            continue;
        }
        std::string name = key.Scalar();
        std::string dotted = map.key.empty() ? name : map.key + "." + name;
        if (!seen.insert(name).second) {
            error(key.Mark(), dotted, "duplicate key");
            continue;
        }
        if (std::find(known.begin(), known.end(), name) == known.end()) {
            error(key.Mark(), dotted, "unknown key (expected one of: " + join(known, ", ") + ")");
            continue;
        }
        note_key(dotted, key.Mark());
        result.push_back(Entry{it->second, key.Mark(), dotted});
    }
    return result;
}

std::vector<Entry> PolicyReader::free_entries(const Entry& map,
                                              std::string (*valid_key)(std::string_view),
                                              bool bracket) {
    std::vector<Entry> result;
    if (!map.value.IsDefined() || map.value.IsNull()) return result;
    if (!map.value.IsMap()) {
        error(map, "expected a mapping, e.g. {a: b}");
        return result;
    }
    std::set<std::string> seen;
    for (auto it = map.value.begin(); it != map.value.end(); ++it) {
        if (!spend(1 + (it->first.IsScalar() ? it->first.Scalar().size() : 0))) break;
        // A copy: `it->first` lives in a proxy that dies at the end of the statement.
        YAML::Node key = it->first;
        if (!key.IsScalar()) {
            error(key.Mark(), map.key, "expected a string key");
            continue;
        }
        std::string name = key.Scalar();
        std::string dotted = bracket ? map.key + "[" + name + "]" : map.key + "." + name;
        if (std::string problem = valid_key(name); !problem.empty()) {
            error(key.Mark(), dotted, problem);
            continue;
        }
        if (!seen.insert(name).second) {
            error(key.Mark(), dotted, "duplicate key");
            continue;
        }
        result.push_back(Entry{it->second, key.Mark(), dotted});
    }
    return result;
}

std::optional<std::string> PolicyReader::scalar(const Entry& entry, std::string_view expected) {
    if (!entry.value.IsScalar()) {
        error(entry, "expected " + std::string(expected));
        return std::nullopt;
    }
    if (!spend(entry.value.Scalar().size() + 1)) return std::nullopt;
    return entry.value.Scalar();
}

std::optional<bool> PolicyReader::boolean(const Entry& entry) {
    auto text = scalar(entry, "true or false");
    if (!text) return std::nullopt;
    if (*text == "true") return true;
    if (*text == "false") return false;
    error(entry, "expected true or false, got " + quoted(*text));
    return std::nullopt;
}

std::optional<std::string> PolicyReader::string(const Entry& entry) {
    return scalar(entry, "a string");
}

std::optional<uint64_t> PolicyReader::integer(const Entry& entry, uint64_t min, uint64_t max) {
    std::string range = "an integer from " + std::to_string(min) + " to " + std::to_string(max);
    auto text = scalar(entry, range);
    if (!text) return std::nullopt;
    uint64_t value = 0;
    auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), value);
    if (ec == std::errc::result_out_of_range ||
        (ec == std::errc() && (value < min || value > max))) {
        error(entry, "out of range: expected " + range + ", got " + quoted(*text));
        return std::nullopt;
    }
    if (ec != std::errc() || end != text->data() + text->size()) {
        bool negative = !text->empty() && (*text)[0] == '-';
        error(entry, std::string(negative ? "must not be negative: " : "") + "expected " + range +
                         ", got " + quoted(*text));
        return std::nullopt;
    }
    return value;
}

std::optional<uint64_t> PolicyReader::size(const Entry& entry, uint64_t min) {
    auto text = scalar(entry, "a size like 512Mi or 2G");
    if (!text) return std::nullopt;
    auto value = parse_size(*text);
    if (!value) {
        bool negative = !text->empty() && (*text)[0] == '-';
        error(entry, std::string(negative ? "must not be negative: " : "") + "bad size " +
                         quoted(*text) + " (expected e.g. 512Mi, 2G, 64k or a number of bytes)");
        return std::nullopt;
    }
    if (*value < min) {
        error(entry, "expected a size of at least " + format_size(min) + ", got " + quoted(*text));
        return std::nullopt;
    }
    return value;
}

std::optional<Millis> PolicyReader::duration(const Entry& entry) {
    auto text = scalar(entry, "a duration like 30s or 10m");
    if (!text) return std::nullopt;
    auto value = parse_duration(*text);
    if (!value) {
        error(entry, "bad duration " + quoted(*text) +
                         " (expected e.g. 250ms, 30s, 10m, 1h30m, 1d; or 0)");
        return value;
    }
    // A bound far below what a timer's nanoseconds can hold: `99999999d` would otherwise
    // overflow steady_clock arithmetic and fire at once (issue 12 item 5).
    constexpr Millis kMaxDuration = std::chrono::hours(24 * 365);
    if (*value > kMaxDuration) {
        error(entry, "out of range: " + quoted(*text) + " is longer than 365d");
        return std::nullopt;
    }
    return value;
}

std::optional<std::string> PolicyReader::choice(const Entry& entry,
                                                std::span<const std::string_view> choices) {
    std::string expected = "one of " + join(choices, ", ");
    auto text = scalar(entry, expected);
    if (!text) return std::nullopt;
    if (std::find(choices.begin(), choices.end(), *text) == choices.end()) {
        error(entry, "expected " + expected + ", got " + quoted(*text));
        return std::nullopt;
    }
    return text;
}

std::optional<std::vector<std::string>> PolicyReader::string_list(
    const Entry& entry, std::string (*valid)(std::string_view)) {
    std::vector<std::string> list;
    if (entry.value.IsNull()) return list;
    if (!entry.value.IsSequence()) {
        error(entry, "expected a list, e.g. [a, b]");
        return std::nullopt;
    }
    bool ok = true;
    for (size_t i = 0; i < entry.value.size(); ++i) {
        if (!spend(1)) return std::nullopt;
        Entry item = entry.child(entry.value[i], "[" + std::to_string(i) + "]");
        auto text = scalar(item, "a string");
        if (!text) {
            ok = false;
            continue;
        }
        if (std::string problem = valid(*text); !problem.empty()) {
            error(item, problem);
            ok = false;
            continue;
        }
        list.push_back(*text);
    }
    if (!ok) return std::nullopt;
    return list;
}

bool PolicyReader::is_unset(const Entry& entry) const {
    if (entry.value.IsNull()) return true;
    return entry.value.IsScalar() &&
           (entry.value.Scalar() == "none" || entry.value.Scalar() == "unlimited");
}

std::string check_absolute_path(std::string_view path) {
    if (path.empty() || path[0] != '/') {
        return "expected an absolute path (starting with /), got " + quoted(path);
    }
    if (path.find('\0') != std::string_view::npos) return "path contains a NUL byte";
    if (path.size() > 4096) return "path longer than 4096 bytes";
    size_t start = 0;
    while (start <= path.size()) {
        size_t end = path.find('/', start);
        if (end == std::string_view::npos) end = path.size();
        if (path.substr(start, end - start) == "..") {
            return "path must not contain `..`, got " + quoted(path);
        }
        start = end + 1;
    }
    return "";
}

std::optional<int> errno_from_name(std::string_view name) {
    std::string upper(name);
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (upper.size() < 2 || upper[0] != 'E') return std::nullopt;
    // glibc names each value once; these are the aliases people also write.
    if (upper == "EWOULDBLOCK") upper = "EAGAIN";
    if (upper == "EDEADLOCK") upper = "EDEADLK";
    if (upper == "ENOTSUP") upper = "EOPNOTSUPP";
    for (int code = 1; code < 4096; ++code) {
        if (errno_name(code) == upper) return code;
    }
    return std::nullopt;
}

std::optional<std::string> normalize_capability(std::string_view name) {
    std::string upper(name);
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    std::string_view rest = upper;
    if (rest.starts_with("CAP_")) rest.remove_prefix(4);
    if (rest.empty() || rest.front() == '_' || rest.back() == '_') return std::nullopt;
    for (char c : rest) {
        if (!(c >= 'A' && c <= 'Z') && c != '_') return std::nullopt;
    }
    return "CAP_" + std::string(rest);
}

}  // namespace corral::detail
