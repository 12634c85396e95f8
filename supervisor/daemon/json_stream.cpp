#include "supervisor/daemon/json_stream.hpp"

#include <memory>
#include <variant>

#include "supervisor/daemon/json_fields.hpp"

namespace corral::daemon {
namespace {

/// The JSON text of a value cut at its placeholders: text, source index, text, ...
using Segment = std::variant<std::string, size_t>;

void append_text(std::vector<Segment>& out, std::string_view text) {
    if (out.empty() || !std::holds_alternative<std::string>(out.back())) out.emplace_back("");
    std::get<std::string>(out.back()).append(text);
}

/// Writes `value` as dump_json(value) does with indent -1 (no spaces; object members in the
/// order nlohmann keeps them, which is its dump order), each leaf through dump_json itself.
void flatten(const nlohmann::json& value, std::vector<Segment>& out) {
    if (value.is_binary()) {
        out.emplace_back(static_cast<size_t>(value.get_binary().subtype()));
        return;
    }
    if (value.is_object()) {
        append_text(out, "{");
        bool first = true;
        for (auto it = value.begin(); it != value.end(); ++it) {
            if (!first) append_text(out, ",");
            first = false;
            append_text(out, dump_json(nlohmann::json(it.key())));
            append_text(out, ":");
            flatten(it.value(), out);
        }
        append_text(out, "}");
        return;
    }
    if (value.is_array()) {
        append_text(out, "[");
        for (size_t i = 0; i < value.size(); ++i) {
            if (i) append_text(out, ",");
            flatten(value[i], out);
        }
        append_text(out, "]");
        return;
    }
    append_text(out, dump_json(value));
}

/// Whole characters of `carry` + the next piece, the rest kept for the piece after it (a
/// character cut between two reads is handled once it is whole). At the end, everything.
std::string take_whole_characters(std::string& carry, bool last) {
    const size_t complete = last ? carry.size() : utf8_complete_prefix(carry);
    std::string whole = carry.substr(0, complete);
    carry.erase(0, complete);
    return whole;
}

}  // namespace

nlohmann::json streamed(size_t index) {
    return nlohmann::json::binary({}, static_cast<std::uint64_t>(index));
}

PieceSource streamed_json(const nlohmann::json& value, std::vector<PieceSource> sources) {
    auto segments = std::make_shared<std::vector<Segment>>();
    flatten(value, *segments);
    append_text(*segments, "\n");
    return [segments, sources = std::move(sources), at = size_t{0}](std::string& out) mutable {
        if (at == segments->size()) return false;
        if (auto* text = std::get_if<std::string>(&(*segments)[at])) {
            out += *text;
            ++at;
        } else if (!sources.at(std::get<size_t>((*segments)[at]))(out)) {
            ++at;
        }
        return at < segments->size();
    };
}

PieceSource json_array_source(size_t count, std::function<nlohmann::json(size_t)> element) {
    return [count, element = std::move(element), next = size_t{0}](std::string& out) mutable {
        if (next == 0) out += '[';
        const size_t start = out.size();
        while (next < count && out.size() - start < kResponsePiece) {
            if (next) out += ',';
            out += dump_json(element(next++));
        }
        if (next < count) return true;
        out += ']';
        return false;
    };
}

PieceSource json_text_source(ByteSource bytes) {
    return [bytes = std::move(bytes), started = false](std::string& out) mutable {
        if (!started) out += '"';
        started = true;
        std::string piece;
        const bool more = bytes(piece);
        append_json_escaped(out, piece);
        if (!more) out += '"';
        return more;
    };
}

PieceSource json_replaced_text_source(ByteSource bytes) {
    return [bytes = std::move(bytes), started = false,
            carry = std::string()](std::string& out) mutable {
        if (!started) out += '"';
        started = true;
        const bool more = bytes(carry);
        append_json_escaped(out, utf8_with_replacements(take_whole_characters(carry, !more)));
        if (!more) out += '"';
        return more;
    };
}

PieceSource json_base64_source(ByteSource bytes) {
    return [bytes = std::move(bytes), started = false,
            carry = std::string()](std::string& out) mutable {
        if (!started) out += '"';
        started = true;
        const bool more = bytes(carry);
        // Whole groups of three bytes until the last piece, whose rest is padded.
        const size_t whole = more ? carry.size() / 3 * 3 : carry.size();
        append_base64(out, std::string_view(carry).substr(0, whole));
        carry.erase(0, whole);
        if (!more) out += '"';
        return more;
    };
}

ByteSource bytes_of(std::shared_ptr<const std::string> bytes) {
    return [bytes = std::move(bytes), at = size_t{0}](std::string& out) mutable {
        const size_t n = std::min(bytes->size() - at, kResponsePiece / 2);
        out.append(*bytes, at, n);
        at += n;
        return at < bytes->size();
    };
}

}  // namespace corral::daemon
