// `corral exec` (run a command in a session, streaming its output, exiting with its code) and
// `corral spawn` (start one in the background).

#include <ostream>

#include "supervisor/cli/client_output.hpp"
#include "supervisor/cli/client_stream.hpp"
#include "supervisor/cli/client_subcommands.hpp"

namespace corral::cli {
namespace {

using nlohmann::json;

const std::vector<OptionSpec> kCommandOptions = {
    {"--cwd", true}, {"--env", true, "-e"}, {"--timeout", true}};

/// The request body shared by exec and spawn: {argv, cwd?, env?, timeoutMs?}; exec --shell adds
/// {shell}, and then a single word is a shell line (`-- 'cd repo && make'`), as typed in one.
Result<json> command_body(const ParsedArgs& parsed) {
    json body = {{"argv", parsed.command}};
    if (auto shell = parsed.value("--shell")) {
        body["shell"] = *shell;
        if (parsed.command.size() == 1) body = {{"command", parsed.command[0]}, {"shell", *shell}};
    }
    if (auto cwd = parsed.value("--cwd")) body["cwd"] = *cwd;
    auto env = parse_env_assignments(parsed.all("--env"));
    if (!env) return std::move(env.error());
    if (!env->empty()) body["env"] = *env;
    if (auto timeout = parsed.value("--timeout")) {
        auto ms = parse_duration_ms("--timeout", *timeout);
        if (!ms) return std::move(ms.error());
        body["timeoutMs"] = *ms;
    }
    return body;
}

/// Reads a refused exec's error body and prints it; exec's own failures all exit 125.
int report_refused_exec(HttpResponseHead& head, HttpResponseReader& reader, std::ostream& err) {
    auto text = reader.read_all(1 << 20);
    json body = text ? json::parse(*text, nullptr, false) : json();
    if (body.is_discarded()) body = *text;
    err << "corral: " << api_error_message(head.status, body) << "\n";
    return client_exit::kExecFailure;
}

}  // namespace

int run_exec_command(const std::vector<std::string>& args, ClientIo& io) {
    std::vector<OptionSpec> options = kCommandOptions;
    options.push_back({"--shell", true});
    ArgsSpec spec{
        "exec",
        options,
        1,
        1,
        {"SID"},
        true,
        "corral exec SID [--shell CTX] [--cwd DIR] [--env K=V]... [--timeout 30s] -- CMD ARGS..."};
    auto prepared = prepare_command(args, spec, io);
    if (!prepared) {
        report_usage_error(prepared.error(), io.err);
        return client_exit::kExecFailure;  // exit codes below 125 belong to the command
    }
    auto body = command_body(prepared->args);
    if (!body) {
        report_usage_error(body.error().context("exec"), io.err);
        return client_exit::kExecFailure;
    }
    HttpRequest request{"POST",
                        session_path(prepared->args.positionals[0]) + "/exec",
                        {{"Content-Type", "application/json"}, {"Accept", "application/x-ndjson"}},
                        body->dump(),
                        -1,
                        std::nullopt};
    auto opened = prepared->client.open(request);
    if (!opened) {
        report_transport_error(opened.error(), io.err);
        return client_exit::kExecFailure;
    }
    auto& [head, reader] = *opened;
    if (head.status < 200 || head.status >= 300) return report_refused_exec(head, reader, io.err);
    auto end = relay_stream(reader, io);
    if (!end) {
        report_transport_error(end.error(), io.err);
        return client_exit::kExecFailure;
    }
    return command_exit_code(*end, io.err);
}

int run_spawn_command(const std::vector<std::string>& args, ClientIo& io) {
    std::vector<OptionSpec> options = kCommandOptions;
    options.push_back({"--json", false});
    ArgsSpec spec{
        "spawn",
        options,
        1,
        1,
        {"SID"},
        true,
        "corral spawn SID [--cwd DIR] [--env K=V]... [--timeout 30s] [--json] -- CMD ARGS..."};
    auto prepared = prepare_command(args, spec, io);
    if (!prepared) return report_usage_error(prepared.error(), io.err);
    auto body = command_body(prepared->args);
    if (!body) return report_usage_error(body.error().context("spawn"), io.err);
    auto reply = call_api(prepared->client, "POST",
                          session_path(prepared->args.positionals[0]) + "/processes", &*body);
    if (int code = failure_code(reply, io.err)) return code;
    if (prepared->args.flag("--json")) {
        print_json(io.out, reply->body);
    } else {
        io.out << field_text(reply->body, {"id", "processId"}) << "\n";
    }
    return client_exit::kOk;
}

}  // namespace corral::cli
