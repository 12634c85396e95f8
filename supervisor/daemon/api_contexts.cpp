// Code-context endpoints (issue 14): create, list, get, delete, and run — answered whole, or as an
// NDJSON stream of the run's events with `Accept: application/x-ndjson`. The mechanism is in
// sessions/contexts/code_context.hpp; docs/API.md "Code contexts" has the wire format.

#include <deque>

#include "supervisor/daemon/api.hpp"
#include "supervisor/daemon/api_json.hpp"
#include "supervisor/daemon/disconnect_watch.hpp"

namespace corral::daemon {
namespace {

/// {language, id?, cwd?, env?}.
CodeContextRequest parse_context_request(std::string_view body) {
    const auto json = parse_json_object(body);
    ObjectReader r(json);
    CodeContextRequest request;
    const auto language = r.string("language");
    request.id = r.string("id").value_or("");
    request.cwd = r.string("cwd").value_or("");
    request.env = r.env_map("env").value_or(std::map<std::string, std::string>{});
    r.finish();
    if (!language) r.missing("language");
    const auto parsed = parse_code_language(*language);
    if (!parsed)
        throw ApiFailure(bad_request("invalid",
                                     "field `language` must be `python` or "
                                     "`javascript`, not `" +
                                         language->substr(0, 40) + "`"));
    request.language = *parsed;
    return request;
}

/// {code, timeoutMs?}.
CodeRunRequest parse_run_request(std::string_view body) {
    const auto json = parse_json_object(body);
    ObjectReader r(json);
    CodeRunRequest request;
    auto code = r.string("code");
    request.timeout = r.milliseconds("timeoutMs");
    r.finish();
    if (!code) r.missing("code");
    request.code = std::move(*code);
    return request;
}

nlohmann::json context_json(const CodeContextInfo& c) {
    nlohmann::json j = {{"id", c.id},           {"language", to_string(c.language)},
                        {"status", c.status},   {"pid", c.pid},
                        {"process", c.process}, {"cwd", c.cwd},
                        {"version", c.version}, {"runs", c.runs},
                        {"queued", c.queued}};
    if (!c.error.empty()) j["error"] = c.error;
    if (c.exit) {
        const nlohmann::json record = process_json(*c.exit);
        j["exit"] = {{"status", record["status"]},
                     {"exitCode", record["exitCode"]},
                     {"signal", record["signal"]}};
    }
    return j;
}

nlohmann::json error_json(const CodeError& e) {
    return {{"name", e.name}, {"value", e.value}, {"traceback", e.traceback}};
}

/// The events a run produced so far, and whoever waits for more.
struct RunChannel {
    std::deque<CodeRunEvent> events;
    std::weak_ptr<AsyncEvent<bool>> waiter;
    bool gone = false;  ///< the client closed the connection
    void wake() {
        if (auto w = waiter.lock()) w->set(true);
    }
};

/// One NDJSON line of a run event.
std::string event_line(const CodeRunEvent& e, uint64_t seq) {
    nlohmann::json j;
    switch (e.type) {
        case CodeRunEvent::Type::stdout_text:
        case CodeRunEvent::Type::stderr_text: {
            // Written by hand: output events carry nearly all of a run's bytes.
            std::string line = "{\"seq\":" + std::to_string(seq) + ",\"text\":";
            append_json_string(line, e.text);
            line += e.type == CodeRunEvent::Type::stdout_text ? ",\"type\":\"stdout\"}\n"
                                                              : ",\"type\":\"stderr\"}\n";
            return line;
        }
        case CodeRunEvent::Type::result:
            j = {{"type", "result"}, {"data", e.data}};
            break;
        case CodeRunEvent::Type::error:
            j = error_json(e.error);
            j["type"] = "error";
            break;
        case CodeRunEvent::Type::end:
            j = {{"type", "end"},
                 {"status", e.status},
                 {"durationMs", e.duration_ms},
                 {"truncated", e.truncated}};
            if (!e.message.empty()) j["message"] = e.message;
            break;
    }
    j["seq"] = seq;
    return dump_json(j) + "\n";
}

bool wants_ndjson(const Exchange& ex) {
    return ex.header("Accept").find("application/x-ndjson") != std::string::npos;
}

ApiError context_error(const Error& error) {
    if (error.code == ENOPKG) return {409, "no_interpreter", error.message, nullptr};
    if (error.code == EOWNERDEAD) return {409, "context_dead", error.message, nullptr};
    return api_error(error);
}

}  // namespace

asio::awaitable<void> Api::create_context(Exchange& ex, const RouteParams& params, const Caller&) {
    const std::string body = co_await ex.read_body(kJsonBodyLimit);
    const CodeContextRequest request = parse_context_request(body);
    auto event = std::make_shared<AsyncEvent<Result<CodeContextInfo>>>(
        co_await asio::this_coro::executor, waits_);
    WaitHandle handle = sessions_.create_context(
        params.at("sid"), request, [weak = std::weak_ptr(event)](Result<CodeContextInfo> info) {
            if (auto e = weak.lock()) e->set(std::move(info));
        });
    auto outcome = co_await event->wait();
    if (!outcome) throw ApiFailure({503, "shutting_down", "corrald is shutting down", nullptr});
    if (!*outcome) throw ApiFailure(context_error(outcome->error()));
    const nlohmann::json reply = context_json(**outcome);
    co_await ex.send_json(201, reply);
}

asio::awaitable<void> Api::list_contexts(Exchange& ex, const RouteParams& params, const Caller&) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& info : take(sessions_.list_contexts(params.at("sid"))))
        list.push_back(context_json(info));
    nlohmann::json reply = {{"contexts", std::move(list)}};
    co_await ex.send_json(200, reply);
}

