#include "supervisor/daemon/terminal_socket.hpp"

#include <boost/beast/websocket.hpp>
#include <deque>
#include <memory>

#include "supervisor/daemon/json_fields.hpp"

namespace corral::daemon {
namespace {

namespace websocket = beast::websocket;
using WebSocket = websocket::stream<Socket&>;

constexpr size_t kFrameLimit = 1u << 20;  // one client frame (typed bytes or a control message)
constexpr size_t kReadChunk = 64u << 10;  // output bytes per binary frame
constexpr auto kCloseBound = std::chrono::seconds(5);  // a client that never answers the close

/// What the socket's two halves share: the reader (client frames) runs as its own coroutine and
/// hands text replies to the writer, the only one that writes to the socket.
struct Link : Interruptible {
    Link(Socket& socket, WaitRegistry& registry, std::chrono::milliseconds frame_write_timeout)
        : ws(socket),
          wake(socket.get_executor(), asio::steady_timer::time_point::max()),
          write_bound(socket.get_executor()),
          write_timeout(frame_write_timeout),
          waits(registry) {
        waits.add(this);
        if (waits.stopping()) interrupted = true;
    }
    ~Link() override { waits.remove(this); }

    void notify() {
        pending = true;
        wake.cancel();
    }
    void interrupt() override {
        interrupted = true;
        notify();
    }
    /// Waits for notify() unless one is pending.
    asio::awaitable<void> sleep() {
        if (!pending) {
            beast::error_code ec;
            wake.expires_at(asio::steady_timer::time_point::max());
            co_await wake.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        }
        pending = false;
    }
    void reply(const std::string& code, const std::string& message) {
        const nlohmann::json frame = {{"type", "error"}, {"code", code}, {"message", message}};
        replies.push_back(dump_json(frame));
        notify();
    }

