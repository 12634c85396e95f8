#pragma once
// What every client subcommand shares: where it prints, its exit codes, how it reaches corrald,
// and how a JSON API call and an API error are turned into output.

#include <iosfwd>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "supervisor/cli/client_args.hpp"
#include "supervisor/cli/http_client.hpp"

namespace corral::cli {

/// Exit codes of the client commands (exec and spawn's command output aside).
namespace client_exit {
inline constexpr int kOk = 0;
inline constexpr int kApiError = 1;  ///< corrald refused the request (4xx/5xx other than 404)
inline constexpr int kUsage = 2;     ///< bad command-line arguments
inline constexpr int kUnreachable =
    3;                               ///< cannot connect to corrald, or a broken/unexpected response
inline constexpr int kNotFound = 4;  ///< 404: no such session, process, file or port
inline constexpr int kLocalFile =
    5;  ///< a local file could not be read or written (cp, --policy FILE)
inline constexpr int kExecFailure =
    125;  ///< exec: corral itself failed (the command's codes are its own)
inline constexpr int kExecTimeout =
    124;  ///< exec: the command hit its timeout (as timeout(1) does)
}  // namespace client_exit

/// Where a client command prints and reads, and the environment it consults. Tests pass string
/// streams; the `corral` binary passes std::cout/std::cerr and the real environment.
struct ClientIo {
    std::ostream& out;       ///< command output (tables, ids, streamed stdout)
    std::ostream& err;       ///< errors and the streamed stderr of commands
    int stdin_fd = 0;        ///< `corral cp - SID:PATH` reads here
    std::string socket_env;  ///< value of CORRAL_SOCKET (empty when unset)
    std::string token_env;   ///< value of CORRAL_TOKEN (empty when unset)
};

/// A JSON API reply: HTTP status and the parsed body (null when the body was empty).
struct ApiReply {
    int status = 0;
    nlohmann::json body;

    /// Whether the status is 2xx.
    bool ok() const { return status >= 200 && status < 300; }
};

/// The HTTP client for the address given by --socket/--token or the environment.
Result<HttpClient> make_client(const ParsedArgs& args, const ClientIo& io);

/// Sends a request with an optional JSON body and parses the JSON reply. Transport failures and
/// unparseable 2xx bodies are Errors; 4xx/5xx replies are returned for report_api_error.
Result<ApiReply> call_api(const HttpClient& client, const std::string& method,
                          const std::string& target, const nlohmann::json* body = nullptr);

/// The message of an API error body {"error": {"code", "message"}}, or a fallback naming the
/// status.
std::string api_error_message(int status, const nlohmann::json& body);

/// Prints "corral: <message>" for a failed reply and returns kNotFound for 404, else kApiError.
int report_api_error(const ApiReply& reply, std::ostream& err);

/// Prints "corral: <error>" for a transport failure and returns kUnreachable.
int report_transport_error(const Error& error, std::ostream& err);

/// Prints "corral: <usage error>" and returns kUsage.
int report_usage_error(const Error& error, std::ostream& err);

/// 0 when `reply` is a 2xx reply; otherwise reports the transport or API error on `err` and returns
/// its exit code. Usage: `if (int code = failure_code(reply, io.err)) return code;`
int failure_code(const Result<ApiReply>& reply, std::ostream& err);

/// A subcommand's parsed words and the client for the daemon address they (or the environment)
/// name.
struct PreparedCommand {
    ParsedArgs args;
    HttpClient client;
};

/// Parses `args` against `spec` and resolves the daemon address; errors are usage errors.
Result<PreparedCommand> prepare_command(const std::vector<std::string>& args, const ArgsSpec& spec,
                                        const ClientIo& io);

/// "/v1/sessions/<sid>" with the id percent-encoded.
std::string session_path(const std::string& sid);

}  // namespace corral::cli