asio::awaitable<void> Api::get_context(Exchange& ex, const RouteParams& params, const Caller&) {
    const nlohmann::json reply =
        context_json(take(sessions_.get_context(params.at("sid"), params.at("ctx"))));
    co_await ex.send_json(200, reply);
}

asio::awaitable<void> Api::delete_context(Exchange& ex, const RouteParams& params, const Caller&) {
    check(sessions_.delete_context(params.at("sid"), params.at("ctx")));
    nlohmann::json reply = {{"id", params.at("ctx")}, {"deleted", true}};
    co_await ex.send_json(200, reply);
}

// A client that goes away aborts its run, as an abort signal does in the SDKs: a queued run leaves
// the queue, a running one is interrupted (SIGINT, as at a timeout) and the context keeps its
// state.
asio::awaitable<void> Api::run_code(Exchange& ex, const RouteParams& params, const Caller&) {
    const std::string& sid = params.at("sid");
    const std::string& ctx = params.at("ctx");
    const std::string body = co_await ex.read_body(kJsonBodyLimit);
    const CodeRunRequest request = parse_run_request(body);
    const bool stream = wants_ndjson(ex);
    auto channel = std::make_shared<RunChannel>();
    auto queued = sessions_.run_code(sid, ctx, request, [channel](const CodeRunEvent& event) {
        channel->events.push_back(event);
        channel->wake();
    });
    if (!queued) throw ApiFailure(context_error(queued.error()));
    WaitHandle handle = std::move(queued->handle);
    const uint64_t run = queued->run;
    // An early return (the client gone, a failed write) interrupts the run if it still runs.
    struct Abort {
        SessionManager& sessions;
        const std::string& sid;
        const std::string& ctx;
        uint64_t run;
        bool armed = true;
        ~Abort() {
            if (armed) (void)sessions.interrupt_code(sid, ctx, run);
        }
    } abort{sessions_, sid, ctx, run};
    DisconnectWatch watch(ex.socket(), [channel] {
        channel->gone = true;
        if (auto w = channel->waiter.lock()) w->interrupt();
    });

    nlohmann::json results = nlohmann::json::array();
    std::string out;
    std::string err;
    nlohmann::json error = nullptr;
    std::optional<CodeRunEvent> end;
    uint64_t seq = 0;
    std::string pending;
    if (stream) co_await ex.begin_ndjson();
    for (;;) {
        while (!channel->events.empty() && !end) {
            CodeRunEvent event = std::move(channel->events.front());
            channel->events.pop_front();
            if (stream) pending += event_line(event, seq++);
            switch (event.type) {
                case CodeRunEvent::Type::stdout_text:
                    out += event.text;
                    break;
                case CodeRunEvent::Type::stderr_text:
                    err += event.text;
                    break;
                case CodeRunEvent::Type::result:
                    results.push_back(event.data);
                    break;
                case CodeRunEvent::Type::error:
                    error = error_json(event.error);
                    break;
                case CodeRunEvent::Type::end:
                    end = std::move(event);
                    break;
            }
            if (stream) {
                out.clear();  // a stream keeps nothing
                err.clear();
            }
        }
        if (end) {
            abort.armed = false;
            break;
        }
        if (stream && !pending.empty()) {
            std::string chunk = std::move(pending);
            pending.clear();
            co_await ex.send_chunk(chunk);
            continue;  // more may have come meanwhile
        }
        auto event = std::make_shared<AsyncEvent<bool>>(co_await asio::this_coro::executor, waits_);
        channel->waiter = event;
        const auto woke = co_await event->wait();
        if (woke) continue;
        if (channel->gone) co_return;  // nobody to answer
        if (!stream)
            throw ApiFailure(
                {503, "shutting_down", "corrald is shutting down; the run had not ended", nullptr});
        nlohmann::json final_event = {
            {"type", "error"},
            {"code", "shutting_down"},
            {"message", "corrald is shutting down; the run had not ended"},
            {"seq", seq++}};
        pending += dump_json(final_event) + "\n";
        break;
    }
    if (stream) {
        if (!pending.empty()) co_await ex.send_chunk(pending);
        co_await ex.end_chunked();
        co_return;
    }
    nlohmann::json reply = {{"context", ctx},
                            {"status", end->status},
                            {"results", std::move(results)},
                            {"stdout", std::move(out)},
                            {"stderr", std::move(err)},
                            {"truncated", end->truncated},
                            {"durationMs", end->duration_ms}};
    if (!error.is_null()) reply["error"] = std::move(error);
    if (!end->message.empty()) reply["message"] = end->message;
    co_await ex.send_json(200, reply);
}

}  // namespace corral::daemon
