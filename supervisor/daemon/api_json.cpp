#include "supervisor/daemon/api_json.hpp"

#include "policies/egress_rules.hpp"

#include "supervisor/reports/report_json.hpp"

#include <ctime>

#include "supervisor/daemon/json_fields.hpp"

namespace corral::daemon {

CreateSessionRequest parse_create_session(std::string_view body) {
    const auto json = parse_json_object(body);
    ObjectReader r(json);
    CreateSessionRequest request;
    request.policy = r.string("policy").value_or("");
    request.policy_yaml = r.string("policyYaml").value_or("");
    request.id = r.string("id").value_or("");
    request.env = r.env_map("env").value_or(std::map<std::string, std::string>{});
    request.cwd = r.string("cwd").value_or("");
    request.command_timeout = r.milliseconds("commandTimeoutMs");
    request.workdir = r.string("workdir").value_or("");
    if (auto ports = r.unsigned_integer("ports")) {
        if (*ports > 64) throw ApiFailure(bad_request("invalid", "field `ports` is at most 64"));
        request.ports = static_cast<unsigned>(*ports);
    }
    r.finish();
    if (!request.policy.empty() && !request.policy_yaml.empty())
        throw ApiFailure(
            bad_request("conflicting_fields", "give `policy` or `policyYaml`, not both"));
    return request;
}

ProcessRequest parse_process_request(std::string_view body) {
    const auto json = parse_json_object(body);
    ObjectReader r(json);
    ProcessRequest request;
    request.command = r.string("command").value_or("");
    request.argv = r.string_list("argv").value_or(std::vector<std::string>{});
    request.cwd = r.string("cwd").value_or("");
    request.env = r.env_map("env").value_or(std::map<std::string, std::string>{});
    request.timeout = r.milliseconds("timeoutMs");
    request.stdin_data = r.bytes("stdin");  // data, not a name: NUL bytes are fine
    request.stdin_open = r.boolean("stdinOpen").value_or(false);
    request.shell = r.string("shell").value_or("");
    request.detach_on_disconnect = r.boolean("detachOnDisconnect").value_or(false);
    r.finish();
    const bool has_command = json.contains("command") && !json["command"].is_null();
    const bool has_argv = json.contains("argv") && !json["argv"].is_null();
    if (has_command == has_argv)
        throw ApiFailure(bad_request("missing_field", "give exactly one of `command` and `argv`"));
    if (has_command && request.command.empty())
        throw ApiFailure(bad_request("invalid", "field `command` is empty"));
    if (has_argv && request.argv.empty())
        throw ApiFailure(bad_request("invalid", "field `argv` is empty"));
    return request;
}

ShellRequest parse_shell_request(std::string_view body) {
    const auto json = parse_json_object(body);
    ObjectReader r(json);
    ShellRequest request;
    request.id = r.string("id").value_or("");
    request.cwd = r.string("cwd").value_or("");
    request.env = r.env_map("env").value_or(std::map<std::string, std::string>{});
    r.finish();
    return request;
}

nlohmann::json shell_json(const ShellInfo& shell) {
    nlohmann::json j = {{"id", shell.id},
                        {"cwd", shell.cwd},
                        {"env", shell.env},
                        {"functions", shell.functions},
                        {"aliases", shell.aliases},
                        {"running", shell.running.empty() ? nlohmann::json(nullptr)
                                                          : nlohmann::json(shell.running)},
                        {"queued", shell.queued},
                        {"commands", shell.commands}};
    if (!shell.last_state_error.empty()) j["lastStateError"] = shell.last_state_error;
    return j;
}

EnvPatch parse_env_patch(std::string_view body) {
    const auto json = parse_json_object(body);
    ObjectReader r(json);
    EnvPatch patch;
    // {set: {K: "v" | null}}: null unsets, as Cloudflare's setEnvVars takes it.
    if (const nlohmann::json* set = r.object("set")) {
        for (const auto& [key, value] : set->items()) {
            refuse_bad_env_name(key, "set");
            if (value.is_string()) {
                refuse_nul(value.get_ref<const std::string&>(), "set." + key);
                patch.set[key] = value.get<std::string>();
            } else if (value.is_null()) {
                patch.unset.push_back(key);
            } else {
                throw ApiFailure(bad_request(
                    "bad_type", "field `set." + key + "` must be a string or null"));
            }
        }
    }
    for (auto& key : r.string_list("unset").value_or(std::vector<std::string>{})) {
        refuse_bad_env_name(key, "unset");
        patch.unset.push_back(std::move(key));
    }
    r.finish();
    return patch;
}

std::string format_time(std::chrono::system_clock::time_point time) {
    using namespace std::chrono;
    const auto ms = duration_cast<milliseconds>(time.time_since_epoch()).count();
    const std::time_t secs = static_cast<std::time_t>(ms / 1000);
    std::tm tm{};
    gmtime_r(&secs, &tm);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                  tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                  static_cast<int>(ms % 1000));
    return buf;
}

namespace {

nlohmann::json stream_stats_json(const StreamStats& s) {
    return {{"bytes", s.total_bytes},
            {"droppedBytes", s.dropped_bytes},
            {"truncated", s.truncated},
            {"eof", s.eof}};
}

}  // namespace

