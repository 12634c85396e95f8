#pragma once
// The `corral` command line: dispatch to subcommands. Each subcommand lives in its own file.

namespace corral::cli {

/// Entry point of the `corral` binary; returns the process exit code.
int main(int argc, char** argv);

}  // namespace corral::cli
