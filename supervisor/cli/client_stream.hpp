#pragma once
// Relays a process's NDJSON output stream (exec, logs -f) to the terminal as events arrive, and
// turns its final event into an exit code. Events are one JSON object per line with a `type`:
//   start | stdout | stderr (with `data`, optionally `encoding: "base64"`) | exit | error.
// Every stream ends with exactly one final event (exit or error); a stream that stops without one
// is reported as such, never as a success.

#include <iosfwd>
#include <nlohmann/json.hpp>
#include <string>

#include "base/error.hpp"
#include "supervisor/cli/client_api.hpp"
#include "supervisor/cli/http_client.hpp"

namespace corral::cli {

/// How a relayed stream ended.
struct StreamEnd {
    enum class Kind { Exit, Error, Cut };  ///< Cut: the stream stopped without a final event
    Kind kind = Kind::Cut;
    nlohmann::json event;  ///< the final event (null when cut)
};

/// Copies stdout events to io.out and stderr events to io.err (only `only_stream` when not empty),
/// flushing after each, until the final event or the end of the body.
Result<StreamEnd> relay_stream(HttpResponseReader& reader, ClientIo& io,
                               const std::string& only_stream = "");

/// The exit code a command's stream end stands for: its exit code; 128+N for signal N; 124 for a
/// timeout; 125 when corral failed or the stream was cut. Explains non-plain endings on `err`.
int command_exit_code(const StreamEnd& end, std::ostream& err);

/// The bytes in field `key` of an event or reply: the string `key`, or `key`+"Base64" decoded (how
/// the daemon sends bytes that are not UTF-8), or `key` decoded when `encoding` is "base64". Empty
/// when absent.
Result<std::string> bytes_field(const nlohmann::json& object, const std::string& key);

/// Decodes standard base64 (padding optional); nullopt on a bad character.
std::optional<std::string> decode_base64(const std::string& text);

}  // namespace corral::cli
