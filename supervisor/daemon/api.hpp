#pragma once
// The HTTP API of corrald (DESIGN.md "API"): the route table, authentication and authorization
// of each request, and one handler per endpoint mapping it onto the SessionManager. Handlers live
// in api_system.cpp (health, policies), api_sessions.cpp, api_processes.cpp, api_shells.cpp,
// api_files.cpp and api_ports.cpp.
//
// Coroutine rule for this directory: never pass a class-type temporary into a co_await
// expression (`co_await send(Json{...})`); name it first. GCC 12 miscompiles such temporaries
// (initializer lists fail to compile; aggregates were destroyed twice, crashing corrald after
// an exec stream).

#include <string>

#include "isolation/host_probe.hpp"
#include "sessions/files/inotify_budget.hpp"
#include "sessions/session_manager.hpp"
#include "supervisor/daemon/async_event.hpp"
#include "supervisor/daemon/auth.hpp"
#include "supervisor/daemon/exchange.hpp"
#include "supervisor/daemon/json_fields.hpp"
#include "supervisor/daemon/metrics.hpp"
#include "supervisor/daemon/off_loop.hpp"
#include "supervisor/daemon/router.hpp"

namespace corral::daemon {

/// Daemon facts the API reports (health) or needs (policy dir).
struct ApiOptions {
    std::string policy_dir;  ///< extra named policies (*.yaml); "" = none
    std::string instance;    ///< cgroup instance name
    HostProbe host;          ///< probed once at start-up (forks), served by /v1/health
};

/// Serves requests against one SessionManager. Event-loop thread only.
class Api {
  public:
    Api(SessionManager& sessions, WaitRegistry& waits, ApiOptions options);

    /// Handles one request: routes, authenticates, authorizes, runs the handler and writes the
    /// response (a JSON error for any failure before the response started).
    asio::awaitable<void> handle(Exchange& exchange);

  private:
    using Handler = asio::awaitable<void> (Api::*)(Exchange&, const RouteParams&, const Caller&);
    struct Route {
        const char* method;
        const char* pattern;
        Access access;
        Handler handler;
    };
    static const std::vector<Route>& routes();
    asio::awaitable<void> dispatch(Exchange& ex, const Route& route, const RouteParams& params);

    // api_system.cpp
    asio::awaitable<void> health(Exchange&, const RouteParams&, const Caller&);
    asio::awaitable<void> list_policies(Exchange&, const RouteParams&, const Caller&);
    asio::awaitable<void> validate_policy(Exchange&, const RouteParams&, const Caller&);
    // api_sessions.cpp
    asio::awaitable<void> create_session(Exchange&, const RouteParams&, const Caller&);
    asio::awaitable<void> list_sessions(Exchange&, const RouteParams&, const Caller&);
    asio::awaitable<void> get_session(Exchange&, const RouteParams&, const Caller&);
    asio::awaitable<void> end_session(Exchange&, const RouteParams&, const Caller&);
    asio::awaitable<void> patch_env(Exchange&, const RouteParams&, const Caller&);
    // api_network.cpp
    asio::awaitable<void> patch_network(Exchange&, const RouteParams&, const Caller&);
    // api_processes.cpp
    asio::awaitable<void> run(Exchange&, const RouteParams&, const Caller&);
    asio::awaitable<void> exec(Exchange&, const RouteParams&, const Caller&);
    asio::awaitable<void> spawn(Exchange&, const RouteParams&, const Caller&);
    asio::awaitable<void> kill_all_processes(Exchange&, const RouteParams&, const Caller&);
    asio::awaitable<void> list_processes(Exchange&, const RouteParams&, const Caller&);
    asio::awaitable<void> get_process(Exchange&, const RouteParams&, const Caller&);
    asio::awaitable<void> signal_process(Exchange&, const RouteParams&, const Caller&);
    asio::awaitable<void> kill_process(Exchange&, const RouteParams&, const Caller&);
    asio::awaitable<void> logs(Exchange&, const RouteParams&, const Caller&);
    asio::awaitable<void> stream(Exchange&, const RouteParams&, const Caller&);
    asio::awaitable<void> write_stdin(Exchange&, const RouteParams&, const Caller&);
    asio::awaitable<void> wait_process(Exchange&, const RouteParams&, const Caller&);
    // api_shells.cpp
    asio::awaitable<void> create_shell(Exchange&, const RouteParams&, const Caller&);
    asio::awaitable<void> list_shells(Exchange&, const RouteParams&, const Caller&);
    asio::awaitable<void> get_shell(Exchange&, const RouteParams&, const Caller&);
    asio::awaitable<void> delete_shell(Exchange&, const RouteParams&, const Caller&);
    /// Starts a run/exec command — in its shell context's turn when it names one — and returns
    /// its record (and with `follow_output` the hold on every byte of its output: exec's
    /// stream); nullopt when the client went away (or corrald stopped) before it started.
    asio::awaitable<std::optional<SessionManager::StartedProcess>> start_command(
        Exchange& ex, const std::string& sid, const ProcessRequest& request,
        bool follow_output = false);

