#pragma once
// One entry point per client subcommand family; each gets the words after its name. Internal to the
// client: run_client_command (client_commands.hpp) is the public door.

#include <string>
#include <vector>

#include "supervisor/cli/client_api.hpp"

namespace corral::cli {

/// `corral session create|ls|show|rm ...` (client_session.cpp).
int run_session_command(const std::vector<std::string>& args, ClientIo& io);
/// `corral exec SID [options] -- CMD ARGS...` (client_exec.cpp).
int run_exec_command(const std::vector<std::string>& args, ClientIo& io);
/// `corral spawn SID [options] -- CMD ARGS...` (client_exec.cpp).
int run_spawn_command(const std::vector<std::string>& args, ClientIo& io);
/// `corral ps SID` (client_process.cpp).
int run_ps_command(const std::vector<std::string>& args, ClientIo& io);
/// `corral logs SID PROC [-f] [--stream stdout|stderr]` (client_process.cpp).
int run_logs_command(const std::vector<std::string>& args, ClientIo& io);
/// `corral kill SID PROC [--signal SIG] [--force]` / `corral kill SID --all` (client_process.cpp).
int run_kill_command(const std::vector<std::string>& args, ClientIo& io);
/// `corral shells create|ls|show|rm ...` (client_shell.cpp).
int run_shells_command(const std::vector<std::string>& args, ClientIo& io);
/// `corral cp LOCAL SID:PATH` / `corral cp SID:PATH LOCAL` (client_cp.cpp).
int run_cp_command(const std::vector<std::string>& args, ClientIo& io);
/// `corral port lease|ls|rm|endpoint ...` (client_port.cpp).
int run_port_command(const std::vector<std::string>& args, ClientIo& io);
/// `corral shell SID [--command CMD] [--cwd DIR]`: an interactive terminal (client_shell.cpp).
int run_shell_command(const std::vector<std::string>& args, ClientIo& io);

}  // namespace corral::cli
