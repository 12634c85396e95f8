#include "supervisor/cli/client_commands.hpp"

#include <cstdlib>
#include <iostream>

#include "supervisor/cli/client_subcommands.hpp"

namespace corral::cli {
namespace {

using Handler = int (*)(const std::vector<std::string>&, ClientIo&);

struct ClientCommand {
    const char* name;
    Handler handler;
};

constexpr ClientCommand kClientCommands[] = {
    {"session", run_session_command}, {"exec", run_exec_command}, {"spawn", run_spawn_command},
    {"ps", run_ps_command},           {"logs", run_logs_command}, {"kill", run_kill_command},
    {"cp", run_cp_command},           {"port", run_port_command}, {"shells", run_shells_command},
    {"shell", run_shell_command},
    {"shell-context", run_shells_command},
};

const ClientCommand* find_command(const std::string& word) {
    for (const auto& command : kClientCommands) {
        if (word == command.name) return &command;
    }
    return nullptr;
}

std::string env_or_empty(const char* name) {
    const char* value = std::getenv(name);
    return value != nullptr ? value : "";
}

}  // namespace

bool is_client_command(const std::string& word) {
    return find_command(word) != nullptr;
}

int run_client_command(const std::vector<std::string>& args, ClientIo& io) {
    // `corral --socket S ps s1` works too: connection options may precede the command word.
    auto [word, rest] = split_verb(args);
    if (args.empty() || (args[0] != word && args[0] != "--socket" && args[0] != "--token"))
        return -1;
    const ClientCommand* command = find_command(word);
    if (command == nullptr) return -1;
    int code = command->handler(rest, io);
    io.out.flush();
    io.err.flush();
    return code;
}

int run_client_command(const std::vector<std::string>& args) {
    ClientIo io{std::cout, std::cerr, 0, env_or_empty("CORRAL_SOCKET"),
                env_or_empty("CORRAL_TOKEN")};
    return run_client_command(args, io);
}

std::string client_commands_usage() {
    return R"(Client commands (talk to corrald):
  corral session create [--policy NAME|FILE] [--id ID] [--env K=V]... [--cwd DIR]
                        [--command-timeout 10m] [--json]     prints the session id (tokens with --json)
  corral session ls [--json]
  corral session show SID [--json]
  corral session rm SID [--json]                             ends the session, kills everything in it
  corral exec SID [--shell CTX] [--cwd DIR] [--env K=V]... [--timeout 30s] -- CMD ARGS...
                                 streams the command's output; exits with its code (128+N for signal N)
                                 --shell: in shell context CTX (cd, export, functions carry over);
                                 one word after -- is a shell line: -- 'cd repo && make'
  corral shells create SID [--id CTX] [--cwd DIR] [--env K=V]... | shells ls SID
  corral shells show SID CTX | shells rm SID CTX             persistent shell contexts
  corral spawn SID [--cwd DIR] [--env K=V]... [--timeout 30s] [--json] -- CMD ARGS...
                                 starts a background process, prints its id
  corral ps SID [--json]
  corral logs SID PROC [-f] [--stream stdout|stderr] [--offset N]
                                 -f follows the output until the process exits
  corral kill SID PROC [--signal TERM] [--tree] [--force]
                                 without --signal: SIGTERM to the process and all its descendants,
                                 the grace period, then kill (--force: kill at once)
  corral kill SID --all          kills every running process of the session
  corral cp LOCAL SID:PATH | corral cp SID:PATH LOCAL     streamed; LOCAL may be - (stdin/stdout)
  corral port lease SID | port ls SID | port rm SID PORT | port endpoint SID PORT [--ws]
  corral port wait SID PORT [--timeout 30s]
  corral shell SID [--command CMD] [--cwd DIR]
                                 interactive terminal (login shell on a pty); exits with its code

  Every client command takes --socket PATH|tcp://127.0.0.1:PORT (default $CORRAL_SOCKET, else
  /run/corral/corrald.sock) and --token TOKEN (default $CORRAL_TOKEN; required over TCP).

Exit codes of the client commands:
  0 success   1 corrald refused the request   2 bad arguments   3 cannot reach corrald or bad response
  4 not found (session, process, file, port)  5 local file error (cp, --policy FILE)
  exec: the command's own code; 128+N if killed by signal N; 124 if it timed out;
        125 if corral itself failed (any of the errors above)
)";
}

}  // namespace corral::cli
