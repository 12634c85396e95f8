#pragma once
// The wire format between corrald and a code context's driver (issue 14): frames of a 4-byte
// big-endian length followed by that many bytes of UTF-8 JSON, over a socket of their own (fd 3 of
// the interpreter), never over its stdout/stderr. The drivers (drivers/*.py, *.js) document the
// messages; this file is the daemon's side, and everything here treats the driver as untrusted:
// the code it runs shares its process and may write to the socket too (issue 10 item 2: daemon
// input that blocks or bloats it). So a length over kMaxDriverFrame is refused as soon as its
// header arrives (nothing is buffered for it), JSON nesting deeper than kMaxFrameDepth is refused
// while parsing (no deep recursion), and every message is checked field by field against its
// type: anything else is a protocol error that ends the context, never the daemon.

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.hpp"

namespace corral {

/// Largest frame a driver may send (a result's image/png or html, a 64 Ki-character stdout chunk).
inline constexpr size_t kMaxDriverFrame = 8u << 20;
/// Deepest JSON nesting a frame may have (the messages themselves are at most 3 deep).
inline constexpr int kMaxFrameDepth = 8;
/// Most traceback lines / result mime types one message may carry.
inline constexpr size_t kMaxTracebackLines = 1000;
inline constexpr size_t kMaxMimeTypes = 32;

/// One message of a driver, checked.
struct DriverMessage {
    enum class Type { ready, stdout_text, stderr_text, result, error, done };
    Type type = Type::ready;
    uint64_t run = 0;                         ///< the run it belongs to (not for ready)
    std::string text;                         ///< stdout/stderr text
    std::string version;                      ///< ready: the interpreter's version
    std::map<std::string, std::string> data;  ///< result: mime type -> value
    std::string name;                         ///< error: exception class
    std::string value;                        ///< error: its message
    std::vector<std::string> traceback;       ///< error: lines
};

/// Splits a byte stream into frames. Bounded: it never holds more than one frame's worth.
class FrameDecoder {
  public:
    /// Appends bytes read from the driver. EMSGSIZE once a header announces a frame over
    /// kMaxDriverFrame (the decoder is then spent).
    Status feed(std::string_view bytes);
    /// The next complete frame's payload, if one is complete.
    std::optional<std::string> next();

  private:
    std::string buffer_;
    size_t start_ = 0;
    bool failed_ = false;
};

/// Parses and checks one payload (EPROTO naming what is wrong).
Result<DriverMessage> parse_driver_message(std::string_view payload);

/// A frame for the driver: {"type":"run","id":RUN,"code":CODE}.
std::string encode_run_frame(uint64_t run, std::string_view code);

}  // namespace corral
