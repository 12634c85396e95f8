#pragma once
// The client subcommands of `corral`, which talk to corrald over its API:
//   session create|ls|show|rm, exec, spawn, ps, logs, kill, cp, port lease|ls|rm|endpoint.
// The lead's dispatcher (commands.cpp) calls run_client_command for any word it does not handle.

#include <string>
#include <vector>

#include "supervisor/cli/client_api.hpp"

namespace corral::cli {

/// Runs a client subcommand (session, exec, spawn, ps, logs, kill, cp, port); returns the exit
/// code, or -1 if `args[0]` is not a client command. Prints to std::cout/std::cerr and reads
/// CORRAL_SOCKET and CORRAL_TOKEN from the environment.
int run_client_command(const std::vector<std::string>& args);

/// The same, printing to and reading from `io` (tests pass string streams and an explicit
/// environment).
int run_client_command(const std::vector<std::string>& args, ClientIo& io);

/// Whether `word` names a client subcommand.
bool is_client_command(const std::string& word);

/// The help text of the client subcommands, with their options and exit codes.
std::string client_commands_usage();

}  // namespace corral::cli
