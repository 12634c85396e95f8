#pragma once
// The NDJSON stream of one process (exec and processes/{proc}/stream).
//
// Events, one JSON object per line, each with `seq` (0, 1, 2, ... within this response):
//   {"seq":0,"type":"start","id":"p1","pid":123,"stdoutOffset":0,"stderrOffset":0}
//   {"seq":1,"type":"stdout","offset":0,"data":"hello\n"}
//   {"seq":2,"type":"stderr","offset":0,"dataBase64":"/w=="}      bytes that are not UTF-8
//   {"seq":3,"type":"stdout","offset":9000,"skipped":4000,"data":"..."}  4000 bytes fell out of
//                                                                       the bounded buffer
//   {"seq":4,"type":"exit","status":"exited","exitCode":0,"signal":null,"durationMs":12,...}
// `offset` is the absolute byte offset of the chunk in its stream, so a client that lost the
// connection resumes with ?stdoutOffset=&stderrOffset= (or ?offset= for both) and gets no byte
// twice. A chunk never ends inside a UTF-8 character while the process can still write.
//
// The stream always ends with exactly one final event that tells the truth: `exit` when the
// process's record is final and all its output was sent, otherwise `error` with a code:
//   "shutting_down"  corrald is stopping; the process was still running when the stream ended
//   "session_ended"  the session (and with it the process record) is gone
//
// With `Accept: application/vnd.corral.stream` the same events come as binary frames instead
// (content type application/vnd.corral.stream), so output bytes travel as they are: no JSON
// escaping, no base64, no holding back of partial UTF-8 characters. Each frame is
//   u8 type | u32 length (big-endian) | payload of `length` bytes
//   type 0: a JSON event, exactly as the NDJSON line would be (start, exit, error, and
//           {"type":"skipped","stream":"stdout","offset":N,"skipped":M} before data that follows
//           a gap), `seq` counting every frame
//   type 1 (stdout) / 2 (stderr): u64 offset (big-endian), then the output bytes
// The stream ends, as in NDJSON, with exactly one final `exit` or `error` event.
//
// A slow client only slows its own stream: output goes to the process's bounded buffer, and this
// stream reads from it at the pace the socket accepts.

#include <cstdint>
#include <string>

#include "sessions/session_manager.hpp"
#include "supervisor/daemon/async_event.hpp"
#include "supervisor/daemon/exchange.hpp"

namespace corral::daemon {

/// Where a stream starts and which output it carries.
struct StreamRequest {
    std::string session_id;
    std::string process_id;
    uint64_t stdout_offset = 0;
    uint64_t stderr_offset = 0;
    bool want_stdout = true;
    bool want_stderr = true;
    bool binary = false;  ///< frames of application/vnd.corral.stream instead of NDJSON
    /// The hold on the output taken when the process started (exec: it follows both streams
    /// from offset 0); null: the stream takes its own at the offsets above.
    std::shared_ptr<OutputFollower> follower;
};

/// The content type of the binary framing, as clients ask for it in `Accept`.
inline constexpr const char* kBinaryStreamType = "application/vnd.corral.stream";

/// Writes the whole NDJSON response (header, events, final event, last chunk).
asio::awaitable<void> stream_process(Exchange& ex, SessionManager& sessions, WaitRegistry& waits,
                                     const StreamRequest& request);

}  // namespace corral::daemon
