// Process endpoints: run, exec, spawn, list, get, signal, kill, logs, stream, stdin, wait.

#include "supervisor/daemon/api.hpp"
#include "supervisor/daemon/api_json.hpp"
#include "supervisor/daemon/disconnect_watch.hpp"
#include "supervisor/daemon/output_stream.hpp"

namespace corral::daemon {
namespace {

/// What a `run` result carries of one stream: all of it under the policy's output cap; past it,
/// the first and the last part with a marker between them, so both the head of a long log and
/// the error at its end survive (issue 13.9). The cut points move to character boundaries so a
/// UTF-8 log stays text. Returns the bytes omitted (0 when none).
uint64_t put_run_output(nlohmann::json& out, SessionManager& sessions, const std::string& sid,
                        const std::string& proc, OutputStream stream, const std::string& key) {
    OutputBuffer::Excerpt excerpt = take(sessions.output_excerpt(sid, proc, stream));
    if (excerpt.omitted == 0) {
        put_text_and_bytes(out, key, excerpt.head);
        return 0;
    }
    uint64_t omitted = excerpt.omitted;
    const size_t head = utf8_complete_prefix(excerpt.head);
    omitted += excerpt.head.size() - head;
    excerpt.head.resize(head);
    size_t skip = 0;  // continuation bytes of a character whose lead byte was omitted
    while (skip < 3 && skip < excerpt.tail.size() &&
           (static_cast<unsigned char>(excerpt.tail[skip]) & 0xC0) == 0x80)
        ++skip;
    omitted += skip;
    excerpt.head += "\n[... " + std::to_string(omitted) + " bytes omitted ...]\n";
    excerpt.head.append(excerpt.tail, skip);
    put_text_and_bytes(out, key, excerpt.head);
    return omitted;
}

/// `Accept: application/vnd.corral.stream` asks for binary frames (output_stream.hpp).
bool wants_binary_stream(Exchange& ex) {
    return ex.header("Accept").find(kBinaryStreamType) != std::string::npos;
}

ApiError shutting_down_while(const std::string& proc) {
    return {503, "shutting_down",
            "corrald is shutting down; process `" + proc + "` was still running", nullptr};
}

}  // namespace

// A client that goes away aborts its command, as an abort signal does in the agent SDKs: the
// whole tree is stopped (SIGTERM, grace, kill). `detachOnDisconnect` keeps it running instead.
asio::awaitable<void> Api::run(Exchange& ex, const RouteParams& params, const Caller&) {
    const std::string& sid = params.at("sid");
    const std::string body = co_await ex.read_body(kJsonBodyLimit);
    const ProcessRequest request = parse_process_request(body);
    const auto started = co_await start_command(ex, sid, request);
    if (!started) co_return;  // the client is gone; so is its command
    std::optional<DisconnectWatch> watch;
    if (!request.detach_on_disconnect) {
        watch.emplace(ex.socket(), [this, sid, proc = started->id] {
            (void)sessions_.stop_process(sid, proc, false);
        });
    }
    auto outcome = co_await await_process(sid, started->id, std::nullopt);
    watch.reset();
    if (!outcome) throw ApiFailure(shutting_down_while(started->id));
    const ProcessInfo info = take(std::move(outcome->first));
    nlohmann::json out = process_json(info);
    const uint64_t out_omitted =
        put_run_output(out, sessions_, sid, info.id, OutputStream::out, "stdout");
    const uint64_t err_omitted =
        put_run_output(out, sessions_, sid, info.id, OutputStream::err, "stderr");
    out["omittedBytes"] = {{"stdout", out_omitted}, {"stderr", err_omitted}};
    co_await ex.send_json(200, out);
}

asio::awaitable<void> Api::exec(Exchange& ex, const RouteParams& params, const Caller&) {
    const std::string& sid = params.at("sid");
    const std::string body = co_await ex.read_body(kJsonBodyLimit);
    const ProcessRequest request = parse_process_request(body);
    const auto started = co_await start_command(ex, sid, request);
    if (!started) co_return;
    StreamRequest stream{sid, started->id};
    stream.binary = wants_binary_stream(ex);
    std::optional<DisconnectWatch> watch;
    if (!request.detach_on_disconnect) {
        // A quiet command writes nothing that could fail: watch the socket as well.
        watch.emplace(ex.socket(), [this, sid, proc = started->id] {
            (void)sessions_.stop_process(sid, proc, false);
        });
    }
    try {
        co_await stream_process(ex, sessions_, waits_, stream);
    } catch (...) {
        // The stream broke (the client went away mid-write).
        if (!request.detach_on_disconnect) (void)sessions_.stop_process(sid, started->id, false);
        throw;
    }
}

asio::awaitable<void> Api::spawn(Exchange& ex, const RouteParams& params, const Caller&) {
    const std::string body = co_await ex.read_body(kJsonBodyLimit);
    ProcessRequest request = parse_process_request(body);
    if (!request.shell.empty())
        throw ApiFailure(bad_request("invalid", "`shell` is for run and exec; a background "
                                                "process does not take a shell context's turn"));
    request.background = true;  // only its own timeoutMs applies
    const ProcessInfo started = take(sessions_.start_process(params.at("sid"), request));
    const nlohmann::json reply = process_json(started);
    co_await ex.send_json(201, reply);
}

asio::awaitable<void> Api::kill_all_processes(Exchange& ex, const RouteParams& params,
                                              const Caller&) {
    const std::string& sid = params.at("sid");
    const std::vector<std::string> killed = take(sessions_.kill_all_processes(sid));
    // Answer once their records are final, so {killed: N} means they are really gone.
    for (const auto& proc : killed) (void)co_await await_process(sid, proc, Millis(10000));
    nlohmann::json reply = {{"killed", killed.size()}, {"ids", killed}};
    co_await ex.send_json(200, reply);
}

asio::awaitable<void> Api::list_processes(Exchange& ex, const RouteParams& params, const Caller&) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& info : take(sessions_.list_processes(params.at("sid"))))
        list.push_back(process_json(info));
    nlohmann::json reply = {{"processes", std::move(list)}};
    co_await ex.send_json(200, reply);
}

