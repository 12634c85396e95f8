#pragma once
// Argument parsing for the client subcommands: options (with values, repeatable, or flags) anywhere
// among the positionals, `--opt=value` or `--opt value`, and a command tail for exec/spawn that
// starts at `--` or at the first non-option word after the fixed positionals. Errors name the
// problem.

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/error.hpp"

namespace corral::cli {

/// One option a subcommand accepts.
struct OptionSpec {
    std::string name;          ///< with dashes: "--policy", "-f"
    bool takes_value = false;  ///< false: a flag
    std::string alias;         ///< optional second spelling ("-f" for "--follow")
};

/// How a subcommand's words are split.
struct ArgsSpec {
    std::string command;              ///< "exec", "session create": used in error messages
    std::vector<OptionSpec> options;  ///< accepted options (--socket, --token, --json are added)
    size_t min_positionals = 0;       ///< required positional words
    size_t max_positionals = 0;       ///< allowed positional words before the command tail
    std::vector<std::string> positional_names;  ///< "SID", "PROC": named in "missing SID" errors
    bool takes_command = false;  ///< exec/spawn: the rest after the positionals is a command
    std::string synopsis;        ///< "corral exec SID [options] -- CMD ARGS...", shown in errors
};

/// The parsed words of one subcommand.
struct ParsedArgs {
    std::vector<std::string> positionals;
    std::map<std::string, std::vector<std::string>> values;  ///< option name -> values, in order
    std::map<std::string, bool> flags;                       ///< flag name -> present
    std::vector<std::string> command;                        ///< the command tail (exec/spawn)

    /// The last value of `name`, if given.
    std::optional<std::string> value(const std::string& name) const;
    /// All values of a repeatable option.
    std::vector<std::string> all(const std::string& name) const;
    /// Whether a flag was given.
    bool flag(const std::string& name) const;
};

/// Parses `args` (the words after the subcommand name) against `spec`. The error message names
/// the problem and ends with the synopsis.
Result<ParsedArgs> parse_args(const std::vector<std::string>& args, const ArgsSpec& spec);

/// Splits a command family's words into its verb ("create" in `session --socket S create --id x`)
/// and the remaining words; connection options may come before the verb. Empty verb when there is
/// none.
std::pair<std::string, std::vector<std::string>> split_verb(const std::vector<std::string>& args);

/// Parses repeated "K=V" words into pairs; an error names the word without "=" or with an empty
/// key.
Result<std::map<std::string, std::string>> parse_env_assignments(
    const std::vector<std::string>& words);

/// The number of a signal given as "TERM", "SIGTERM", "term" or "15"; nullopt when unknown.
std::optional<int> parse_signal(const std::string& text);

/// Parses a duration option ("30s", "1m30s", "250ms") into milliseconds.
Result<long long> parse_duration_ms(const std::string& option, const std::string& text);

}  // namespace corral::cli
