// Session endpoints: create, list, get, end, PATCH env.

#include "policies/policy_parser.hpp"
#include "supervisor/daemon/api.hpp"
#include "supervisor/daemon/api_json.hpp"
#include "supervisor/daemon/disconnect_watch.hpp"

namespace corral::daemon {

asio::awaitable<void> Api::create_session(Exchange& ex, const RouteParams&, const Caller& caller) {
    const std::string body = co_await ex.read_body(kJsonBodyLimit);
    CreateSessionRequest request = parse_create_session(body);
    // A host directory is the daemon's to give: only a caller with its full rights may ask
    // (the route already refuses session tokens; this says why, should that ever change).
    if (!request.workdir.empty() && !caller.daemon_rights)
        throw ApiFailure(
            forbidden("`workdir` needs the daemon's full rights (the Unix socket, "
                      "without a token)"));
    request.resolved_policy = co_await resolve_session_policy(request);
    // The holder's setup is awaited on the loop, never blocking it (issue 12 item 1): other
    // requests are served meanwhile, and this one answers once the session is ready or gone.
    auto event = std::make_shared<AsyncEvent<Result<CreatedSession>>>(
        co_await asio::this_coro::executor, waits_);
    sessions_.async_create_session(request,
                                   [weak = std::weak_ptr(event)](Result<CreatedSession> created) {
                                       if (auto e = weak.lock()) e->set(std::move(created));
                                   });
    // A client that leaves before the answer never gets the session's tokens: nobody could use
    // or end it, and it would hold its resources until its timeouts. The creation is let finish
    // (cutting the holder's setup short would gain nothing), then the session is ended.
    auto gone = std::make_shared<bool>(false);
    std::optional<DisconnectWatch> watch;
    watch.emplace(ex.socket(), [gone] { *gone = true; });
    auto outcome = co_await event->wait();
    watch.reset();
    if (!outcome)
        throw ApiFailure({503, "shutting_down",
                          "corrald is shutting down; the session was not created", nullptr});
    const CreatedSession created = take(std::move(*outcome));
    auto end_unclaimed = [this, sid = created.info.id] {
        sessions_.end_session(sid, [](Result<EndSessionReport>) {}, "client-gone");
    };
    if (*gone) {
        end_unclaimed();
        co_return;
    }
    nlohmann::json out = session_json(created.info);
    out["token"] = created.full_token;
    out["restrictedToken"] = created.restricted_token;
    try {
        co_await ex.send_json(201, out);
    } catch (...) {
        end_unclaimed();  // the answer did not reach the client
        throw;
    }
    sessions_.creation_answered(created.info.id);
}

asio::awaitable<void> Api::list_sessions(Exchange& ex, const RouteParams&, const Caller& caller) {
    // A session token sees only its own session (and no other's record is built for it).
    auto infos = std::make_shared<std::vector<SessionInfo>>(sessions_.list_sessions(
        caller.grant ? std::optional<std::string>(caller.grant->session_id) : std::nullopt));
    const bool restricted = caller.grant && caller.grant->rights == TokenRights::restricted;
    // Each summary is made into JSON only when its turn to be written comes (issue 12 item 3).
    std::vector<PieceSource> sources;
    sources.push_back(json_array_source(infos->size(), [infos, restricted](size_t i) {
        nlohmann::json summary = session_summary_json((*infos)[i]);
        if (restricted) summary.erase("ports");
        return summary;
    }));
    const nlohmann::json reply = {{"sessions", streamed(0)}};
    co_await ex.send_json(200, reply, std::move(sources));
}

asio::awaitable<void> Api::get_session(Exchange& ex, const RouteParams& params,
                                       const Caller& caller) {
    auto info = std::make_shared<SessionInfo>(take(sessions_.get_session(params.at("sid"))));
    // The process records are held as records and made into JSON one at a time as they are
    // written (issue 12 item 3); the rest of the record is small.
    nlohmann::json reply = session_json(*info);
    reply["processes"] = streamed(0);
    // A restricted token learns nothing about ports, not even from the session record.
    if (caller.grant && caller.grant->rights == TokenRights::restricted) reply.erase("ports");
    std::vector<PieceSource> sources;
    sources.push_back(json_array_source(
        info->processes.size(), [info](size_t i) { return process_json(info->processes[i]); }));
    co_await ex.send_json(200, reply, std::move(sources));
}

asio::awaitable<void> Api::end_session(Exchange& ex, const RouteParams& params, const Caller&) {
    const std::string& sid = params.at("sid");
    auto event = std::make_shared<AsyncEvent<Result<EndSessionReport>>>(
        co_await asio::this_coro::executor, waits_);
    sessions_.end_session(sid, [weak = std::weak_ptr(event)](Result<EndSessionReport> report) {
        if (auto e = weak.lock()) e->set(std::move(report));
    });
    auto report = co_await event->wait();
    if (!report)
        throw ApiFailure({503, "shutting_down",
                          "corrald is shutting down; it ends session `" + sid + "` itself",
                          nullptr});
    const nlohmann::json reply = end_report_json(take(std::move(*report)));
    co_await ex.send_json(200, reply);
}

asio::awaitable<void> Api::patch_env(Exchange& ex, const RouteParams& params, const Caller&) {
    const std::string body = co_await ex.read_body(kJsonBodyLimit);
    const EnvPatch patch = parse_env_patch(body);
    auto env = take(sessions_.patch_env(params.at("sid"), patch));
    nlohmann::json reply = {{"env", env}};
    co_await ex.send_json(200, reply);
}

}  // namespace corral::daemon