asio::awaitable<void> Api::get_process(Exchange& ex, const RouteParams& params, const Caller&) {
    const nlohmann::json reply =
        process_json(take(sessions_.get_process(params.at("sid"), params.at("proc"))));
    co_await ex.send_json(200, reply);
}

asio::awaitable<void> Api::signal_process(Exchange& ex, const RouteParams& params, const Caller&) {
    const std::string body = co_await ex.read_body(kJsonBodyLimit);
    const auto json = parse_json_object(body);
    ObjectReader r(json);
    std::optional<int> signal;
    // `signal` is a name ("TERM", "SIGKILL") or a number (15).
    if (auto it = json.find("signal"); it != json.end() && it->is_number()) {
        const uint64_t number = r.unsigned_integer("signal").value_or(0);
        if (number == 0 || number > 64)
            throw ApiFailure(
                bad_request("invalid", "signal " + std::to_string(number) + " out of range"));
        signal = static_cast<int>(number);
    } else if (auto text = r.string("signal")) {
        signal = parse_signal(*text);
        if (!signal) throw ApiFailure(bad_request("invalid", "unknown signal `" + *text + "`"));
    }
    const bool tree = r.boolean("tree").value_or(false);
    r.finish();
    if (!signal) r.missing("signal");
    nlohmann::json reply = {{"id", params.at("proc")}, {"signal", signal_name(*signal)}};
    if (tree) {
        // Every process of its leaf: the whole tree, reparented descendants included.
        reply["signalled"] =
            take(sessions_.signal_process_tree(params.at("sid"), params.at("proc"), *signal));
    } else {
        check(sessions_.signal_process(params.at("sid"), params.at("proc"), *signal));
    }
    co_await ex.send_json(200, reply);
}