    WebSocket ws;
    asio::steady_timer wake;
    asio::steady_timer write_bound;  ///< runs while a frame is being written
    std::chrono::milliseconds write_timeout;
    WaitRegistry& waits;
    std::deque<std::string> replies;
    bool pending = false;
    bool interrupted = false;
    bool reader_done = false;
};

/// Applies one control message; a reply names what was wrong with it.
void control(Link& link, SessionManager& sessions, const std::string& sid, const std::string& proc,
             const std::string& text) {
    const auto json = nlohmann::json::parse(text, nullptr, false);
    if (json.is_discarded() || !json.is_object()) {
        link.reply("bad_frame", "a text frame must be a JSON object like "
                                "{\"type\":\"resize\",\"cols\":80,\"rows\":24}");
        return;
    }
    const auto type = json.find("type");
    if (type == json.end() || !type->is_string()) {
        link.reply("bad_frame", "a control message needs a string field `type`");
        return;
    }
    if (*type != "resize") {
        link.reply("bad_frame", "unknown control message type `" + type->get<std::string>() +
                                    "` (known: resize)");
        return;
    }
    auto cells = [&](const char* name) -> std::optional<uint16_t> {
        const auto field = json.find(name);
        if (field == json.end() || !field->is_number_integer()) return std::nullopt;
        const auto value = field->get<int64_t>();
        if (value < 1 || value > kMaxTerminalCells) return std::nullopt;
        return static_cast<uint16_t>(value);
    };
    const auto cols = cells("cols");
    const auto rows = cells("rows");
    if (!cols || !rows) {
        link.reply("bad_frame", "resize needs integer `cols` and `rows` in 1.." +
                                    std::to_string(kMaxTerminalCells));
        return;
    }
    Status resized = sessions.resize_terminal(sid, proc, TerminalSize{*cols, *rows});
    if (!resized) link.reply("resize_failed", resized.error().describe());
}

/// Client frames until the client closes or the connection fails. Typed bytes go to the pty
/// one frame at a time (the next frame is read once the previous one is written: backpressure).
asio::awaitable<void> read_frames(std::shared_ptr<Link> link, SessionManager& sessions,
                                  std::string sid, std::string proc) {
    bool input_refused = false;
    for (;;) {
        beast::flat_buffer buffer;
        beast::error_code ec;
        co_await link->ws.async_read(buffer, asio::redirect_error(asio::use_awaitable, ec));
        if (ec) break;
        std::string data = beast::buffers_to_string(buffer.data());
        if (!link->ws.got_binary()) {
            control(*link, sessions, sid, proc, data);
            continue;
        }
        if (data.empty()) continue;
        auto written = std::make_shared<AsyncEvent<Status>>(co_await asio::this_coro::executor,
                                                            link->waits);
        sessions.write_stdin(sid, proc, std::move(data), false,
                             [weak = std::weak_ptr(written)](Status status) {
                                 if (auto event = weak.lock()) event->set(std::move(status));
                             });
        auto status = co_await written->wait();
        if (!status) break;  // shutting down
        if (!*status && !input_refused) {
            input_refused = true;  // once: the terminal has exited or closed its input
            link->reply("input_refused", status->error().describe());
        }
    }
    link->reader_done = true;
    link->notify();
}

/// Writes one frame, bounded by corrald's --write-timeout as every HTTP response write is: a
/// client that stops taking output (it never reads, or reads one byte an hour) is cut off
/// instead of holding its connection, one of --max-connections, for ever (issue 12 item 4).
/// Cancelling the socket ends the reader's wait too, so the whole link winds down.
asio::awaitable<beast::error_code> write_frame(const std::shared_ptr<Link>& link,
                                               std::string_view data, bool binary) {
    beast::error_code ec;
    link->write_bound.expires_after(link->write_timeout);
    link->write_bound.async_wait([weak = std::weak_ptr(link)](const beast::error_code& error) {
        auto l = weak.lock();
        if (error || !l) return;  // cancelled: the write finished in time
        beast::error_code ignored;
        l->ws.next_layer().cancel(ignored);
    });
    if (binary) {
        link->ws.binary(true);
    } else {
        link->ws.text(true);
    }
    co_await link->ws.async_write(asio::buffer(data.data(), data.size()),
                                  asio::redirect_error(asio::use_awaitable, ec));
    link->write_bound.cancel();
    co_return ec;
}

nlohmann::json exit_frame(const ProcessInfo& info) {
    nlohmann::json frame = {{"type", "exit"},
                            {"status", info.status()},
                            {"exitCode", nullptr},
                            {"signal", nullptr}};
    if (info.exit_code) frame["exitCode"] = *info.exit_code;
    if (info.signal) frame["signal"] = signal_name(*info.signal);
    return frame;
}

/// Sends output and replies until the record is final (then the exit frame), the client left,
/// or corrald stops. Returns whether to close the socket politely.
asio::awaitable<bool> write_frames(std::shared_ptr<Link> link, SessionManager& sessions,
                                   const std::string& sid, const std::string& proc) {
    uint64_t offset = 0;  // the ring starts where it starts: the scrollback comes first
    WaitHandle waiting;
    for (;;) {
        while (!link->replies.empty()) {
            const std::string text = std::move(link->replies.front());
            link->replies.pop_front();
            if (co_await write_frame(link, text, false)) co_return false;
        }
        if (link->reader_done) co_return false;
        if (link->interrupted) {
            link->reply("shutting_down", "corrald is shutting down");
            continue;  // send it, then the next round closes
        }
        auto chunk = sessions.read_output(sid, proc, OutputStream::out, offset, kReadChunk);
        if (!chunk) {
            link->reply("session_ended", chunk.error().describe());
            continue;
        }
        if (!chunk->data.empty()) {
            offset = chunk->next_offset;
            if (co_await write_frame(link, chunk->data, true)) co_return false;
            continue;
        }
        offset = chunk->next_offset;
        auto info = sessions.get_process(sid, proc);
        if (info && !info->running) {
            const std::string text = dump_json(exit_frame(*info));
            co_return !co_await write_frame(link, text, false);
        }
        std::weak_ptr<Link> weak = link;
        waiting = sessions.async_wait_output(sid, proc, offset, 0, [weak](Status) {
            if (auto l = weak.lock()) l->notify();
        });
        co_await link->sleep();
    }
}

}  // namespace

asio::awaitable<void> serve_terminal_socket(Exchange& ex, SessionManager& sessions,
                                            WaitRegistry& waits, std::string sid,
                                            std::string proc) {
    auto link = std::make_shared<Link>(ex.socket(), waits, ex.write_timeout());
    ex.mark_upgraded();
    link->ws.read_message_max(kFrameLimit);
    link->ws.set_option(websocket::stream_base::decorator([](websocket::response_type& res) {
        res.set(http::field::server, "corrald/" CORRAL_VERSION);
    }));
    co_await link->ws.async_accept(ex.request(), asio::use_awaitable);
    asio::co_spawn(co_await asio::this_coro::executor, read_frames(link, sessions, sid, proc),
                   asio::detached);
    bool polite = false;
    try {
        polite = co_await write_frames(link, sessions, sid, proc);
    } catch (...) {
        polite = false;
    }
    // The reader holds a reference to this connection's socket: it must be done before the
    // connection goes away. A polite close lets it see the client's close frame; a client that
    // does not answer within the bound, or a failed connection, is cut off.
    asio::steady_timer bound(co_await asio::this_coro::executor, kCloseBound);
    bound.async_wait([weak = std::weak_ptr(link)](const beast::error_code& error) {
        auto l = weak.lock();
        if (error || !l || l->reader_done) return;
        beast::error_code ignored;
        l->ws.next_layer().cancel(ignored);
    });
    if (polite && !link->reader_done) {
        beast::error_code ec;
        co_await link->ws.async_close(websocket::close_code::normal,
                                      asio::redirect_error(asio::use_awaitable, ec));
    }
    if (!link->reader_done) {
        beast::error_code ignored;
        if (!polite) link->ws.next_layer().cancel(ignored);
        while (!link->reader_done) co_await link->sleep();
    }
    bound.cancel();
}

}  // namespace corral::daemon
