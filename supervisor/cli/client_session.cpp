// `corral session create|ls|show|rm`: sessions of corrald.

#include <fcntl.h>
#include <sys/stat.h>

#include <ostream>

#include "base/file_io.hpp"
#include "policies/policy_parser.hpp"
#include "supervisor/cli/client_output.hpp"
#include "supervisor/cli/client_subcommands.hpp"

namespace corral::cli {
namespace {

using nlohmann::json;

/// A --policy value names a file when it looks like a path (a '/' or a .yaml/.yml ending);
/// a bare word is always the name of a preset or of a policy loaded by the daemon, so a file
/// planted in the current directory under a preset's name is never sent in its place.
bool names_policy_file(const std::string& value) {
    bool has_yaml_suffix =
        value.size() > 5 && (value.ends_with(".yaml") || value.ends_with(".yml"));
    return value.find('/') != std::string::npos || has_yaml_suffix;
}

int create_session(const std::vector<std::string>& args, ClientIo& io) {
    ArgsSpec spec{"session create",
                  {{"--policy", true},
                   {"--id", true},
                   {"--env", true},
                   {"--cwd", true},
                   {"--command-timeout", true},
                   {"--json", false}},
                  0,
                  0,
                  {},
                  false,
                  "corral session create [--policy NAME|FILE] [--id ID] [--env K=V]... [--cwd DIR] "
                  "[--command-timeout 10m] [--json]"};
    auto prepared = prepare_command(args, spec, io);
    if (!prepared) return report_usage_error(prepared.error(), io.err);
    const ParsedArgs& parsed = prepared->args;
    json body = json::object();
    if (auto policy = parsed.value("--policy")) {
        if (names_policy_file(*policy)) {
            // The user's own file, resolved here as `corral run` resolves it: its `extends:` of
            // a neighbouring file is the user's to read, not the daemon's (which may read only
            // presets and its policy dir), and mistakes are told as file:line:column. The daemon
            // gets the resolved policy. (Stop 44's probe: examples/policies/sanitizer-ci.yaml,
            // which `corral run` and `policy check` take, was refused by `session create`.)
            const auto parsed_policy = parse_policy_file(*policy);
            if (!parsed_policy.ok()) {
                io.err << "corral: --policy " << *policy << ":\n" << parsed_policy.format_errors();
                return client_exit::kLocalFile;
            }
            body["policyYaml"] = policy_to_yaml(*parsed_policy.policy);
        } else {
            body["policy"] = *policy;
        }
    }
    if (auto id = parsed.value("--id")) body["id"] = *id;
    if (auto cwd = parsed.value("--cwd")) body["cwd"] = *cwd;
    auto env = parse_env_assignments(parsed.all("--env"));
    if (!env) return report_usage_error(env.error().context("session create"), io.err);
    if (!env->empty()) body["env"] = *env;
    if (auto timeout = parsed.value("--command-timeout")) {
        auto ms = parse_duration_ms("--command-timeout", *timeout);
        if (!ms) return report_usage_error(ms.error().context("session create"), io.err);
        body["commandTimeoutMs"] = *ms;
    }
    auto reply = call_api(prepared->client, "POST", "/v1/sessions", &body);
    if (int code = failure_code(reply, io.err)) return code;
    if (parsed.flag("--json")) {
        print_json(io.out, reply->body);
    } else {
        io.out << field_text(reply->body, {"id", "sessionId"}) << "\n";
    }
    return client_exit::kOk;
}

/// The PORTS cell: leased port numbers, whether the list holds numbers or {port, url} objects.
std::string ports_text(const json& session) {
    auto ports = session.find("ports");
    if (ports == session.end() || !ports->is_array()) return "-";
    std::string joined;
    for (const auto& lease : *ports) {
        joined += (joined.empty() ? "" : ",") +
                  (lease.is_object() ? field_text(lease, {"port"}) : cell_text(lease));
    }
    return joined.empty() ? "-" : joined;
}

int list_sessions(const std::vector<std::string>& args, ClientIo& io) {
    ArgsSpec spec{"session ls", {{"--json", false}}, 0, 0, {}, false, "corral session ls [--json]"};
    auto prepared = prepare_command(args, spec, io);
    if (!prepared) return report_usage_error(prepared.error(), io.err);
    auto reply = call_api(prepared->client, "GET", "/v1/sessions");
    if (int code = failure_code(reply, io.err)) return code;
    if (prepared->args.flag("--json")) {
        print_json(io.out, reply->body);
        return client_exit::kOk;
    }
    std::vector<std::vector<std::string>> rows;
    for (const auto& session : list_in(reply->body, "sessions")) {
        rows.push_back({field_text(session, {"id", "sessionId"}),
                        field_text(session, {"policy", "policyName"}),
                        field_text(session, {"status", "state"}),
                        field_text(session, {"processes", "processCount"}), ports_text(session),
                        field_text(session, {"createdAt", "created"})});
    }
    print_table(io.out, {"ID", "POLICY", "STATUS", "PROCESSES", "PORTS", "CREATED"}, rows);
    return client_exit::kOk;
}

int show_session(const std::vector<std::string>& args, ClientIo& io) {
    ArgsSpec spec{"session show",
                  {{"--json", false}},
                  1,
                  1,
                  {"SID"},
                  false,
                  "corral session show SID [--json]"};
    auto prepared = prepare_command(args, spec, io);
    if (!prepared) return report_usage_error(prepared.error(), io.err);
    auto reply = call_api(prepared->client, "GET", session_path(prepared->args.positionals[0]));
    if (int code = failure_code(reply, io.err)) return code;
    if (prepared->args.flag("--json")) {
        print_json(io.out, reply->body);
    } else {
        print_fields(io.out, reply->body);
    }
    return client_exit::kOk;
}

int remove_session(const std::vector<std::string>& args, ClientIo& io) {
    ArgsSpec spec{
        "session rm", {{"--json", false}}, 1, 1, {"SID"}, false, "corral session rm SID [--json]"};
    auto prepared = prepare_command(args, spec, io);
    if (!prepared) return report_usage_error(prepared.error(), io.err);
    const std::string& sid = prepared->args.positionals[0];
    auto reply = call_api(prepared->client, "DELETE", session_path(sid));
    if (int code = failure_code(reply, io.err)) return code;
    if (prepared->args.flag("--json")) {
        print_json(io.out, reply->body);
        return client_exit::kOk;
    }
    io.out << "ended " << sid;
    std::string killed = field_text(reply->body, {"killed", "killedProcesses", "processesKilled"});
    if (killed != "-") io.out << " (killed " << killed << " processes)";
    io.out << "\n";
    return client_exit::kOk;
}

}  // namespace

int run_session_command(const std::vector<std::string>& args, ClientIo& io) {
    auto [verb, rest] = split_verb(args);
    if (verb == "create") return create_session(rest, io);
    if (verb == "ls" || verb == "list") return list_sessions(rest, io);
    if (verb == "show" || verb == "inspect") return show_session(rest, io);
    if (verb == "rm" || verb == "delete") return remove_session(rest, io);
    io.err << "corral session: "
           << (verb.empty() ? "missing subcommand" : "unknown subcommand `" + verb + "`")
           << "\nusage: corral session create|ls|show|rm ...\n";
    return client_exit::kUsage;
}

}  // namespace corral::cli
