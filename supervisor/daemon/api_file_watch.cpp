// GET /v1/sessions/{sid}/files/watch?path=P&recursive=true: an NDJSON stream of changes below a
// directory of the session (sessions/files/file_watch.hpp: inotify, confined by the file service).
//
// Events: {"seq","type":"watching","path","recursive","directories"} first (the watches are in
// place: changes from now on are reported), then create / modify / delete / move ({from, to}) /
// overflow, each with `path` and `isDir`; the stream ends with exactly one final event:
// {"type":"end","reason":"session_ended"|"deleted"} or {"type":"error","code","message"}
// (watch_limit, shutting_down). A client that goes away ends the watch and frees its inotify fd.
// Each watch holds a lease of the watch budget (sessions/files/inotify_budget.hpp): a session's
// watches past its share are 429 too_many_watches, corrald's past its half of the host's 503.

#include <unistd.h>

#include "sessions/files/file_watch.hpp"
#include "sessions/files/path_space.hpp"
#include "supervisor/daemon/api.hpp"
#include "supervisor/daemon/disconnect_watch.hpp"

namespace corral::daemon {
namespace {

/// What woke the watch loop; several may be true at once.
struct WatchWakeups {
    bool readable = false;
    bool read_armed = false;
    bool session_ended = false;
    bool client_gone = false;
    std::weak_ptr<AsyncEvent<bool>> current;
    void wake() {
        if (auto event = current.lock()) event->set(true);
    }
};

nlohmann::json event_json(const WatchEvent& event) {
    nlohmann::json j = {{"type", watch_event_name(event.type)}, {"path", event.path}};
    if (event.type != WatchEvent::Type::overflow) j["isDir"] = event.is_dir;
    if (event.type == WatchEvent::Type::move) {
        j["from"] = event.from;
        j["to"] = event.path;
    }
    return j;
}

ApiError watch_failure(const Error& error) {
    if (error.code == E2BIG) return {413, "watch_limit", error.describe(), nullptr};
    if (error.code == EUSERS) return {429, "too_many_watches", error.describe(), nullptr};
    if (error.code == ENOSPC || error.code == EMFILE)
        return {503, "exhausted", error.describe(), nullptr};
    if (error.code == EROFS) return {403, "read_only", error.describe(), nullptr};
    return api_file_error(error);
}

}  // namespace

asio::awaitable<void> Api::watch_files(Exchange& ex, const RouteParams& params, const Caller&) {
    const std::string& sid = params.at("sid");
    auto it = ex.query().find("path");
    const std::string path = it == ex.query().end() ? "." : it->second;
    auto shell = ex.query().find("shell");
    auto target = sessions_.file_target(sid, path, shell == ex.query().end() ? "" : shell->second);
    if (!target) throw ApiFailure(watch_failure(target.error()));
    FileWatchOptions options;
    options.recursive = query_flag(ex, "recursive");
    auto lease = watch_budget_.acquire(sid);
    if (!lease) throw ApiFailure(watch_failure(lease.error()));
    auto started = FileWatch::start(target->service, target->path, options, std::move(*lease));
    if (!started) throw ApiFailure(watch_failure(started.error()));
    std::unique_ptr<FileWatch> watch = std::move(*started);

    const auto executor = co_await asio::this_coro::executor;
    auto wakeups = std::make_shared<WatchWakeups>();
    // The descriptor Asio waits on is a dup: the FileWatch keeps (and closes) its own.
    asio::posix::stream_descriptor readable(executor, ::dup(watch->fd()));
    WaitHandle ended = sessions_.async_wait_session_end(sid, [wakeups](Status) {
        wakeups->session_ended = true;
        wakeups->wake();
    });
    DisconnectWatch disconnect(ex.socket(), [wakeups] {
        wakeups->client_gone = true;
        wakeups->wake();
    });

    uint64_t seq = 0;
    std::string pending;
    auto emit = [&](nlohmann::json event) {
        event["seq"] = seq++;
        pending += dump_json(event);
        pending += '\n';
    };
    co_await ex.begin_ndjson();
    emit({{"type", "watching"},
          {"path", target->path},
          {"recursive", options.recursive},
          {"directories", watch->directories()}});
    for (;;) {
        if (wakeups->readable) {
            wakeups->readable = false;
            for (const auto& event : watch->read_events()) emit(event_json(event));
        }
        if (watch->failure()) {
            emit({{"type", "error"},
                  {"code", watch->failure()->code == E2BIG ? "watch_limit" : "exhausted"},
                  {"message", watch->failure()->describe() + "; the watch ended"}});
            break;
        }
        if (watch->gone()) {
            emit({{"type", "end"}, {"reason", "deleted"}, {"path", target->path}});
            break;
        }
        if (wakeups->session_ended) {
            emit({{"type", "end"}, {"reason", "session_ended"}, {"path", target->path}});
            break;
        }
        if (wakeups->client_gone) {  // nobody to tell; the watch goes with us
            ex.close_after();
            co_return;
        }
        co_await ex.send_chunk(pending);
        pending.clear();
        if (!wakeups->read_armed) {
            wakeups->read_armed = true;
            readable.async_wait(
                asio::posix::descriptor::wait_read,
                [weak = std::weak_ptr(wakeups)](const boost::system::error_code& e) {
                    auto w = weak.lock();
                    if (!w) return;
                    w->read_armed = false;
                    if (e) return;
                    w->readable = true;
                    w->wake();
                });
        }
        auto event = std::make_shared<AsyncEvent<bool>>(executor, waits_);
        wakeups->current = event;
        if (!co_await event->wait()) {
            emit({{"type", "error"},
                  {"code", "shutting_down"},
                  {"message", "corrald is shutting down; the watch ended"}});
            break;
        }
    }
    co_await ex.send_chunk(pending);
    co_await ex.end_chunked();
}

}  // namespace corral::daemon
