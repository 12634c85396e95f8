#include "supervisor/cli/client_api.hpp"

#include <ostream>

namespace corral::cli {

Result<HttpClient> make_client(const ParsedArgs& args, const ClientIo& io) {
    auto address =
        resolve_daemon_address(args.value("--socket").value_or(""),
                               args.value("--token").value_or(""), io.socket_env, io.token_env);
    if (!address) return std::move(address.error());
    return HttpClient(std::move(*address));
}

Result<ApiReply> call_api(const HttpClient& client, const std::string& method,
                          const std::string& target, const nlohmann::json* body) {
    HttpRequest request{method, target, {{"Accept", "application/json"}}, "", -1, std::nullopt};
    if (body != nullptr) {
        request.headers.emplace_back("Content-Type", "application/json");
        request.body = body->dump();
    }
    auto response = client.fetch(request);
    if (!response) return std::move(response.error());
    ApiReply reply{response->head.status, nullptr};
    if (response->body.empty()) return reply;
    reply.body = nlohmann::json::parse(response->body, nullptr, /*allow_exceptions=*/false);
    if (reply.body.is_discarded()) {
        if (reply.ok()) {
            return plain_error(method + " " + target + ": corrald sent a body that is not JSON: `" +
                               response->body.substr(0, 120) + "`");
        }
        reply.body =
            response->body;  // a non-JSON error (e.g. from a proxy): keep the text for the message
    }
    return reply;
}

std::string api_error_message(int status, const nlohmann::json& body) {
    std::string fallback = "corrald answered HTTP " + std::to_string(status);
    if (body.is_string()) return fallback + ": " + body.get<std::string>();
    if (!body.is_object()) return fallback;
    auto error = body.find("error");
    if (error == body.end()) return fallback;
    if (error->is_string()) return error->get<std::string>();
    if (!error->is_object()) return fallback;
    std::string message = error->value("message", fallback);
    std::string code = error->value("code", "");
    return code.empty() ? message : message + " (" + code + ")";
}

int report_api_error(const ApiReply& reply, std::ostream& err) {
    err << "corral: " << api_error_message(reply.status, reply.body) << "\n";
    return reply.status == 404 ? client_exit::kNotFound : client_exit::kApiError;
}

int report_transport_error(const Error& error, std::ostream& err) {
    err << "corral: " << error.describe() << "\n";
    return client_exit::kUnreachable;
}

int report_usage_error(const Error& error, std::ostream& err) {
    err << "corral " << error.describe() << "\n";
    return client_exit::kUsage;
}

int failure_code(const Result<ApiReply>& reply, std::ostream& err) {
    if (!reply) return report_transport_error(reply.error(), err);
    if (!reply->ok()) return report_api_error(*reply, err);
    return client_exit::kOk;
}

Result<PreparedCommand> prepare_command(const std::vector<std::string>& args, const ArgsSpec& spec,
                                        const ClientIo& io) {
    auto parsed = parse_args(args, spec);
    if (!parsed) return std::move(parsed.error());
    auto client = make_client(*parsed, io);
    if (!client) return std::move(client.error().context(spec.command));
    return PreparedCommand{std::move(*parsed), std::move(*client)};
}

std::string session_path(const std::string& sid) {
    return "/v1/sessions/" + url_encode(sid, false);
}

}  // namespace corral::cli
