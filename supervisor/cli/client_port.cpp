// `corral port lease|ls|rm|endpoint|wait`: host loopback ports leased to a session.

#include <ostream>

#include "supervisor/cli/client_output.hpp"
#include "supervisor/cli/client_subcommands.hpp"

namespace corral::cli {
namespace {

using nlohmann::json;

std::string ports_path(const std::string& sid) {
    return session_path(sid) + "/ports";
}

Status check_port(const std::string& command, const std::string& port) {
    bool digits = !port.empty() && port.size() <= 5 &&
                  port.find_first_not_of("0123456789") == std::string::npos;
    if (!digits || std::stoul(port) == 0 || std::stoul(port) > 65535) {
        return plain_error(command + ": bad port `" + port + "` (expected 1-65535)");
    }
    return {};
}

int lease_port(const std::vector<std::string>& args, ClientIo& io) {
    ArgsSpec spec{
        "port lease", {{"--json", false}}, 1, 1, {"SID"}, false, "corral port lease SID [--json]"};
    auto prepared = prepare_command(args, spec, io);
    if (!prepared) return report_usage_error(prepared.error(), io.err);
    json body = json::object();
    auto reply =
        call_api(prepared->client, "POST", ports_path(prepared->args.positionals[0]), &body);
    if (int code = failure_code(reply, io.err)) return code;
    if (prepared->args.flag("--json")) {
        print_json(io.out, reply->body);
    } else {
        io.out << field_text(reply->body, {"port"});
        if (std::string url = field_text(reply->body, {"url"}); url != "-") io.out << "  " << url;
        io.out << "\n";
    }
    return client_exit::kOk;
}

int list_ports(const std::vector<std::string>& args, ClientIo& io) {
    ArgsSpec spec{"port ls", {{"--json", false}},          1, 1, {"SID"},
                  false,     "corral port ls SID [--json]"};
    auto prepared = prepare_command(args, spec, io);
    if (!prepared) return report_usage_error(prepared.error(), io.err);
    auto reply = call_api(prepared->client, "GET", ports_path(prepared->args.positionals[0]));
    if (int code = failure_code(reply, io.err)) return code;
    if (prepared->args.flag("--json")) {
        print_json(io.out, reply->body);
        return client_exit::kOk;
    }
    std::vector<std::vector<std::string>> rows;
    for (const auto& lease : list_in(reply->body, "ports")) {
        if (lease.is_number()) {
            rows.push_back({lease.dump(), "-"});  // a bare list of port numbers
        } else {
            rows.push_back({field_text(lease, {"port"}), field_text(lease, {"url"})});
        }
    }
    print_table(io.out, {"PORT", "URL"}, rows);
    return client_exit::kOk;
}

int release_port(const std::vector<std::string>& args, ClientIo& io) {
    ArgsSpec spec{"port rm", {{"--json", false}},      2, 2, {"SID", "PORT"},
                  false,     "corral port rm SID PORT"};
    auto prepared = prepare_command(args, spec, io);
    if (!prepared) return report_usage_error(prepared.error(), io.err);
    const auto& words = prepared->args.positionals;
    if (auto valid = check_port("port rm", words[1]); !valid)
        return report_usage_error(valid.error(), io.err);
    auto reply = call_api(prepared->client, "DELETE", ports_path(words[0]) + "/" + words[1]);
    if (int code = failure_code(reply, io.err)) return code;
    if (prepared->args.flag("--json")) {
        print_json(io.out, reply->body);
    } else {
        io.out << "released " << words[1] << "\n";
    }
    return client_exit::kOk;
}

int port_endpoint(const std::vector<std::string>& args, ClientIo& io) {
    ArgsSpec spec{
        "port endpoint", {{"--ws", false}, {"--json", false}},           2, 2, {"SID", "PORT"},
        false,           "corral port endpoint SID PORT [--ws] [--json]"};
    auto prepared = prepare_command(args, spec, io);
    if (!prepared) return report_usage_error(prepared.error(), io.err);
    const auto& words = prepared->args.positionals;
    if (auto valid = check_port("port endpoint", words[1]); !valid)
        return report_usage_error(valid.error(), io.err);
    std::string protocol = prepared->args.flag("--ws") ? "ws" : "http";
    auto reply = call_api(prepared->client, "GET",
                          ports_path(words[0]) + "/" + words[1] + "/endpoint?protocol=" + protocol);
    if (int code = failure_code(reply, io.err)) return code;
    if (prepared->args.flag("--json")) {
        print_json(io.out, reply->body);
    } else {
        io.out << field_text(reply->body, {"url"}) << "\n";
    }
    return client_exit::kOk;
}

/// Blocks until something in the session accepts connections on PORT (exit 0), or the timeout
/// passes (the daemon answers 504; exit 1 with its message).
int wait_port(const std::vector<std::string>& args, ClientIo& io) {
    ArgsSpec spec{"port wait",
                  {{"--timeout", true}, {"--json", false}},
                  2,
                  2,
                  {"SID", "PORT"},
                  false,
                  "corral port wait SID PORT [--timeout 30s] [--json]"};
    auto prepared = prepare_command(args, spec, io);
    if (!prepared) return report_usage_error(prepared.error(), io.err);
    const auto& words = prepared->args.positionals;
    if (auto valid = check_port("port wait", words[1]); !valid)
        return report_usage_error(valid.error(), io.err);
    std::string query;
    if (auto timeout = prepared->args.value("--timeout")) {
        auto ms = parse_duration_ms("--timeout", *timeout);
        if (!ms) return report_usage_error(ms.error(), io.err);
        query = "?timeoutMs=" + std::to_string(*ms);
    }
    auto reply =
        call_api(prepared->client, "GET", ports_path(words[0]) + "/" + words[1] + "/wait" + query);
    if (int code = failure_code(reply, io.err)) return code;
    if (prepared->args.flag("--json")) print_json(io.out, reply->body);
    else io.out << "port " << words[1] << " accepts connections\n";
    return client_exit::kOk;
}

}  // namespace

int run_port_command(const std::vector<std::string>& args, ClientIo& io) {
    auto [verb, rest] = split_verb(args);
    if (verb == "lease") return lease_port(rest, io);
    if (verb == "ls" || verb == "list") return list_ports(rest, io);
    if (verb == "rm" || verb == "release") return release_port(rest, io);
    if (verb == "endpoint") return port_endpoint(rest, io);
    if (verb == "wait") return wait_port(rest, io);
    io.err << "corral port: "
           << (verb.empty() ? "missing subcommand" : "unknown subcommand `" + verb + "`")
           << "\nusage: corral port lease|ls|rm|endpoint|wait ...\n";
    return client_exit::kUsage;
}

}  // namespace corral::cli
