#pragma once
// Command-line options of `corral run`, parsed without side effects (unit-tested).

#include <optional>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "policies/policy.hpp"

namespace corral::cli {

/// `corral run [--policy FILE|NAME] [--timeout DUR] [--report FILE|-] [--cwd DIR] [--] CMD ARGS...`
struct RunOptions {
    std::string policy = "default";      ///< preset name or policy file
    std::optional<Millis> timeout;       ///< overrides the policy's timeouts.command
    std::optional<std::string> report;   ///< file path, or "-" for stderr
    std::optional<std::string> cwd;      ///< working directory inside the sandbox (default: ours)
    std::vector<std::string> command;    ///< CMD ARGS...
};

/// Parses the arguments after "run". Errors name the offending option.
Result<RunOptions> parse_run_options(const std::vector<std::string>& args);

/// Help text of `corral run`.
const char* run_usage();

}  // namespace corral::cli
