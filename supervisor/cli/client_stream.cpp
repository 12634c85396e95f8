#include "supervisor/cli/client_stream.hpp"

#include <ostream>

namespace corral::cli {
namespace {

std::string event_type(const nlohmann::json& event) {
    for (const char* key : {"type", "event"}) {
        auto it = event.find(key);
        if (it != event.end() && it->is_string()) return it->get<std::string>();
    }
    return "";
}

/// The signal number of an exit event: `signal` as a number, or a name such as "SIGKILL".
std::optional<int> event_signal(const nlohmann::json& event) {
    auto signal = event.find("signal");
    if (signal == event.end() || signal->is_null()) return std::nullopt;
    if (signal->is_number_integer() && signal->get<int>() > 0) return signal->get<int>();
    if (signal->is_string()) return parse_signal(signal->get<std::string>());
    return std::nullopt;
}

std::string error_event_message(const nlohmann::json& event) {
    auto error = event.find("error");
    if (error != event.end()) {
        if (error->is_string()) return error->get<std::string>();
        if (error->is_object()) return api_error_message(0, event);
    }
    return event.value("message", "the stream ended with an error");
}

}  // namespace

Result<StreamEnd> relay_stream(HttpResponseReader& reader, ClientIo& io,
                               const std::string& only_stream) {
    for (;;) {
        auto line = reader.read_line();
        if (!line) return std::move(line.error().context("read output stream"));
        if (!*line) return StreamEnd{};
        if ((*line)->empty()) continue;
        auto event = nlohmann::json::parse(**line, nullptr, /*allow_exceptions=*/false);
        if (event.is_discarded() || !event.is_object()) {
            return plain_error("read output stream: bad event line `" + (*line)->substr(0, 120) +
                               "`");
        }
        std::string type = event_type(event);
        if (type == "exit" || type == "error") {
            // Read the body to its end so the daemon finishes its response before we hang up.
            (void)reader.read_all(1 << 20);
            return StreamEnd{type == "exit" ? StreamEnd::Kind::Exit : StreamEnd::Kind::Error,
                             std::move(event)};
        }
        if (type != "stdout" && type != "stderr")
            continue;  // start, and kinds newer than this client
        if (!only_stream.empty() && type != only_stream) continue;
        auto data = bytes_field(event, "data");
        if (!data) return std::move(data.error());
        std::ostream& target = type == "stdout" ? io.out : io.err;
        target.write(data->data(), static_cast<std::streamsize>(data->size()));
        target.flush();
    }
}

int command_exit_code(const StreamEnd& end, std::ostream& err) {
    if (end.kind == StreamEnd::Kind::Cut) {
        err << "corral: the output stream ended without a final event; the command's fate is "
               "unknown\n";
        return client_exit::kExecFailure;
    }
    if (end.kind == StreamEnd::Kind::Error) {
        err << "corral: " << error_event_message(end.event) << "\n";
        return client_exit::kExecFailure;
    }
    std::string status = end.event.value("status", "");
    if (status == "timeout") {
        err << "corral: the command timed out\n";
        return client_exit::kExecTimeout;
    }
    auto signal = event_signal(end.event);
    if (status != "" && status != "exited" && status != "signaled") {
        err << "corral: the command ended: " << status;  // oom, pids-limit, seccomp, killed...
        // setup-failed says why it never started (chdir, execve): the reason is the point.
        if (auto reason = end.event.find("error");
            reason != end.event.end() && reason->is_string() && !reason->get<std::string>().empty())
            err << ": " << reason->get<std::string>();
        err << "\n";
    }
    if (signal) return 128 + *signal;
    auto code = end.event.find("exitCode");
    if (code != end.event.end() && code->is_number_integer()) return code->get<int>();
    if (status == "" || status == "exited") err << "corral: exit event without an exit code\n";
    return client_exit::kExecFailure;
}

Result<std::string> bytes_field(const nlohmann::json& object, const std::string& key) {
    auto plain = object.find(key);
    auto encoded = object.find(key + "Base64");
    std::optional<std::string> text;
    if (encoded != object.end() && encoded->is_string()) {
        text = decode_base64(encoded->get<std::string>());
    } else if (plain != object.end() && plain->is_string()) {
        if (object.value("encoding", "") != "base64") return plain->get<std::string>();
        text = decode_base64(plain->get<std::string>());
    } else {
        return std::string();
    }
    if (!text) return plain_error("field `" + key + "` holds bad base64");
    return std::move(*text);
}

std::optional<std::string> decode_base64(const std::string& text) {
    auto value_of = [](char c) -> int {
        if (c >= 'A' && c <= 'Z') return c - 'A';
        if (c >= 'a' && c <= 'z') return c - 'a' + 26;
        if (c >= '0' && c <= '9') return c - '0' + 52;
        if (c == '+') return 62;
        if (c == '/') return 63;
        return -1;
    };
    std::string out;
    unsigned bits = 0;
    int count = 0;
    for (char c : text) {
        if (c == '=') break;
        int value = value_of(c);
        if (value < 0) return std::nullopt;
        bits = (bits << 6) | static_cast<unsigned>(value);
        count += 6;
        if (count >= 8) {
            count -= 8;
            out += static_cast<char>((bits >> count) & 0xFF);
        }
    }
    return out;
}

}  // namespace corral::cli
