#include "supervisor/daemon/output_stream.hpp"

#include "supervisor/daemon/api_json.hpp"
#include "supervisor/daemon/json_fields.hpp"

namespace corral::daemon {
namespace {

constexpr size_t kReadChunk = 64 * 1024;
constexpr size_t kFlushAt = 256 * 1024;
// Binary frames carry bytes as they are, so a stream reads and sends in larger pieces: fewer
// frames, fewer chunked-encoding headers, fewer socket writes per byte.
constexpr size_t kBinaryReadChunk = 1024 * 1024;
constexpr size_t kBinaryFlushAt = 1024 * 1024;
enum FrameType : uint8_t { kJsonFrame = 0, kStdoutFrame = 1, kStderrFrame = 2 };

void append_be(std::string& out, uint64_t value, int bytes) {
    for (int shift = (bytes - 1) * 8; shift >= 0; shift -= 8)
        out += static_cast<char>((value >> shift) & 0xff);
}
constexpr uint64_t kNever = UINT64_MAX;  // a wait offset no stream ever grows past

/// Per-stream cursor: `sent` is where the next event starts; `seen` is how far we read (bytes
/// held back because they end inside a UTF-8 character lie between the two).
struct Cursor {
    OutputStream stream;
    const char* name;
    bool wanted;
    uint64_t sent;
    uint64_t seen;
    bool eof = false;
};

class ProcessStream {
  public:
    ProcessStream(Exchange& ex, SessionManager& sessions, WaitRegistry& waits,
                  const StreamRequest& request)
        : ex_(ex),
          sessions_(sessions),
          waits_(waits),
          request_(request),
          cursors_{Cursor{OutputStream::out, "stdout", request.want_stdout, request.stdout_offset,
                          request.stdout_offset},
                   Cursor{OutputStream::err, "stderr", request.want_stderr, request.stderr_offset,
                          request.stderr_offset}} {}

    asio::awaitable<void> run();

  private:
    void emit(nlohmann::json event) {
        event["seq"] = seq_++;
        const std::string line = dump_json(event);
        if (request_.binary) {
            pending_ += static_cast<char>(kJsonFrame);
            append_be(pending_, line.size(), 4);
            pending_ += line;
        } else {
            pending_ += line;
            pending_ += '\n';
        }
    }
    /// Binary: a gap is its own JSON event, then the bytes as they are, copied once: from the
    /// process's buffer into the frame (issue 18).
    void emit_output_frame(const Cursor& c, const OutputView& view) {
        if (view.skipped != 0)
            emit({{"type", "skipped"},
                  {"stream", c.name},
                  {"offset", view.offset},
                  {"skipped", view.skipped}});
        if (view.size() == 0) return;
        ++seq_;
        pending_ += static_cast<char>(c.stream == OutputStream::out ? kStdoutFrame : kStderrFrame);
        append_be(pending_, 8 + view.size(), 4);
        append_be(pending_, view.offset, 8);
        pending_.append(view.parts[0]).append(view.parts[1]);
    }
    /// An output event, written by hand: it carries nearly all of a stream's bytes, and building
    /// it as a json object copies and re-scans each chunk (fields as nlohmann would order them).
    void emit_output_line(const Cursor& c, uint64_t offset, uint64_t skipped,
                          std::string_view data) {
        if (send_as_text(data)) {
            pending_ += "{\"data\":";
            append_json_string(pending_, data);
        } else {
            pending_ += "{\"dataBase64\":\"";
            append_base64(pending_, data);
            pending_ += '"';
        }
        pending_ += ",\"offset\":";
        pending_ += std::to_string(offset);
        pending_ += ",\"seq\":";
        pending_ += std::to_string(seq_++);
        if (skipped != 0) {
            pending_ += ",\"skipped\":";
            pending_ += std::to_string(skipped);
        }
        pending_ += ",\"type\":\"";
        pending_ += c.name;
        pending_ += "\"}\n";
    }
    asio::awaitable<void> flush() {
        // Nothing else writes to pending_ while this coroutine waits, and keeping its capacity
        // spares an allocation (and its page faults) per flush.
        co_await ex_.send_chunk(pending_);
        pending_.clear();
        // Sent: the process may now write what the buffer can hold beyond it.
        if (follower_) follower_->advance(cursors_[0].sent, cursors_[1].sent);
    }
    /// Reads everything available now into events; false when the process record is gone.
    asio::awaitable<bool> drain(bool final_record);
    asio::awaitable<bool> drain_text(Cursor& c, bool final_record);
    asio::awaitable<bool> drain_frames(Cursor& c);
    void emit_exit(const ProcessInfo& info);
    void emit_error(const std::string& code, const std::string& message, bool running);
    asio::awaitable<std::optional<Status>> wait_for_output();

