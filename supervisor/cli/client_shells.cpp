// `corral shells create|ls|show|rm`: shell contexts of a session, whose cwd, exported variables,
// functions and aliases carry from one `corral exec --shell CTX` to the next. (`corral shell SID`
// is the interactive terminal's name, so the contexts are `shells`.)

#include <ostream>

#include "supervisor/cli/client_output.hpp"
#include "supervisor/cli/client_subcommands.hpp"

namespace corral::cli {
namespace {

using nlohmann::json;

std::string shells_path(const std::string& sid) {
    return session_path(sid) + "/shells";
}

int create_shell(const std::vector<std::string>& args, ClientIo& io) {
    ArgsSpec spec{"shells create",
                  {{"--id", true}, {"--cwd", true}, {"--env", true, "-e"}, {"--json", false}},
                  1,
                  1,
                  {"SID"},
                  false,
                  "corral shells create SID [--id CTX] [--cwd DIR] [--env K=V]... [--json]"};
    auto prepared = prepare_command(args, spec, io);
    if (!prepared) return report_usage_error(prepared.error(), io.err);
    const ParsedArgs& parsed = prepared->args;
    json body = json::object();
    if (auto id = parsed.value("--id")) body["id"] = *id;
    if (auto cwd = parsed.value("--cwd")) body["cwd"] = *cwd;
    auto env = parse_env_assignments(parsed.all("--env"));
    if (!env) return report_usage_error(env.error().context("shells create"), io.err);
    if (!env->empty()) body["env"] = *env;
    auto reply = call_api(prepared->client, "POST", shells_path(parsed.positionals[0]), &body);
    if (int code = failure_code(reply, io.err)) return code;
    if (parsed.flag("--json")) {
        print_json(io.out, reply->body);
    } else {
        io.out << field_text(reply->body, {"id"}) << "\n";
    }
    return client_exit::kOk;
}

int list_shells(const std::vector<std::string>& args, ClientIo& io) {
    ArgsSpec spec{"shells ls", {{"--json", false}}, 1, 1, {"SID"}, false,
                  "corral shells ls SID [--json]"};
    auto prepared = prepare_command(args, spec, io);
    if (!prepared) return report_usage_error(prepared.error(), io.err);
    auto reply = call_api(prepared->client, "GET", shells_path(prepared->args.positionals[0]));
    if (int code = failure_code(reply, io.err)) return code;
    if (prepared->args.flag("--json")) {
        print_json(io.out, reply->body);
        return client_exit::kOk;
    }
    std::vector<std::vector<std::string>> rows;
    for (const auto& shell : list_in(reply->body, "shells")) {
        rows.push_back({field_text(shell, {"id"}), field_text(shell, {"cwd"}),
                        field_text(shell, {"running"}), field_text(shell, {"queued"}),
                        field_text(shell, {"commands"})});
    }
    print_table(io.out, {"ID", "CWD", "RUNNING", "QUEUED", "COMMANDS"}, rows);
    return client_exit::kOk;
}

int show_shell(const std::vector<std::string>& args, ClientIo& io) {
    ArgsSpec spec{"shells show", {{"--json", false}}, 2, 2, {"SID", "CTX"}, false,
                  "corral shells show SID CTX [--json]"};
    auto prepared = prepare_command(args, spec, io);
    if (!prepared) return report_usage_error(prepared.error(), io.err);
    const ParsedArgs& parsed = prepared->args;
    auto reply = call_api(prepared->client, "GET",
                          shells_path(parsed.positionals[0]) + "/" + parsed.positionals[1]);
    if (int code = failure_code(reply, io.err)) return code;
    if (parsed.flag("--json")) {
        print_json(io.out, reply->body);
    } else {
        print_fields(io.out, reply->body);
    }
    return client_exit::kOk;
}

int remove_shell(const std::vector<std::string>& args, ClientIo& io) {
    ArgsSpec spec{"shells rm", {{"--json", false}}, 2, 2, {"SID", "CTX"}, false,
                  "corral shells rm SID CTX [--json]"};
    auto prepared = prepare_command(args, spec, io);
    if (!prepared) return report_usage_error(prepared.error(), io.err);
    const ParsedArgs& parsed = prepared->args;
    auto reply = call_api(prepared->client, "DELETE",
                          shells_path(parsed.positionals[0]) + "/" + parsed.positionals[1]);
    if (int code = failure_code(reply, io.err)) return code;
    if (parsed.flag("--json")) {
        print_json(io.out, reply->body);
    } else {
        io.out << "deleted shell context " << parsed.positionals[1] << "\n";
    }
    return client_exit::kOk;
}

}  // namespace

int run_shells_command(const std::vector<std::string>& args, ClientIo& io) {
    auto [verb, rest] = split_verb(args);
    if (verb == "create") return create_shell(rest, io);
    if (verb == "ls" || verb == "list") return list_shells(rest, io);
    if (verb == "show") return show_shell(rest, io);
    if (verb == "rm" || verb == "delete") return remove_shell(rest, io);
    io.err << "corral shells: "
           << (verb.empty() ? "missing subcommand" : "unknown subcommand `" + verb + "`")
           << "\nusage: corral shells create|ls|show|rm ...\n";
    return client_exit::kUsage;
}

}  // namespace corral::cli