    // api_terminals.cpp
    asio::awaitable<void> create_terminal(Exchange&, const RouteParams&, const Caller&);
    asio::awaitable<void> terminal_socket(Exchange&, const RouteParams&, const Caller&);
    // api_contexts.cpp
    asio::awaitable<void> create_context(Exchange&, const RouteParams&, const Caller&);
    asio::awaitable<void> list_contexts(Exchange&, const RouteParams&, const Caller&);
    asio::awaitable<void> get_context(Exchange&, const RouteParams&, const Caller&);
    asio::awaitable<void> delete_context(Exchange&, const RouteParams&, const Caller&);
    asio::awaitable<void> run_code(Exchange&, const RouteParams&, const Caller&);
    // api_files.cpp
    asio::awaitable<void> get_file(Exchange&, const RouteParams&, const Caller&);
    asio::awaitable<void> put_file(Exchange&, const RouteParams&, const Caller&);
    asio::awaitable<void> delete_file(Exchange&, const RouteParams&, const Caller&);
    asio::awaitable<void> make_directory(Exchange&, const RouteParams&, const Caller&);
    asio::awaitable<void> move_file(Exchange&, const RouteParams&, const Caller&);
    asio::awaitable<void> list_directory(Exchange&, const RouteParams&, const Caller&);
    asio::awaitable<void> stat_file(Exchange&, const RouteParams&, const Caller&);
    // api_file_watch.cpp
    asio::awaitable<void> watch_files(Exchange&, const RouteParams&, const Caller&);
    // api_git.cpp
    asio::awaitable<void> git_checkout(Exchange&, const RouteParams&, const Caller&);
    // api_ports.cpp
    asio::awaitable<void> lease_port(Exchange&, const RouteParams&, const Caller&);
    asio::awaitable<void> list_ports(Exchange&, const RouteParams&, const Caller&);
    asio::awaitable<void> wait_port(Exchange&, const RouteParams&, const Caller&);
    asio::awaitable<void> release_port(Exchange&, const RouteParams&, const Caller&);
    asio::awaitable<void> port_endpoint(Exchange&, const RouteParams&, const Caller&);
    // api_metrics.cpp
    asio::awaitable<void> metrics(Exchange&, const RouteParams&, const Caller&);
    std::string render_metrics();

    /// Waits for a process record to become final; nullopt when shutdown interrupted the wait.
    asio::awaitable<std::optional<std::pair<Result<ProcessInfo>, bool>>> await_process(
        const std::string& sid, const std::string& proc, std::optional<Millis> timeout);

    /// Resolves a session's policy (inline or by name) on a worker thread.
    asio::awaitable<Policy> resolve_session_policy(const CreateSessionRequest& request);

    SessionManager& sessions_;
    WaitRegistry& waits_;
    ApiOptions options_;
    Router router_;
    RequestMetrics request_metrics_;
    OffLoop off_loop_{waits_};  ///< policy parsing and policy-dir reads, off the event loop
    /// File watches' share of the host's inotify limits (GET .../files/watch).
    InotifyBudget watch_budget_{InotifyBudget::from_host()};
};

/// Limits of request bodies read whole (JSON, stdin writes, policy YAML).
inline constexpr size_t kJsonBodyLimit = 8u << 20;
inline constexpr size_t kStdinBodyLimit = 16u << 20;

/// Throws a 400 unless the query has `name`; returns its value.
const std::string& required_query(const Exchange& ex, const char* name);
/// A boolean query parameter: absent/"false"/"0" -> false, "true"/"1"/"" -> true, else 400.
bool query_flag(const Exchange& ex, const char* name);
/// An unsigned integer query parameter (nullopt when absent); 400 naming it when malformed.
std::optional<uint64_t> query_number(const Exchange& ex, const char* name);
/// A duration query parameter in ms (timeoutMs); 400 naming it when malformed or over kMaxMillis.
std::optional<Millis> query_millis(const Exchange& ex, const char* name);
/// Unwraps a manager Result or throws its mapped ApiError.
template <class T>
T take(Result<T> result) {
    if (!result) throw ApiFailure(api_error(result.error()));
    return std::move(result).value();
}
/// Throws the mapped ApiError of a failed Status.
void check(const Status& status);

}  // namespace corral::daemon
