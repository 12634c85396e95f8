#pragma once
// The `corral` command line: dispatch to subcommands. Each subcommand lives in its own file.

#include <optional>

#include "policies/policy.hpp"

namespace corral::cli {

/// Entry point of the `corral` binary; returns the process exit code.
int main(int argc, char** argv);

/// The bound of a `corral run`: the shorter of the command's (`--timeout`, else
/// timeouts.command) and the session's lifetime (timeouts.session); 0 = none.
Millis run_timeout(std::optional<Millis> flag, const Timeouts& timeouts);

}  // namespace corral::cli
