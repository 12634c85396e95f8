// `corral ps`, `corral logs [-f]` and `corral kill`: the processes of a session.

#include <string.h>

#include <ostream>

#include "supervisor/cli/client_output.hpp"
#include "supervisor/cli/client_stream.hpp"
#include "supervisor/cli/client_subcommands.hpp"

namespace corral::cli {
namespace {

using nlohmann::json;

std::string process_path(const std::string& sid, const std::string& proc) {
    return session_path(sid) + "/processes/" + url_encode(proc, false);
}

/// "0", "SIGKILL" or "-": how a process ended, for the EXIT column.
std::string exit_text(const json& process) {
    auto signal = process.find("signal");
    if (signal != process.end() && !signal->is_null()) {
        if (signal->is_number_integer()) {
            const char* abbrev = sigabbrev_np(signal->get<int>());
            return abbrev != nullptr ? std::string("SIG") + abbrev : signal->dump();
        }
        return cell_text(*signal);
    }
    return field_text(process, {"exitCode"});
}

/// What the user asked to run: the `command` line where there is one (a shell context's command
/// runs inside corral's wrapper script, whose argv filled ~23 lines of `ps`), else the argv. One
/// line per row: line breaks are shown as `\n`.
std::string command_text(const json& process) {
    std::string text;
    auto command = process.find("command");
    auto argv = process.find("argv");
    if (command != process.end() && command->is_string() && !command->get<std::string>().empty()) {
        text = command->get<std::string>();
    } else if (argv != process.end() && argv->is_array()) {
        for (const auto& word : *argv) text += (text.empty() ? "" : " ") + cell_text(word);
    }
    std::string one_line;
    for (char c : text) {
        if (c == '\n')
            one_line += "\\n";
        else
            one_line += c;
    }
    return one_line;
}

/// Writes a /logs reply: a JSON object with `data` (or `stdout`/`stderr`), or raw bytes.
void print_logs_body(const HttpResponseHead& head, const std::string& body,
                     const std::string& stream, ClientIo& io) {
    bool is_json = head.header("content-type").value_or("").find("json") != std::string::npos;
    json parsed = is_json ? json::parse(body, nullptr, false) : json();
    if (!parsed.is_object()) {
        (stream == "stderr" ? io.err : io.out) << body;
        return;
    }
    auto write_field = [&](const char* key, std::ostream& target) {
        auto bytes = bytes_field(parsed, key);
        if (bytes) target << *bytes;
    };
    write_field("data", stream == "stderr" ? io.err : io.out);
    write_field("stdout", io.out);
    write_field("stderr", io.err);
}

int follow_logs(const PreparedCommand& prepared, const std::string& target,
                const std::string& stream, ClientIo& io) {
    HttpRequest request{"GET", target, {{"Accept", "application/x-ndjson"}}, "", -1, std::nullopt};
    auto opened = prepared.client.open(request);
    if (!opened) return report_transport_error(opened.error(), io.err);
    auto& [head, reader] = *opened;
    if (head.status < 200 || head.status >= 300) {
        auto text = reader.read_all(1 << 20);
        json body = text ? json::parse(*text, nullptr, false) : json();
        return report_api_error(ApiReply{head.status, body.is_discarded() ? json(*text) : body},
                                io.err);
    }
    auto end = relay_stream(reader, io, stream);
    if (!end) return report_transport_error(end.error(), io.err);
    if (end->kind == StreamEnd::Kind::Exit) return client_exit::kOk;
    command_exit_code(*end, io.err);  // explains the error or the cut stream
    return end->kind == StreamEnd::Kind::Error ? client_exit::kApiError : client_exit::kUnreachable;
}

}  // namespace

int run_ps_command(const std::vector<std::string>& args, ClientIo& io) {
    ArgsSpec spec{"ps", {{"--json", false}}, 1, 1, {"SID"}, false, "corral ps SID [--json]"};
    auto prepared = prepare_command(args, spec, io);
    if (!prepared) return report_usage_error(prepared.error(), io.err);
    auto reply = call_api(prepared->client, "GET",
                          session_path(prepared->args.positionals[0]) + "/processes");
    if (int code = failure_code(reply, io.err)) return code;
    if (prepared->args.flag("--json")) {
        print_json(io.out, reply->body);
        return client_exit::kOk;
    }
    std::vector<std::vector<std::string>> rows;
    for (const auto& process : list_in(reply->body, "processes")) {
        rows.push_back({field_text(process, {"id", "processId"}), field_text(process, {"pid"}),
                        field_text(process, {"status", "state"}), exit_text(process),
                        command_text(process)});
    }
    print_table(io.out, {"ID", "PID", "STATUS", "EXIT", "COMMAND"}, rows);
    return client_exit::kOk;
}

int run_logs_command(const std::vector<std::string>& args, ClientIo& io) {
    ArgsSpec spec{"logs",
                  {{"--follow", false, "-f"}, {"--stream", true}, {"--offset", true}},
                  2,
                  2,
                  {"SID", "PROC"},
                  false,
                  "corral logs SID PROC [-f] [--stream stdout|stderr] [--offset N]"};
    auto prepared = prepare_command(args, spec, io);
    if (!prepared) return report_usage_error(prepared.error(), io.err);
    const ParsedArgs& parsed = prepared->args;
    std::string stream = parsed.value("--stream").value_or("");
    if (!stream.empty() && stream != "stdout" && stream != "stderr") {
        return report_usage_error(
            plain_error("logs: --stream must be stdout or stderr, not `" + stream + "`"), io.err);
    }
    std::string offset = parsed.value("--offset").value_or("0");
    if (offset.empty() || offset.find_first_not_of("0123456789") != std::string::npos) {
        return report_usage_error(
            plain_error("logs: --offset must be a byte count, not `" + offset + "`"), io.err);
    }
    std::string query = "?offset=" + offset + (stream.empty() ? "" : "&stream=" + stream);
    std::string base = process_path(parsed.positionals[0], parsed.positionals[1]);
    if (parsed.flag("--follow"))
        return follow_logs(*prepared, base + "/stream" + query, stream, io);

    auto response = prepared->client.fetch(
        HttpRequest{"GET", base + "/logs" + query, {}, "", -1, std::nullopt});
    if (!response) return report_transport_error(response.error(), io.err);
    if (response->head.status < 200 || response->head.status >= 300) {
        json body = json::parse(response->body, nullptr, false);
        return report_api_error(
            ApiReply{response->head.status, body.is_discarded() ? json(response->body) : body},
            io.err);
    }
    print_logs_body(response->head, response->body, stream, io);
    io.out.flush();
    return client_exit::kOk;
}

int run_kill_command(const std::vector<std::string>& args, ClientIo& io) {
    ArgsSpec spec{
        "kill",
        {{"--signal", true, "-s"},
         {"--tree", false},
         {"--force", false},
         {"--all", false},
         {"--json", false}},
        1,
        2,
        {"SID", "PROC"},
        false,
        "corral kill SID PROC [--signal TERM [--tree]] [--force] | corral kill SID --all"};
    auto prepared = prepare_command(args, spec, io);
    if (!prepared) return report_usage_error(prepared.error(), io.err);
    const ParsedArgs& parsed = prepared->args;
    Result<ApiReply> reply = plain_error("unreachable");
    std::string done;
    if (parsed.flag("--all")) {
        if (parsed.positionals.size() != 1 || parsed.value("--signal"))
            return report_usage_error(
                plain_error("kill: --all takes the session only (corral kill SID --all)"), io.err);
        reply = call_api(prepared->client, "DELETE",
                         session_path(parsed.positionals[0]) + "/processes");
        if (int code = failure_code(reply, io.err)) return code;
        if (parsed.flag("--json")) {
            print_json(io.out, reply->body);
        } else {
            io.out << "killed " << field_text(reply->body, {"killed"}) << " processes\n";
        }
        return client_exit::kOk;
    }
    if (parsed.positionals.size() != 2)
        return report_usage_error(plain_error("kill: missing PROC (or --all)"), io.err);
    std::string path = process_path(parsed.positionals[0], parsed.positionals[1]);
    if (auto signal_text = parsed.value("--signal")) {
        auto number = parse_signal(*signal_text);
        const char* abbrev = number ? sigabbrev_np(*number) : nullptr;
        if (abbrev == nullptr) {
            return report_usage_error(plain_error("kill: unknown signal `" + *signal_text + "`"),
                                      io.err);
        }
        std::string name = std::string("SIG") + abbrev;
        json body = {{"signal", name}};
        if (parsed.flag("--tree")) body["tree"] = true;
        reply = call_api(prepared->client, "POST", path + "/signal", &body);
        done = "sent " + name + " to " + parsed.positionals[1];
    } else {
        reply = call_api(prepared->client, "DELETE",
                         path + (parsed.flag("--force") ? "?force=true" : ""));
        done = "killed " + parsed.positionals[1];
    }
    if (int code = failure_code(reply, io.err)) return code;
    if (std::string count = field_text(reply->body, {"killed"});
        count != "-" && !parsed.value("--signal")) {
        done += " (" + count + " processes)";
    }
    if (parsed.flag("--json")) {
        print_json(io.out, reply->body);
    } else {
        io.out << done << "\n";
    }
    return client_exit::kOk;
}

}  // namespace corral::cli
