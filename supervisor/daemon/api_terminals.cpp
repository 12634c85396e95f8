// Terminal endpoints (issue 14): POST /terminals starts a session process on a new pty, GET
// .../terminals/{proc}/ws attaches a WebSocket to it (terminal_socket.hpp). A terminal is an
// ordinary session process otherwise: listed, signalled, killed, timed out, ended with its session.

#include <boost/beast/websocket.hpp>

#include "supervisor/daemon/api.hpp"
#include "supervisor/daemon/api_json.hpp"
#include "supervisor/daemon/terminal_socket.hpp"

namespace corral::daemon {
namespace {

/// The session's login shell: bash where the sandbox has it, else sh (what the sandbox sees, so
/// it is decided inside it).
const std::vector<std::string>& login_shell() {
    static const std::vector<std::string> argv = {
        "/bin/sh", "-c", "command -v bash >/dev/null 2>&1 && exec bash -l; exec sh -l"};
    return argv;
}

uint16_t cells(ObjectReader& r, const char* name) {
    const auto value = r.unsigned_integer(name);
    if (!value) r.missing(name);
    if (*value < 1 || *value > kMaxTerminalCells)
        throw ApiFailure(bad_request("invalid", std::string("field `") + name +
                                                    "` must be in 1.." +
                                                    std::to_string(kMaxTerminalCells)));
    return static_cast<uint16_t>(*value);
}

/// {command?, cwd?, env?, shell?, timeoutMs?, cols, rows}; `shell` comes back in `*shell`.
ProcessRequest parse_terminal_request(std::string_view body, std::string* shell) {
    const auto json = parse_json_object(body);
    ObjectReader r(json);
    ProcessRequest request;
    request.command = r.string("command").value_or("");
    *shell = r.string("shell").value_or("");
    request.cwd = r.string("cwd").value_or("");
    request.env = r.env_map("env").value_or(std::map<std::string, std::string>{});
    if (auto ms = r.unsigned_integer("timeoutMs")) request.timeout = Millis(*ms);
    TerminalSize size;
    size.cols = cells(r, "cols");
    size.rows = cells(r, "rows");
    r.finish();
    if (json.contains("command") && !json["command"].is_null() && request.command.empty())
        throw ApiFailure(bad_request("invalid", "field `command` is empty"));
    if (request.command.empty()) request.argv = login_shell();
    request.env.try_emplace("TERM", "xterm-256color");
    request.terminal = size;
    return request;
}

/// A terminal in shell context `shell` starts where that context is: its cwd (a relative `cwd`
/// resolves against it) and its exported variables, under the request's own `env`.
void start_in_shell(const ShellInfo& shell, ProcessRequest& request) {
    if (request.cwd.empty()) {
        request.cwd = shell.cwd;
    } else if (request.cwd.front() != '/') {
        request.cwd = shell.cwd + "/" + request.cwd;
    }
    for (const auto& [key, value] : shell.env) request.env.try_emplace(key, value);
}

}  // namespace

asio::awaitable<void> Api::create_terminal(Exchange& ex, const RouteParams& params,
                                           const Caller&) {
    const std::string body = co_await ex.read_body(kJsonBodyLimit);
    std::string shell;
    ProcessRequest request = parse_terminal_request(body, &shell);
    if (!shell.empty()) start_in_shell(take(sessions_.get_shell(params.at("sid"), shell)), request);
    const auto started = co_await start_command(ex, params.at("sid"), request);
    if (!started) co_return;
    auto record = sessions_.get_process(params.at("sid"), started->info.id);  // with its usage
    const nlohmann::json reply = process_json(record ? *record : started->info);
    co_await ex.send_json(201, reply);
}

asio::awaitable<void> Api::terminal_socket(Exchange& ex, const RouteParams& params,
                                           const Caller&) {
    const std::string& sid = params.at("sid");
    const std::string& proc = params.at("proc");
    const ProcessInfo info = take(sessions_.get_process(sid, proc));
    if (!info.terminal)
        throw ApiFailure(bad_request("not_a_terminal", "process `" + proc +
                                                           "` has no terminal (start one with "
                                                           "POST /v1/sessions/{sid}/terminals)"));
    if (!beast::websocket::is_upgrade(ex.request()))
        throw ApiFailure(ApiError{426, "upgrade_required",
                                  "this endpoint is a WebSocket: send Connection: Upgrade, "
                                  "Upgrade: websocket",
                                  nullptr});
    co_await serve_terminal_socket(ex, sessions_, waits_, sid, proc);
}

}  // namespace corral::daemon
