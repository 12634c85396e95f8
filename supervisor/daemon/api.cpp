#include "supervisor/daemon/api.hpp"

#include <charconv>
#include <chrono>

namespace corral::daemon {

const std::vector<Api::Route>& Api::routes() {
    using A = Access;
    static const std::vector<Route> table = {
        {"GET", "/v1/health", A::daemon_info, &Api::health},
        {"GET", "/v1/policies", A::daemon_info, &Api::list_policies},
        {"POST", "/v1/policies/validate", A::daemon_info, &Api::validate_policy},
        {"POST", "/v1/sessions", A::daemon_admin, &Api::create_session},
        {"GET", "/v1/sessions", A::session_list, &Api::list_sessions},
        {"GET", "/v1/sessions/{sid}", A::session_use, &Api::get_session},
        {"DELETE", "/v1/sessions/{sid}", A::session_admin, &Api::end_session},
        {"PATCH", "/v1/sessions/{sid}/env", A::session_admin, &Api::patch_env},
        {"PATCH", "/v1/sessions/{sid}/network", A::session_admin, &Api::patch_network},
        {"POST", "/v1/sessions/{sid}/run", A::session_use, &Api::run},
        {"POST", "/v1/sessions/{sid}/exec", A::session_use, &Api::exec},
        {"POST", "/v1/sessions/{sid}/shells", A::session_use, &Api::create_shell},
        {"GET", "/v1/sessions/{sid}/shells", A::session_use, &Api::list_shells},
        {"GET", "/v1/sessions/{sid}/shells/{shell}", A::session_use, &Api::get_shell},
        {"DELETE", "/v1/sessions/{sid}/shells/{shell}", A::session_use, &Api::delete_shell},
        {"POST", "/v1/sessions/{sid}/processes", A::session_use, &Api::spawn},
        {"GET", "/v1/sessions/{sid}/processes", A::session_use, &Api::list_processes},
        {"DELETE", "/v1/sessions/{sid}/processes", A::session_use, &Api::kill_all_processes},
        {"GET", "/v1/sessions/{sid}/processes/{proc}", A::session_use, &Api::get_process},
        {"POST", "/v1/sessions/{sid}/processes/{proc}/signal", A::session_use,
         &Api::signal_process},
        {"DELETE", "/v1/sessions/{sid}/processes/{proc}", A::session_use, &Api::kill_process},
        {"GET", "/v1/sessions/{sid}/processes/{proc}/logs", A::session_use, &Api::logs},
        {"GET", "/v1/sessions/{sid}/processes/{proc}/stream", A::session_use, &Api::stream},
        {"POST", "/v1/sessions/{sid}/processes/{proc}/stdin", A::session_use, &Api::write_stdin},
        {"GET", "/v1/sessions/{sid}/processes/{proc}/wait", A::session_use, &Api::wait_process},
        {"POST", "/v1/sessions/{sid}/terminals", A::session_use, &Api::create_terminal},
        {"GET", "/v1/sessions/{sid}/terminals/{proc}/ws", A::session_use, &Api::terminal_socket},
        {"POST", "/v1/sessions/{sid}/contexts", A::session_use, &Api::create_context},
        {"GET", "/v1/sessions/{sid}/contexts", A::session_use, &Api::list_contexts},
        {"GET", "/v1/sessions/{sid}/contexts/{ctx}", A::session_use, &Api::get_context},
        {"DELETE", "/v1/sessions/{sid}/contexts/{ctx}", A::session_use, &Api::delete_context},
        {"POST", "/v1/sessions/{sid}/contexts/{ctx}/run", A::session_use, &Api::run_code},
        {"GET", "/v1/sessions/{sid}/files", A::session_use, &Api::get_file},
        {"PUT", "/v1/sessions/{sid}/files", A::session_use, &Api::put_file},
        {"DELETE", "/v1/sessions/{sid}/files", A::session_use, &Api::delete_file},
        {"POST", "/v1/sessions/{sid}/files/mkdir", A::session_use, &Api::make_directory},
        {"POST", "/v1/sessions/{sid}/files/move", A::session_use, &Api::move_file},
        {"GET", "/v1/sessions/{sid}/files/list", A::session_use, &Api::list_directory},
        {"GET", "/v1/sessions/{sid}/files/stat", A::session_use, &Api::stat_file},
        {"GET", "/v1/sessions/{sid}/files/watch", A::session_use, &Api::watch_files},
        {"POST", "/v1/sessions/{sid}/git/checkout", A::session_use, &Api::git_checkout},
        {"POST", "/v1/sessions/{sid}/ports", A::session_admin, &Api::lease_port},
        // Ports are the full token's alone: the AI SDK's restricted view has no port methods.
        {"GET", "/v1/sessions/{sid}/ports", A::session_admin, &Api::list_ports},
        {"DELETE", "/v1/sessions/{sid}/ports/{port}", A::session_admin, &Api::release_port},
        {"GET", "/v1/sessions/{sid}/ports/{port}/endpoint", A::session_admin, &Api::port_endpoint},
        {"GET", "/v1/sessions/{sid}/ports/{port}/wait", A::session_admin, &Api::wait_port},
        // Daemon-wide counts: not for session tokens (they would see other sessions' activity).
        {"GET", "/metrics", A::daemon_admin, &Api::metrics},
    };
    return table;
}

Api::Api(SessionManager& sessions, WaitRegistry& waits, ApiOptions options)
    : sessions_(sessions), waits_(waits), options_(std::move(options)) {
    const auto& table = routes();
    for (size_t i = 0; i < table.size(); ++i)
        router_.add(table[i].method, table[i].pattern, static_cast<int>(i));
}

asio::awaitable<void> Api::handle(Exchange& ex) {
    if (waits_.stopping()) {
        ex.close_after();
        const ApiError stopping{503, "shutting_down", "corrald is shutting down", nullptr};
        co_await ex.send_error(stopping);
        co_return;
    }
    const RouteMatch match = router_.match(ex.method(), ex.path());
    if (match.kind == RouteMatch::Kind::not_found) {
        const ApiError unknown = no_such_route(ex.method(), ex.path());
        co_await ex.send_error(unknown);
        co_return;
    }
    if (match.kind == RouteMatch::Kind::method_not_allowed) {
        std::string allow;
        for (const auto& m : match.allowed) allow += (allow.empty() ? "" : ", ") + m;
        const ApiError wrong_method = method_not_allowed(ex.method(), ex.path());
        co_await ex.send_error(wrong_method, allow);
        co_return;
    }
    const Route& route = routes()[static_cast<size_t>(match.route_id)];
    sessions_.note_client_request();
    const auto started = std::chrono::steady_clock::now();
    // Recorded however the exchange ends (a failed connection throws out of dispatch).
    struct Timer {
        RequestMetrics& metrics;
        const Route& route;
        std::chrono::steady_clock::time_point started;
        ~Timer() {
            const std::chrono::duration<double> took = std::chrono::steady_clock::now() - started;
            metrics.observe(route.method, route.pattern, took.count());
        }
    } timer{request_metrics_, route, started};
    co_await dispatch(ex, route, match.params);
}

asio::awaitable<void> Api::dispatch(Exchange& ex, const Route& route, const RouteParams& params) {
    std::optional<ApiError> failure;
    try {
        auto caller =
            authenticate(ex.listener(), ex.header("Authorization"),
                         [this](std::string_view token) { return sessions_.check_token(token); });
        if (!caller) throw ApiFailure(unauthorized(caller.error().message));
        auto it = params.find("sid");
        const std::string sid = it == params.end() ? "" : it->second;
        if (auto refused = authorize(*caller, route.access, sid)) throw ApiFailure(*refused);
        if (!sid.empty() && !sessions_.knows_session(sid))
            throw ApiFailure(no_such_session(sid, sessions_.is_starting(sid)));
        co_await (this->*route.handler)(ex, params, *caller);
    } catch (const ApiFailure& f) {
        failure = f.error;
    } catch (const beast::system_error&) {
        throw;  // the connection failed: nothing more can be said on it
    } catch (const std::exception& e) {
        failure = ApiError{500, "internal", e.what(), nullptr};
    }
    if (!failure) co_return;
    if (ex.response_started()) {
        // Too late for a JSON error: the status line is gone. Closing tells the client the
        // response is incomplete.
        ex.close_after();
        co_return;
    }
    co_await ex.send_error(*failure);
}

asio::awaitable<std::optional<std::pair<Result<ProcessInfo>, bool>>> Api::await_process(
    const std::string& sid, const std::string& proc, std::optional<Millis> timeout) {
    using Outcome = std::pair<Result<ProcessInfo>, bool>;
    auto event = std::make_shared<AsyncEvent<Outcome>>(co_await asio::this_coro::executor, waits_);
    WaitHandle handle = sessions_.async_wait_process(
        sid, proc, timeout, [weak = std::weak_ptr(event)](Result<ProcessInfo> info, bool done) {
            if (auto e = weak.lock()) e->set(Outcome{std::move(info), done});
        });
    co_return co_await event->wait();
}

const std::string& required_query(const Exchange& ex, const char* name) {
    auto it = ex.query().find(name);
    if (it == ex.query().end())
        throw ApiFailure(bad_request("missing_query",
                                     std::string("query parameter `") + name + "` is required"));
    return it->second;
}

bool query_flag(const Exchange& ex, const char* name) {
    auto it = ex.query().find(name);
    if (it == ex.query().end() || it->second == "false" || it->second == "0") return false;
    if (it->second.empty() || it->second == "true" || it->second == "1") return true;
    throw ApiFailure(bad_request(
        "bad_query", std::string("query parameter `") + name + "` must be true or false"));
}

std::optional<uint64_t> query_number(const Exchange& ex, const char* name) {
    auto it = ex.query().find(name);
    if (it == ex.query().end()) return std::nullopt;
    uint64_t value = 0;
    const auto& text = it->second;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size())
        throw ApiFailure(bad_request("bad_query", std::string("query parameter `") + name +
                                                      "` must be a non-negative integer"));
    return value;
}

std::optional<Millis> query_millis(const Exchange& ex, const char* name) {
    auto value = query_number(ex, name);
    if (!value) return std::nullopt;
    return checked_millis(*value, std::string("query parameter ") + name);
}

void check(const Status& status) {
    if (!status) throw ApiFailure(api_error(status.error()));
}

}  // namespace corral::daemon
