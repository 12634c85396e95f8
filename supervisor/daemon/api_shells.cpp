// Shell-context endpoints (create, list, get, delete) and the start of a run/exec command, which
// waits for its turn when it names a shell context.

#include "supervisor/daemon/api.hpp"
#include "supervisor/daemon/api_json.hpp"
#include "supervisor/daemon/disconnect_watch.hpp"

namespace corral::daemon {

asio::awaitable<void> Api::create_shell(Exchange& ex, const RouteParams& params, const Caller&) {
    const std::string body = co_await ex.read_body(kJsonBodyLimit);
    const ShellRequest request = parse_shell_request(body);
    auto created = sessions_.create_shell(params.at("sid"), request);
    if (!created && created.error().code == ENOTSUP)
        throw ApiFailure({409, "no_bash", created.error().describe(), nullptr});
    const nlohmann::json reply = shell_json(take(std::move(created)));
    co_await ex.send_json(201, reply);
}

asio::awaitable<void> Api::list_shells(Exchange& ex, const RouteParams& params, const Caller&) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& info : take(sessions_.list_shells(params.at("sid"))))
        list.push_back(shell_json(info));
    nlohmann::json reply = {{"shells", std::move(list)}};
    co_await ex.send_json(200, reply);
}

asio::awaitable<void> Api::get_shell(Exchange& ex, const RouteParams& params, const Caller&) {
    const nlohmann::json reply =
        shell_json(take(sessions_.get_shell(params.at("sid"), params.at("shell"))));
    co_await ex.send_json(200, reply);
}

asio::awaitable<void> Api::delete_shell(Exchange& ex, const RouteParams& params, const Caller&) {
    check(sessions_.delete_shell(params.at("sid"), params.at("shell")));
    nlohmann::json reply = {{"id", params.at("shell")}, {"deleted", true}};
    co_await ex.send_json(200, reply);
}

asio::awaitable<std::optional<SessionManager::StartedProcess>> Api::start_command(
    Exchange& ex, const std::string& sid, const ProcessRequest& request, bool follow_output) {
    // Without a shell context the command starts now, in this turn of the loop; with one, once
    // the commands queued before it are done. Either way the answer waits, on the loop, until
    // the child has exec'd or its setup failed (a failure names its step).
    // The outcome is kept apart from the wake-up, so a command that starts in the same turn as
    // the client goes away is still known (and stopped) rather than left running unseen.
    auto outcome = std::make_shared<std::optional<Result<SessionManager::StartedProcess>>>();
    auto event = std::make_shared<AsyncEvent<bool>>(co_await asio::this_coro::executor, waits_);
    WaitHandle handle = sessions_.async_start_process(
        sid, request,
        [outcome, weak = std::weak_ptr(event)](Result<SessionManager::StartedProcess> started) {
            outcome->emplace(std::move(started));
            if (auto e = weak.lock()) e->set(true);
        },
        follow_output);
    bool gone = false;
    std::optional<DisconnectWatch> watch;
    if (!request.shell.empty() && !request.detach_on_disconnect) {
        watch.emplace(ex.socket(), [&gone, weak = std::weak_ptr(event)] {
            gone = true;
            if (auto e = weak.lock()) e->interrupt();
        });
    }
    (void)co_await event->wait();
    watch.reset();
    handle.reset();  // a command still queued leaves the queue
    if (!*outcome) {
        if (gone) co_return std::nullopt;
        throw ApiFailure({503, "shutting_down",
                          "corrald is shutting down; the command had not started", nullptr});
    }
    SessionManager::StartedProcess started = take(std::move(**outcome));
    if (gone) {
        (void)sessions_.stop_process(sid, started.info.id, false);
        co_return std::nullopt;
    }
    co_return started;
}

}  // namespace corral::daemon
