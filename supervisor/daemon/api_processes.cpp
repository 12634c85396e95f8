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
/// What a `run` result carries of one stream: all of it under the policy's output cap; past it,
/// the first and the last part with a marker between them, so both the head of a long log and
/// the error at its end survive (issue 13.9). The cut points move to character boundaries so a
/// UTF-8 log stays text. Puts placeholders for the text (and the exact bytes when it is not
/// plain text) whose sources write them while the client reads, from one copy of the excerpt
/// (issue 12 item 3: not the text, its base64, the JSON tree and its dump besides). Returns the
/// bytes omitted (0 when none).
uint64_t put_run_output(nlohmann::json& out, std::vector<PieceSource>& sources,
                        SessionManager& sessions, const std::string& sid, const std::string& proc,
                        OutputStream stream, const std::string& key) {
    OutputBuffer::Excerpt excerpt = take(sessions.output_excerpt(sid, proc, stream));
    uint64_t omitted = excerpt.omitted;
    if (omitted > 0) {
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
        excerpt.tail = std::string();
    }
    auto bytes = std::make_shared<const std::string>(std::move(excerpt.head));
    if (send_as_text(*bytes)) {
        out[key] = streamed(sources.size());
        sources.push_back(json_text_source(bytes_of(bytes)));
    } else {
        out[key] = streamed(sources.size());
        sources.push_back(json_replaced_text_source(bytes_of(bytes)));
        out[key + "Base64"] = streamed(sources.size());
        sources.push_back(json_base64_source(bytes_of(bytes)));
    }
    return omitted;
}

/// `Accept: application/vnd.corral.stream` asks for binary frames (output_stream.hpp).
bool wants_binary_stream(Exchange& ex) {
    return ex.header("Accept").find(kBinaryStreamType) != std::string::npos;
}

/// A GET .../logs answer's bytes, read from the process's buffer a piece at a time. The range
/// [start, end) is fixed when the request comes; a byte at an offset never changes, but the ring
/// may drop it (a process still writing more than its cap while the client reads slowly) and the
/// record may go: the answer then ends where the bytes did, and nextOffset says so, as a read
/// with a smaller limit would have.
struct LogRead {
    LogRead(SessionManager& sessions, std::string sid, std::string proc, OutputStream stream,
            uint64_t start, uint64_t limit)
        : sessions(sessions),
          sid(std::move(sid)),
          proc(std::move(proc)),
          stream(stream),
          at(start),
          end(start + limit) {}

    /// Reads the range once, a piece at a time, for put_bytes' choice; fixes `end` at what
    /// the buffer holds now.
    void decide_text() {
        TextCheck check;
        for (uint64_t pos = at; pos < end;) {
            auto chunk = read(pos);
            if (!chunk || chunk->data.empty() || chunk->offset != pos) {
                end = pos;  // the buffer holds no more yet
                break;
            }
            check.feed(chunk->data);
            pos += chunk->data.size();
        }
        as_text = check.as_text();
        if (at == end) {
            auto here = read(at);
            eof = here && here->eof;
        }
    }

    /// The next piece; false once the range is done or its bytes are gone.
    bool next(std::string& piece) {
        if (at >= end) return false;
        auto chunk = read(at);
        if (!chunk || chunk->data.empty() || chunk->offset != at) {
            end = at;  // dropped or gone meanwhile: the answer ends here
            eof = false;
            return false;
        }
        size_t take = chunk->data.size();
        // Text stops only between characters (the whole range is valid UTF-8, so each piece's
        // complete prefix is, and the next piece starts at a character).
        if (as_text && at + take < end) take = utf8_complete_prefix(chunk->data);
        piece.append(chunk->data, 0, take);
        at += take;
        eof = chunk->eof && at == chunk->next_offset;
        return at < end;
    }

    std::optional<OutputChunk> read(uint64_t pos) {
        auto chunk = sessions.read_output(sid, proc, stream, pos,
                                          std::min<uint64_t>(end - pos, kResponsePiece / 2));
        if (!chunk) return std::nullopt;
        return std::move(*chunk);
    }

