// POST /v1/sessions/{sid}/git/checkout: git clone, run inside the session as one of its processes
// (its namespaces, cgroup, seccomp, identity, network; git_checkout.hpp says what is refused and
// why). The reply is the clone's process record; a failed clone is 422 git_failed with git's own
// message, so "Remote branch nope not found" reaches the caller instead of a bare exit code.

#include "supervisor/daemon/api.hpp"
#include "supervisor/daemon/api_json.hpp"
#include "supervisor/daemon/disconnect_watch.hpp"
#include "supervisor/daemon/git_checkout.hpp"

namespace corral::daemon {
namespace {

/// The last lines of git's stderr that say what went wrong ("fatal: ..."), else its last line.
std::string git_message(const std::string& stderr_text) {
    std::string fatal, last;
    size_t begin = 0;
    while (begin < stderr_text.size()) {
        size_t end = stderr_text.find('\n', begin);
        if (end == std::string::npos) end = stderr_text.size();
        std::string line = stderr_text.substr(begin, end - begin);
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (!line.empty()) {
            last = line;
            if (line.starts_with("fatal:") || line.starts_with("error:") ||
                line.starts_with("warning: Could not find remote branch"))
                fatal += (fatal.empty() ? "" : "; ") + line;
        }
        begin = end + 1;
    }
    return fatal.empty() ? last : fatal;
}

/// Where the clone went, as the session's processes see it.
std::string absolute_in_session(const std::string& cwd, const std::string& dir) {
    if (!dir.empty() && dir.front() == '/') return dir;
    return cwd == "/" ? "/" + dir : cwd + "/" + dir;
}

}  // namespace

asio::awaitable<void> Api::git_checkout(Exchange& ex, const RouteParams& params, const Caller&) {
    const std::string& sid = params.at("sid");
    const std::string body = co_await ex.read_body(kJsonBodyLimit);
    const GitCheckoutRequest checkout = parse_git_checkout(body);
    const SessionInfo session = take(sessions_.get_session(sid));

    ProcessRequest request;
    request.argv = git_clone_argv(checkout);
    for (auto& [key, value] : git_environment()) request.env[key] = value;
    request.timeout = checkout.timeout;
    const ProcessInfo started = take(sessions_.start_process(sid, request));
    // As with run: a client that goes away aborts the clone.
    std::optional<DisconnectWatch> watch;
    watch.emplace(ex.socket(), [this, sid, proc = started.id] {
        (void)sessions_.stop_process(sid, proc, false);
    });
    auto outcome = co_await await_process(sid, started.id, std::nullopt);
    watch.reset();
    if (!outcome)
        throw ApiFailure(
            {503, "shutting_down",
             "corrald is shutting down; git clone `" + started.id + "` was still running",
             nullptr});
    const ProcessInfo info = take(std::move(outcome->first));
    const OutputBuffer::Excerpt err =
        take(sessions_.output_excerpt(sid, info.id, OutputStream::err));
    const std::string stderr_text = err.head + err.tail;

    nlohmann::json record = process_json(info);
    put_text_and_bytes(record, "stderr", stderr_text);
    const std::string target = absolute_in_session(session.cwd, checkout.target_dir);
    const bool ok = info.reason == ExitReason::exited && info.exit_code == 0;
    if (ok) {
        nlohmann::json reply = {
            {"url", checkout.url}, {"targetDir", target}, {"process", std::move(record)}};
        if (!checkout.branch.empty()) reply["branch"] = checkout.branch;
        if (checkout.depth) reply["depth"] = *checkout.depth;
        co_await ex.send_json(200, reply);
        co_return;
    }
    std::string message;
    if (!info.error.empty()) {
        message = "git could not start in the session: " + info.error;
    } else if (info.exit_code) {
        message = "git clone of `" + checkout.url + "` failed (exit " +
                  std::to_string(*info.exit_code) + ")";
        const std::string said = git_message(stderr_text);
        if (!said.empty()) message += ": " + said;
    } else {
        message = "git clone of `" + checkout.url + "` ended: " + std::string(info.status());
    }
    nlohmann::json reply = {
        {"error", {{"code", "git_failed"}, {"message", message}, {"process", std::move(record)}}}};
    co_await ex.send_json(422, reply);
}

}  // namespace corral::daemon
