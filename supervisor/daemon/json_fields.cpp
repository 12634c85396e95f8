#include "supervisor/daemon/json_fields.hpp"

#include <cstdint>
#include <cstring>

namespace corral::daemon {

nlohmann::json parse_json_object(std::string_view body) {
    if (body.find_first_not_of(" \t\r\n") == std::string_view::npos)
        return nlohmann::json::object();
    nlohmann::json value = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (value.is_discarded())
        throw ApiFailure(bad_request("bad_json", "request body is not valid JSON"));
    if (!value.is_object())
        throw ApiFailure(bad_request("bad_json", "request body must be a JSON object"));
    return value;
}

ObjectReader::ObjectReader(const nlohmann::json& object, std::string prefix)
    : object_(object), prefix_(std::move(prefix)) {}

const nlohmann::json* ObjectReader::get(const char* name) {
    known_.insert(name);
    auto it = object_.find(name);
    if (it == object_.end() || it->is_null()) return nullptr;
    return &*it;
}

void ObjectReader::wrong_type(const char* name, const char* expected) const {
    throw ApiFailure(bad_request("bad_type", "field `" + prefix_ + name + "` must be " + expected));
}

void ObjectReader::missing(const char* name) const {
    throw ApiFailure(bad_request("missing_field", "field `" + prefix_ + name + "` is required"));
}

std::chrono::milliseconds checked_millis(uint64_t value, const std::string& name) {
    if (value > kMaxMillis)
        throw ApiFailure(bad_request("out_of_range", "`" + name + "` is " + std::to_string(value) +
                                                         " ms; the largest accepted is " +
                                                         std::to_string(kMaxMillis) +
                                                         " (30 days)"));
    return std::chrono::milliseconds(static_cast<int64_t>(value));
}

void refuse_nul(std::string_view text, const std::string& field) {
    if (text.find('\0') != std::string_view::npos)
        throw ApiFailure(bad_request("nul_byte", "field `" + field +
                                                     "` contains a NUL byte (\\u0000), which a "
                                                     "command line, environment or path cannot "
                                                     "hold"));
}

void refuse_bad_env_name(std::string_view name, const std::string& field) {
    std::string why;
    if (name.empty()) {
        why = "an empty variable name";
    } else if (name.find('\0') != std::string_view::npos) {
        why = "a variable name with a NUL byte (\\u0000)";
    } else if (name.find('=') != std::string_view::npos) {
        why = "the variable name `" + std::string(name) + "`, which holds `=`";
    }
    if (!why.empty())
        throw ApiFailure(bad_request("bad_env_name", "field `" + field + "` has " + why +
                                                         ": a name cannot be empty or hold `=`"));
}

std::optional<std::string> ObjectReader::bytes(const char* name) {
    const auto* v = get(name);
    if (!v) return std::nullopt;
    if (!v->is_string()) wrong_type(name, "a string");
    return v->get<std::string>();
}

std::optional<std::string> ObjectReader::string(const char* name) {
    auto text = bytes(name);
    if (text) refuse_nul(*text, prefix_ + name);
    return text;
}

std::optional<std::chrono::milliseconds> ObjectReader::milliseconds(const char* name) {
    const auto* v = get(name);
    if (!v) return std::nullopt;
    const std::string range =
        "a whole number of milliseconds from 0 to " + std::to_string(kMaxMillis) + " (30 days)";
    if (v->is_number_unsigned()) {
        const uint64_t value = v->get<uint64_t>();
        if (value > kMaxMillis)
            throw ApiFailure(bad_request("out_of_range", "field `" + prefix_ + name + "` is " +
                                                             std::to_string(value) +
                                                             ", out of range: expected " + range));
        return std::chrono::milliseconds(static_cast<int64_t>(value));
    }
    std::string problem = "must be " + range;
    if (v->is_number_integer()) problem = "must not be negative: expected " + range;
    if (v->is_number_float()) {
        // nlohmann reads 1e300 and 9223372036854775808 (2^63) as floats.
        problem = "must be " + range + " (got a fraction or a number too large for an integer)";
    }
    throw ApiFailure(bad_request("bad_type", "field `" + prefix_ + name + "` " + problem));
}

std::optional<bool> ObjectReader::boolean(const char* name) {
    const auto* v = get(name);
    if (!v) return std::nullopt;
    if (!v->is_boolean()) wrong_type(name, "true or false");
    return v->get<bool>();
}

std::optional<uint64_t> ObjectReader::unsigned_integer(const char* name) {
    const auto* v = get(name);
    if (!v) return std::nullopt;
    if (!v->is_number_unsigned()) wrong_type(name, "a non-negative integer");
    return v->get<uint64_t>();
}

std::optional<std::vector<std::string>> ObjectReader::string_list(const char* name) {
    const auto* v = get(name);
    if (!v) return std::nullopt;
    if (!v->is_array()) wrong_type(name, "an array of strings");
    std::vector<std::string> out;
    for (const auto& item : *v) {
        if (!item.is_string()) wrong_type(name, "an array of strings");
        out.push_back(item.get<std::string>());
        refuse_nul(out.back(), prefix_ + name + "[" + std::to_string(out.size() - 1) + "]");
    }
    return out;
}

std::optional<std::map<std::string, std::string>> ObjectReader::env_map(const char* name) {
    const auto* v = get(name);
    if (!v) return std::nullopt;
    if (!v->is_object()) wrong_type(name, "an object of strings");
    std::map<std::string, std::string> out;
    for (const auto& [key, item] : v->items()) {
        if (!item.is_string()) wrong_type(name, "an object of strings");
        refuse_bad_env_name(key, prefix_ + name);
        std::string value = item.get<std::string>();
        refuse_nul(value, prefix_ + name + "." + key);
        out[key] = std::move(value);
    }
    return out;
}

const nlohmann::json* ObjectReader::object(const char* name) {
    const auto* v = get(name);
    if (v && !v->is_object()) wrong_type(name, "an object");
    return v;
}

void ObjectReader::finish() const {
    for (const auto& [key, value] : object_.items()) {
        if (!known_.count(key))
            throw ApiFailure(bad_request("unknown_field", "unknown field `" + prefix_ + key + "`"));
    }
}

namespace {

/// Length of the well-formed UTF-8 sequence at `s[i]` (a non-ASCII lead byte), 0 when it is not
/// one: a stray continuation byte, a truncated sequence, an overlong form, a surrogate or a value
/// beyond U+10FFFF.
size_t utf8_sequence_length(std::string_view s, size_t i) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t len;
    uint32_t cp;
    if ((c & 0xE0) == 0xC0) {
        len = 2;
        cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
        len = 3;
        cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
        len = 4;
        cp = c & 0x07;
    } else {
        return 0;
    }
    if (i + len > s.size()) return 0;
    for (size_t k = 1; k < len; ++k) {
        const auto cc = static_cast<unsigned char>(s[i + k]);
        if ((cc & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (cc & 0x3F);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
        (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
        return 0;
    return len;
}

}  // namespace

bool is_valid_utf8(std::string_view s) {
    size_t i = 0;
    while (i < s.size()) {
        // Eight ASCII bytes at a time: output is mostly ASCII.
        if (i + 8 <= s.size()) {
            uint64_t word;
            std::memcpy(&word, s.data() + i, 8);
            if ((word & 0x8080808080808080ull) == 0) {
                i += 8;
                continue;
            }
        }
        if (static_cast<unsigned char>(s[i]) < 0x80) {
            ++i;
            continue;
        }
        const size_t len = utf8_sequence_length(s, i);
        if (len == 0) return false;
        i += len;
    }
    return true;
}

std::string utf8_with_replacements(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    size_t i = 0;
    while (i < s.size()) {
        if (static_cast<unsigned char>(s[i]) < 0x80) {
            out += s[i++];
            continue;
        }
        const size_t len = utf8_sequence_length(s, i);
        if (len == 0) {
            out += "\xEF\xBF\xBD";  // U+FFFD for this byte; the next one is looked at afresh
            ++i;
            continue;
        }
        out.append(s.data() + i, len);
        i += len;
    }
    return out;
}

size_t utf8_complete_prefix(std::string_view s) {
    // Look back at most 3 bytes for the lead byte of a sequence that runs past the end.
    const size_t n = s.size();
    for (size_t back = 1; back <= 3 && back <= n; ++back) {
        const auto c = static_cast<unsigned char>(s[n - back]);
        if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
        size_t len = 1;
        if ((c & 0xE0) == 0xC0)
            len = 2;
        else if ((c & 0xF0) == 0xE0)
            len = 3;
        else if ((c & 0xF8) == 0xF0)
            len = 4;
        return len > back ? n - back : n;
    }
    return n;
}

void append_base64(std::string& out, std::string_view in) {
    static constexpr char table[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const size_t at = out.size();
    out.resize(at + (in.size() + 2) / 3 * 4);
    char* o = out.data() + at;
    const auto* p = reinterpret_cast<const unsigned char*>(in.data());
    size_t i = 0;
    for (; i + 2 < in.size(); i += 3, o += 4) {
        const uint32_t v = (uint32_t(p[i]) << 16) | (uint32_t(p[i + 1]) << 8) | p[i + 2];
        o[0] = table[v >> 18];
        o[1] = table[(v >> 12) & 63];
        o[2] = table[(v >> 6) & 63];
        o[3] = table[v & 63];
    }
    if (i + 1 == in.size()) {
        const uint32_t v = uint32_t(p[i]) << 16;
        o[0] = table[v >> 18];
        o[1] = table[(v >> 12) & 63];
        o[2] = o[3] = '=';
    } else if (i + 2 == in.size()) {
        const uint32_t v = (uint32_t(p[i]) << 16) | (uint32_t(p[i + 1]) << 8);
        o[0] = table[v >> 18];
        o[1] = table[(v >> 12) & 63];
        o[2] = table[(v >> 6) & 63];
        o[3] = '=';
    }
}

std::string base64_encode(std::string_view in) {
    std::string out;
    append_base64(out, in);
    return out;
}

void append_json_string(std::string& out, std::string_view text) {
    out.reserve(out.size() + text.size() + 2);
    out += '"';
    append_json_escaped(out, text);
    out += '"';
}

void append_json_escaped(std::string& out, std::string_view text) {
    static constexpr char hex[] = "0123456789abcdef";
    size_t run = 0;  // start of the bytes not yet copied
    for (size_t i = 0; i < text.size(); ++i) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        out.append(text.data() + run, i - run);
        run = i + 1;
        switch (c) {
            case '"':
                out += "\\\"";
                break;
            case '\\':
                out += "\\\\";
                break;
            case '\b':
                out += "\\b";
                break;
            case '\f':
                out += "\\f";
                break;
            case '\n':
                out += "\\n";
                break;
            case '\r':
                out += "\\r";
                break;
            case '\t':
                out += "\\t";
                break;
            default:
                out += "\\u00";
                out += hex[c >> 4];
                out += hex[c & 15];
        }
    }
    out.append(text.data() + run, text.size() - run);
}

namespace {

/// Bytes JSON escaping adds to `bytes`: a control character other than \b \f \n \r \t becomes
/// six (\u0000), a quote or backslash two.
/// Bytes JSON escaping adds to `bytes`; it stops counting once that is past `enough`.
size_t json_escape_overhead(std::string_view bytes, size_t enough = SIZE_MAX) {
    size_t extra = 0;
    for (const char ch : bytes) {
        const auto c = static_cast<unsigned char>(ch);
        if (c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t')
            extra += 1;
        else if (c < 0x20)
            extra += 5;
        if (extra > enough) break;
    }
    return extra;
}

}  // namespace

// Text unless escaping would more than double it: terminal output with colour codes stays
// readable, binary-looking output (a run of NULs is six times its size as JSON text, and slow to
// encode) goes as base64.
bool send_as_text(std::string_view bytes) {
    // The verdict is known once the overhead passes the size (a NUL stream: a fifth of the way).
    return json_escape_overhead(bytes, bytes.size()) <= bytes.size() && is_valid_utf8(bytes);
}

void TextCheck::feed(std::string_view bytes) {
    overhead_ += json_escape_overhead(bytes);
    size_ += bytes.size();
    if (!valid_) return;
    // A character cut between two pieces is checked once its last byte has come.
    std::string joined = carry_;
    joined.append(bytes);
    const size_t complete = utf8_complete_prefix(joined);
    valid_ = is_valid_utf8(std::string_view(joined).substr(0, complete));
    carry_ = joined.substr(complete);
}

bool TextCheck::as_text() const {
    return overhead_ <= size_ && valid_ && carry_.empty();
}

void put_text_and_bytes(nlohmann::json& out, const std::string& key, std::string_view bytes) {
    if (send_as_text(bytes)) {
        out[key] = std::string(bytes);
        return;
    }
    out[key] = utf8_with_replacements(bytes);
    out[key + "Base64"] = base64_encode(bytes);
}

void put_bytes(nlohmann::json& out, const std::string& key, std::string_view bytes) {
    if (send_as_text(bytes))
        out[key] = std::string(bytes);
    else
        out[key + "Base64"] = base64_encode(bytes);
}

std::string dump_json(const nlohmann::json& value) {
    return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace corral::daemon