nlohmann::json process_json(const ProcessInfo& p) {
    nlohmann::json j = {{"id", p.id},
                        {"pid", p.pid},
                        {"argv", p.argv},
                        {"cwd", p.cwd},
                        {"status", p.status()},
                        {"running", p.running},
                        {"exitCode", nullptr},
                        {"signal", nullptr},
                        {"startedAt", format_time(p.started_at)},
                        {"durationMs", p.duration_ms},
                        {"usage", usage_to_json(p.usage)},
                        {"output",
                         {{"stdout", stream_stats_json(p.stdout_stats)},
                          {"stderr", stream_stats_json(p.stderr_stats)}}},
                        {"truncated", p.stdout_stats.truncated || p.stderr_stats.truncated},
                        {"stdinOpen", p.stdin_open},
                        {"seccomp", refusals_to_json(p.seccomp)}};
    if (!p.command.empty()) j["command"] = p.command;
    if (p.terminal) j["terminal"] = true;
    if (p.exit_code) j["exitCode"] = *p.exit_code;
    if (p.signal) {
        j["signal"] = signal_name(*p.signal);
        // As a shell reports it (`kill` -> 143); `status` and `signal` say what really happened.
        if (!p.exit_code) j["exitCode"] = 128 + *p.signal;
    }
    if (p.timeout) j["timeoutMs"] = p.timeout->count();
    if (!p.error.empty()) j["error"] = p.error;
    if (!p.note.empty()) j["note"] = p.note;
    if (p.output_lost) j["outputLost"] = true;
    // Said of every process a previous run started: whether its output went on being read.
    if (p.output_lost || p.output_resumed) j["outputResumed"] = p.output_resumed;
    return j;
}

nlohmann::json port_json(const PortLeaseInfo& lease) {
    return {{"port", lease.port}, {"url", lease.url}};
}

nlohmann::json session_summary_json(const SessionInfo& s) {
    nlohmann::json ports = nlohmann::json::array();
    for (const auto& p : s.ports) ports.push_back(port_json(p));
    size_t running = 0;
    for (const auto& p : s.processes) running += p.running ? 1 : 0;
    return {{"id", s.id},
            {"policy", s.policy_name},
            {"state", std::string(to_string(s.state))},
            {"createdAt", format_time(s.created_at)},
            {"processes", s.processes.size()},
            {"running", running},
            {"ports", std::move(ports)}};
}

nlohmann::json egress_json(const EgressInfo& e) {
    return {{"mode", std::string(to_string(e.policy.mode))},
            {"allowedHosts", e.policy.allowed_hosts},
            {"allowedCIDRs", e.policy.allowed_cidrs},
            {"deniedCIDRs", e.policy.denied_cidrs},
            {"refused", e.refused},
            {"proxy", e.proxy_port ? nlohmann::json("http://127.0.0.1:" +
                                                    std::to_string(e.proxy_port))
                                   : nlohmann::json(nullptr)},
            {"dns", e.dns_port ? nlohmann::json("127.0.0.1:" + std::to_string(e.dns_port))
                               : nlohmann::json(nullptr)},
            {"transparent", e.transparent},
            {"transparentError", e.transparent_error.empty()
                                     ? nlohmann::json(nullptr)
                                     : nlohmann::json(e.transparent_error)}};
}

nlohmann::json session_json(const SessionInfo& s) {
    nlohmann::json j = session_summary_json(s);
    nlohmann::json processes = nlohmann::json::array();
    for (const auto& p : s.processes) processes.push_back(process_json(p));
    j["processes"] = std::move(processes);
    j["root"] = s.root;
    j["workdir"] = s.workdir;
    if (!s.workdir_warning.empty()) j["workdirWarning"] = s.workdir_warning;
    j["cwd"] = s.cwd;
    j["env"] = s.env;
    j["namespaces"] = s.namespaces;
    j["notEnforced"] = s.not_enforced;
    j["usage"] = usage_to_json(s.usage);
    j["commandTimeoutMs"] =
        s.command_timeout ? nlohmann::json(s.command_timeout->count()) : nullptr;
    if (!s.end_reason.empty()) j["endReason"] = s.end_reason;
    if (s.ended_at) j["endedAt"] = format_time(*s.ended_at);
    if (s.state == SessionState::ended) j["processesKilled"] = s.processes_killed;
    if (s.egress) j["egress"] = egress_json(*s.egress);
    return j;
}

nlohmann::json end_report_json(const EndSessionReport& r) {
    return {{"id", r.id},
            {"alreadyEnded", r.already_ended},
            {"processesKilled", r.processes_killed},
            {"killedProcessIds", r.killed_process_ids},
            {"endReason", r.end_reason},
            {"durationMs", r.duration_ms}};
}

nlohmann::json file_info_json(const FileInfo& f) {
    const auto mtime = std::chrono::system_clock::time_point(
        std::chrono::duration_cast<std::chrono::system_clock::duration>(
            std::chrono::nanoseconds(f.mtime_ns)));
    // Nanoseconds since the epoch are above 2^53: a JavaScript client would round them. So the
    // exact value goes as a string, and mtimeMs is a number (with fraction) as Node's fs gives.
    nlohmann::json j = {{"name", f.name},
                        {"type", type_name(f.type)},
                        {"size", f.size},
                        {"mode", f.mode},
                        {"mtime", format_time(mtime)},
                        {"mtimeMs", static_cast<double>(f.mtime_ns) / 1e6},
                        {"mtimeNs", std::to_string(f.mtime_ns)}};
    if (f.type == FileType::symlink) j["linkTarget"] = f.link_target;
    return j;
}

}  // namespace corral::daemon