asio::awaitable<void> Api::kill_process(Exchange& ex, const RouteParams& params, const Caller&) {
    const std::string& sid = params.at("sid");
    const std::string& proc = params.at("proc");
    // Gracefully by default (SIGTERM to the tree, the grace period, then cgroup.kill), so a
    // SIGTERM trap runs; ?force=true kills at once.
    const size_t killed = take(sessions_.stop_process(sid, proc, query_flag(ex, "force")));
    // Answer with the final record, so the caller knows the tree is really gone.
    auto outcome = co_await await_process(sid, proc, Millis(120000));
    if (!outcome) throw ApiFailure(shutting_down_while(proc));
    nlohmann::json out = process_json(take(std::move(outcome->first)));
    out["killed"] = killed;
    co_await ex.send_json(200, out);
}

asio::awaitable<void> Api::logs(Exchange& ex, const RouteParams& params, const Caller&) {
    auto it = ex.query().find("stream");
    const std::string which = it == ex.query().end() ? "stdout" : it->second;
    if (which != "stdout" && which != "stderr")
        throw ApiFailure(
            bad_request("bad_query", "query parameter `stream` must be stdout or stderr"));
    const uint64_t offset = query_number(ex, "offset").value_or(0);
    const uint64_t limit =
        std::min<uint64_t>(query_number(ex, "limit").value_or(1 << 20), 16 << 20);
    auto chunk = take(sessions_.read_output(
        params.at("sid"), params.at("proc"),
        which == "stdout" ? OutputStream::out : OutputStream::err, offset, limit));
    nlohmann::json out = {{"stream", which},
                          {"offset", chunk.offset},
                          {"nextOffset", chunk.next_offset},
                          {"skipped", chunk.skipped},
                          {"eof", chunk.eof}};
    put_bytes(out, "data", chunk.data);
    co_await ex.send_json(200, out);
}

asio::awaitable<void> Api::stream(Exchange& ex, const RouteParams& params, const Caller&) {
    StreamRequest request{params.at("sid"), params.at("proc")};
    request.binary = wants_binary_stream(ex);
    const uint64_t both = query_number(ex, "offset").value_or(0);
    request.stdout_offset = query_number(ex, "stdoutOffset").value_or(both);
    request.stderr_offset = query_number(ex, "stderrOffset").value_or(both);
    if (auto it = ex.query().find("stream"); it != ex.query().end()) {
        if (it->second != "stdout" && it->second != "stderr")
            throw ApiFailure(
                bad_request("bad_query", "query parameter `stream` must be stdout or stderr"));
        request.want_stdout = it->second == "stdout";
        request.want_stderr = it->second == "stderr";
    }
    co_await stream_process(ex, sessions_, waits_, request);
}

asio::awaitable<void> Api::write_stdin(Exchange& ex, const RouteParams& params, const Caller&) {
    std::string data = co_await ex.read_body(kStdinBodyLimit);
    const bool eof = query_flag(ex, "eof");
    const size_t size = data.size();
    auto event = std::make_shared<AsyncEvent<Status>>(co_await asio::this_coro::executor, waits_);
    sessions_.write_stdin(params.at("sid"), params.at("proc"), std::move(data), eof,
                          [weak = std::weak_ptr(event)](Status status) {
                              if (auto e = weak.lock()) e->set(std::move(status));
                          });
    auto status = co_await event->wait();
    if (!status) throw ApiFailure(shutting_down_while(params.at("proc")));
    check(*status);
    nlohmann::json reply = {{"written", size}, {"eof", eof}};
    co_await ex.send_json(200, reply);
}

asio::awaitable<void> Api::wait_process(Exchange& ex, const RouteParams& params, const Caller&) {
    std::optional<Millis> timeout;
    if (auto ms = query_millis(ex, "timeoutMs")) timeout = *ms;
    auto outcome = co_await await_process(params.at("sid"), params.at("proc"), timeout);
    if (!outcome) throw ApiFailure(shutting_down_while(params.at("proc")));
    nlohmann::json out = process_json(take(std::move(outcome->first)));
    out["finished"] = outcome->second;
    co_await ex.send_json(200, out);
}

}  // namespace corral::daemon