    Exchange& ex_;
    SessionManager& sessions_;
    WaitRegistry& waits_;
    const StreamRequest& request_;
    Cursor cursors_[2];
    uint64_t seq_ = 0;
    std::string pending_;
    std::shared_ptr<OutputFollower> follower_;  ///< backpressure while we stream
};

asio::awaitable<bool> ProcessStream::drain(bool final_record) {
    for (auto& c : cursors_) {
        if (!c.wanted) continue;
        const bool read = request_.binary ? co_await drain_frames(c)
                                          : co_await drain_text(c, final_record);
        if (!read) co_return false;
    }
    co_return true;
}

asio::awaitable<bool> ProcessStream::drain_text(Cursor& c, bool final_record) {
    for (;;) {
        auto chunk = sessions_.read_output(request_.session_id, request_.process_id, c.stream,
                                           c.sent, kReadChunk);
        if (!chunk) co_return false;
        c.eof = chunk->eof;
        std::string_view data = chunk->data;
        // Hold back a trailing partial character while more bytes may complete it.
        if (!chunk->eof && !final_record) data = data.substr(0, utf8_complete_prefix(data));
        c.seen = chunk->next_offset;
        if (data.empty() && chunk->skipped == 0) co_return true;
        emit_output_line(c, chunk->offset, chunk->skipped, data);
        c.sent = chunk->offset + data.size();
        if (pending_.size() >= kFlushAt) co_await flush();
        if (data.size() < chunk->data.size()) co_return true;  // held back: wait for the rest
    }
}

// Frames carry bytes, so nothing is held back (a character split across two is the client's).
// The view is used before the next co_await: the pipe may be read into the ring meanwhile.
asio::awaitable<bool> ProcessStream::drain_frames(Cursor& c) {
    for (;;) {
        auto view = sessions_.view_output(request_.session_id, request_.process_id, c.stream,
                                          c.sent, kBinaryReadChunk);
        if (!view) co_return false;
        c.eof = view->eof;
        c.seen = view->next_offset;
        if (view->size() == 0 && view->skipped == 0) co_return true;
        emit_output_frame(c, *view);
        c.sent = view->next_offset;
        if (pending_.size() >= kBinaryFlushAt) co_await flush();
    }
}

void ProcessStream::emit_exit(const ProcessInfo& info) {
    nlohmann::json event = process_json(info);
    event["type"] = "exit";
    emit(std::move(event));
}

void ProcessStream::emit_error(const std::string& code, const std::string& message, bool running) {
    emit({{"type", "error"}, {"code", code}, {"message", message}, {"running", running}});
}

asio::awaitable<std::optional<Status>> ProcessStream::wait_for_output() {
    auto event = std::make_shared<AsyncEvent<Status>>(co_await asio::this_coro::executor, waits_);
    const uint64_t out = cursors_[0].wanted ? cursors_[0].seen : kNever;
    const uint64_t err = cursors_[1].wanted ? cursors_[1].seen : kNever;
    WaitHandle handle =
        sessions_.async_wait_output(request_.session_id, request_.process_id, out, err,
                                    [weak = std::weak_ptr(event)](Status status) {
                                        if (auto e = weak.lock()) e->set(std::move(status));
                                    });
    co_return co_await event->wait();
}

asio::awaitable<void> ProcessStream::run() {
    const std::string& proc = request_.process_id;
    auto first = sessions_.get_process(request_.session_id, proc);
    if (!first) throw ApiFailure(api_error(first.error()));  // before the response: plain 404
    // An exec's hold was taken when it started; any other stream's is taken before the first
    // co_await.
    if (request_.follower) {
        follower_ = request_.follower;
    } else if (auto follower = sessions_.follow_output(
                   request_.session_id, proc, request_.want_stdout, request_.stdout_offset,
                   request_.want_stderr, request_.stderr_offset)) {
        follower_ = std::move(*follower);
    }
    if (request_.binary) {
        co_await ex_.begin_chunked(kBinaryStreamType);
    } else {
        co_await ex_.begin_ndjson();
    }
    nlohmann::json start = {{"type", "start"},
                            {"id", proc},
                            {"pid", first->pid},
                            {"stdoutOffset", request_.stdout_offset},
                            {"stderrOffset", request_.stderr_offset}};
    // Output read on after a daemon restart from the pipes the holder kept: its offsets start at
    // 0 again (what the old daemon had read died with it), so an offset from before the restart
    // does not name the same byte.
    if (first->output_resumed) start["outputResumed"] = true;
    emit(std::move(start));
    bool interrupted = false;
    for (;;) {
        auto info = sessions_.get_process(request_.session_id, proc);
        const bool final_record = info && !info->running;
        if (!info || !co_await drain(final_record)) {
            emit_error("session_ended",
                       "session `" + request_.session_id + "` ended; process `" + proc +
                           "` is gone and its record with it",
                       false);
            break;
        }
        // drain() read until nothing was left, and a final record gets no more output.
        if (final_record) {
            emit_exit(*info);
            break;
        }
        // A process a previous run of the daemon started has no pipes any more: no byte will
        // ever come, so following it would only hold the client (DESIGN.md "Surviving the
        // daemon"). The stream says so and ends; wait on /wait for its end.
        if (info->output_lost) {
            emit_error("daemon-restart",
                       "corrald restarted while process `" + proc +
                           "` ran; its output after the restart cannot be read (it still runs: "
                           "GET .../wait for its end)",
                       true);
            break;
        }
        if (interrupted) {
            emit_error("shutting_down",
                       "corrald is shutting down; process `" + proc + "` was still running", true);
            break;
        }
        co_await flush();
        auto woke = co_await wait_for_output();
        if (!woke) {
            interrupted = true;  // one more pass: the process may have just finished
            continue;
        }
        if (!*woke) {
            emit_error("session_ended", woke->error().describe(), false);
            break;
        }
    }
    co_await flush();
    co_await ex_.end_chunked();
}

}  // namespace

asio::awaitable<void> stream_process(Exchange& ex, SessionManager& sessions, WaitRegistry& waits,
                                     const StreamRequest& request) {
    ProcessStream stream(ex, sessions, waits, request);
    co_await stream.run();
}

}  // namespace corral::daemon
