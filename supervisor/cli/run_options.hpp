#pragma once
// Command-line options of `corral run`, parsed without side effects (unit-tested).

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "policies/policy.hpp"

namespace corral::cli {

/// One `--env` argument: `K=V` sets K to V; a bare `K` passes the caller's own K (or, when the
/// caller has none, makes sure the job has none either).
struct EnvArgument {
    std::string name;
    std::optional<std::string> value;  ///< nullopt: taken from the caller's environment
};

/// `corral run [--policy FILE|NAME] [--timeout DUR] [--report FILE|-] [--cwd DIR]
/// [--env K[=V]]... [--] CMD ARGS...`
struct RunOptions {
    std::string policy = "default";     ///< preset name or policy file
    std::optional<Millis> timeout;      ///< overrides the policy's timeouts.command
    std::optional<std::string> report;  ///< file path, or "-" for stderr
    std::optional<std::string> cwd;     ///< the job's directory, as given (default: ours)
    std::vector<EnvArgument> env;       ///< in command-line order; a later one wins
    std::vector<std::string> command;   ///< CMD ARGS...
};

/// Parses the arguments after "run". Errors name the offending option and value.
Result<RunOptions> parse_run_options(const std::vector<std::string>& args);

/// The `--env` arguments applied to the caller's environment `caller` (a null-terminated environ
/// array): the overrides to set and the names to remove, for build_environment().
void resolve_env_arguments(const std::vector<EnvArgument>& env, char* const* caller,
                           std::map<std::string, std::string>& set,
                           std::vector<std::string>& unset);

/// Help text of `corral run`.
const char* run_usage();

}  // namespace corral::cli
