#include "sessions/contexts/driver_frames.hpp"

#include <nlohmann/json.hpp>

namespace corral {
namespace {

uint32_t read_length(std::string_view header) {
    const auto* b = reinterpret_cast<const unsigned char*>(header.data());
    return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | b[3];
}

Error protocol(const std::string& what) {
    return sys_error(EPROTO, "driver protocol: " + what);
}

/// Thrown out of the parser callback: the nesting is too deep to go on.
struct TooDeep {};

const nlohmann::json* field(const nlohmann::json& object, const char* name) {
    auto it = object.find(name);
    return it == object.end() ? nullptr : &*it;
}

bool take_string(const nlohmann::json& object, const char* name, std::string& out) {
    const auto* value = field(object, name);
    if (!value || !value->is_string()) return false;
    out = value->get<std::string>();
    return true;
}

/// A mime type as drivers send them: type/subtype of [a-z0-9.+-], at most 100 characters.
bool valid_mime(const std::string& mime) {
    if (mime.empty() || mime.size() > 100) return false;
    size_t slashes = 0;
    for (char c : mime) {
        if (c == '/') {
            ++slashes;
        } else if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '+' ||
                     c == '-')) {
            return false;
        }
    }
    return slashes == 1 && mime.front() != '/' && mime.back() != '/';
}

}  // namespace

Status FrameDecoder::feed(std::string_view bytes) {
    if (failed_) return sys_error(EMSGSIZE, "driver protocol: the stream already failed");
    buffer_.append(bytes);
    // Every header that has arrived is checked now, before the bytes it announces pile up: the
    // buffer never holds more than one allowed frame and one read's worth beyond it.
    size_t at = start_;
    while (buffer_.size() - at >= 4) {
        const uint32_t length = read_length(std::string_view(buffer_).substr(at, 4));
        if (length > kMaxDriverFrame) {
            failed_ = true;
            buffer_.clear();
            start_ = 0;
            return sys_error(EMSGSIZE, "driver protocol: a frame of " + std::to_string(length) +
                                           " bytes, over the " + std::to_string(kMaxDriverFrame) +
                                           "-byte limit");
        }
        if (buffer_.size() - at < 4 + size_t{length}) break;
        at += 4 + length;
    }
    return {};
}

std::optional<std::string> FrameDecoder::next() {
    if (failed_ || buffer_.size() - start_ < 4) return std::nullopt;
    const uint32_t length = read_length(std::string_view(buffer_).substr(start_, 4));
    if (buffer_.size() - start_ < 4 + size_t{length}) return std::nullopt;
    std::string payload = buffer_.substr(start_ + 4, length);
    start_ += 4 + length;
    if (start_ == buffer_.size()) {
        buffer_.clear();
        start_ = 0;
    } else if (start_ > (1u << 20)) {
        buffer_.erase(0, start_);
        start_ = 0;
    }
    return payload;
}

Result<DriverMessage> parse_driver_message(std::string_view payload) {
    nlohmann::json json;
    try {
        json = nlohmann::json::parse(
            payload,
            [](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
                if (depth > kMaxFrameDepth) throw TooDeep{};
                return true;
            },
            /*allow_exceptions=*/false);
    } catch (const TooDeep&) {
        return protocol("a frame nested deeper than " + std::to_string(kMaxFrameDepth));
    }
    if (json.is_discarded()) return protocol("a frame that is not valid UTF-8 JSON");
    if (!json.is_object()) return protocol("a frame that is not a JSON object");
    std::string type;
    if (!take_string(json, "type", type)) return protocol("a frame without a string `type`");
    DriverMessage message;
    if (type == "ready") {
        message.type = DriverMessage::Type::ready;
        if (!take_string(json, "version", message.version))
            return protocol("`ready` without a string `version`");
        if (message.version.size() > 200) return protocol("`ready` with an oversize `version`");
        return message;
    }
    const auto* run = field(json, "run");
    if (!run || !run->is_number_unsigned())
        return protocol("`" + type.substr(0, 40) + "` without a run id");
    message.run = run->get<uint64_t>();
    if (type == "stdout" || type == "stderr") {
        message.type =
            type == "stdout" ? DriverMessage::Type::stdout_text : DriverMessage::Type::stderr_text;
        if (!take_string(json, "text", message.text))
            return protocol("`" + type + "` without a string `text`");
    } else if (type == "result") {
        message.type = DriverMessage::Type::result;
        const auto* data = field(json, "data");
        if (!data || !data->is_object() || data->empty() || data->size() > kMaxMimeTypes)
            return protocol("`result` without a `data` object of 1.." +
                            std::to_string(kMaxMimeTypes) + " mime types");
        for (const auto& [mime, value] : data->items()) {
            if (!valid_mime(mime)) return protocol("`result` with a malformed mime type");
            if (!value.is_string())
                return protocol("`result` whose `" + mime + "` is not a string");
            message.data[mime] = value.get<std::string>();
        }
    } else if (type == "error") {
        message.type = DriverMessage::Type::error;
        if (!take_string(json, "name", message.name) || !take_string(json, "value", message.value))
            return protocol("`error` without string `name` and `value`");
        const auto* lines = field(json, "traceback");
        if (!lines || !lines->is_array() || lines->size() > kMaxTracebackLines)
            return protocol("`error` without a `traceback` list of at most " +
                            std::to_string(kMaxTracebackLines) + " lines");
        for (const auto& line : *lines) {
            if (!line.is_string()) return protocol("`error` with a traceback line not a string");
            message.traceback.push_back(line.get<std::string>());
        }
    } else if (type == "done") {
        message.type = DriverMessage::Type::done;
    } else {
        return protocol("a frame of unknown type `" + type.substr(0, 40) + "`");
    }
    return message;
}

std::string encode_run_frame(uint64_t run, std::string_view code) {
    const nlohmann::json message = {{"type", "run"}, {"id", run}, {"code", std::string(code)}};
    const std::string body = message.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    std::string frame;
    const auto length = static_cast<uint32_t>(body.size());
    frame.push_back(static_cast<char>(length >> 24));
    frame.push_back(static_cast<char>(length >> 16));
    frame.push_back(static_cast<char>(length >> 8));
    frame.push_back(static_cast<char>(length));
    frame += body;
    return frame;
}

}  // namespace corral