    SessionManager& sessions;
    const std::string sid;
    const std::string proc;
    const OutputStream stream;
    uint64_t at;
    uint64_t end;
    bool as_text = true;
    bool eof = false;
};

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
    const std::string& proc = started->info.id;
    std::optional<DisconnectWatch> watch;
    if (!request.detach_on_disconnect) {
        watch.emplace(ex.socket(),
                      [this, sid, proc] { (void)sessions_.stop_process(sid, proc, false); });
    }
    auto outcome = co_await await_process(sid, proc, std::nullopt);
    watch.reset();
    if (!outcome) throw ApiFailure(shutting_down_while(proc));
    const ProcessInfo info = take(std::move(outcome->first));
    nlohmann::json out = process_json(info);
    std::vector<PieceSource> sources;
    const uint64_t out_omitted =
        put_run_output(out, sources, sessions_, sid, info.id, OutputStream::out, "stdout");
    const uint64_t err_omitted =
        put_run_output(out, sources, sessions_, sid, info.id, OutputStream::err, "stderr");
    out["omittedBytes"] = {{"stdout", out_omitted}, {"stderr", err_omitted}};
    co_await ex.send_json(200, out, std::move(sources));
}

asio::awaitable<void> Api::exec(Exchange& ex, const RouteParams& params, const Caller&) {
    const std::string& sid = params.at("sid");
    const std::string body = co_await ex.read_body(kJsonBodyLimit);
    const ProcessRequest request = parse_process_request(body);
    // The stream must see every byte from offset 0: the start holds them for it (its first
    // reads come before this coroutine resumes).
    auto started = co_await start_command(ex, sid, request, /*follow_output=*/true);
    if (!started) co_return;
    const std::string proc = started->info.id;
    StreamRequest stream{sid, proc};
    stream.binary = wants_binary_stream(ex);
    stream.follower = std::move(started->follower);
    std::optional<DisconnectWatch> watch;
    if (!request.detach_on_disconnect) {
        // A quiet command writes nothing that could fail: watch the socket as well.
        watch.emplace(ex.socket(),
                      [this, sid, proc] { (void)sessions_.stop_process(sid, proc, false); });
    }
    try {
        co_await stream_process(ex, sessions_, waits_, stream);
    } catch (...) {
        // The stream broke (the client went away mid-write).
        if (!request.detach_on_disconnect) (void)sessions_.stop_process(sid, proc, false);
        throw;
    }
}

asio::awaitable<void> Api::spawn(Exchange& ex, const RouteParams& params, const Caller&) {
    const std::string body = co_await ex.read_body(kJsonBodyLimit);
    ProcessRequest request = parse_process_request(body);
    if (!request.shell.empty())
        throw ApiFailure(bad_request("invalid",
                                     "`shell` is for run and exec; a background "
                                     "process does not take a shell context's turn"));
    request.background = true;  // only its own timeoutMs applies
    const auto started = co_await start_command(ex, params.at("sid"), request);
    if (!started) co_return;  // not for a spawn: only a queued shell command sees its client go
    auto record = sessions_.get_process(params.at("sid"), started->info.id);  // with its usage
    const nlohmann::json reply = process_json(record ? *record : started->info);
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
    // Each record is made into JSON only when its turn to be written comes (issue 12 item 3).
    auto infos = std::make_shared<const std::vector<ProcessInfo>>(
        take(sessions_.list_processes(params.at("sid"))));
    nlohmann::json reply = {{"processes", streamed(0)}};
    std::vector<PieceSource> sources;
    sources.push_back(
        json_array_source(infos->size(), [infos](size_t i) { return process_json((*infos)[i]); }));
    co_await ex.send_json(200, reply, std::move(sources));
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
    const OutputStream stream = which == "stdout" ? OutputStream::out : OutputStream::err;
    // Where the answer starts and ends is fixed now; its bytes are read from the buffer a piece
    // at a time while the client takes them, never held whole (issue 12 item 3). The first read
    // says where the retained bytes start; a pass over the range decides text or base64 as
    // put_bytes does for the whole.
    const OutputChunk first =
        take(sessions_.read_output(params.at("sid"), params.at("proc"), stream, offset, 0));
    auto reading = std::make_shared<LogRead>(sessions_, params.at("sid"), params.at("proc"), stream,
                                             first.offset, limit);
    reading->decide_text();
    nlohmann::json out = {{reading->as_text ? "data" : "dataBase64", streamed(0)},
                          {"eof", streamed(1)},
                          {"nextOffset", streamed(2)},
                          {"offset", first.offset},
                          {"skipped", first.skipped},
                          {"stream", which}};
    std::vector<PieceSource> sources;
    ByteSource bytes = [reading](std::string& piece) { return reading->next(piece); };
    sources.push_back(reading->as_text ? json_text_source(std::move(bytes))
                                       : json_base64_source(std::move(bytes)));
    // After the data, so they say how far it really went.
    sources.push_back([reading](std::string& piece) {
        piece += reading->eof ? "true" : "false";
        return false;
    });
    sources.push_back([reading](std::string& piece) {
        piece += std::to_string(reading->at);
        return false;
    });
    co_await ex.send_json(200, out, std::move(sources));
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
