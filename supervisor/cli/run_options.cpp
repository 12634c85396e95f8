#include "supervisor/cli/run_options.hpp"

#include <algorithm>
#include <cctype>
#include <cstring>

#include "policies/units.hpp"

namespace corral::cli {
namespace {

bool valid_env_name(const std::string& name) {
    if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
    return std::all_of(name.begin(), name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
    });
}

Result<EnvArgument> parse_env_argument(const std::string& text) {
    EnvArgument argument;
    const size_t eq = text.find('=');
    argument.name = text.substr(0, eq);
    if (eq != std::string::npos) argument.value = text.substr(eq + 1);
    if (!valid_env_name(argument.name))
        return plain_error("--env `" + text +
                           "`: expected NAME=VALUE or NAME, with NAME made of letters, digits and "
                           "`_` (not starting with a digit)");
    return argument;
}

}  // namespace

const char* run_usage() {
    return "usage: corral run [--policy FILE|NAME] [--timeout DUR] [--report FILE|-] [--cwd DIR]\n"
           "                  [--env NAME=VALUE|NAME]... [--] CMD ARGS...\n"
           "  --policy   a policy file or preset name (default: default)\n"
           "  --timeout  end the whole session after DUR (e.g. 30s, 10m); status timeout\n"
           "  --report   write the exit report as JSON to FILE (- for stderr); FILE is opened\n"
           "             before the command starts and must be a regular file or not exist\n"
           "  --cwd      the job's directory (default: the current one); relative to the\n"
           "             current one, reached without following symbolic links. The policy's\n"
           "             workdir.from says what the job gets of it:\n"
           "             `cwd` binds it writable at its own path, `copy` copies it into a\n"
           "             tmpfs at workdir.mount and copies workdir.outputs back\n"
           "  --env      set NAME to VALUE in the command's environment, or pass the caller's\n"
           "             NAME (unset inside when the caller has none); repeatable, overrides\n"
           "             the policy's env\n"
           "exit code: the command's own, 128+N if signal N ended it, 124 on timeout,\n"
           "           127 if the program was not found, 126 if it could not be executed,\n"
           "           125 if the sandbox could not be set up (the message names the step)\n";
}

Result<RunOptions> parse_run_options(const std::vector<std::string>& args) {
    RunOptions options;
    size_t i = 0;
    // `--policy=none` as well as `--policy none` (stop 44's operator probe: the first was an
    // unknown option, as no other CLI a CI engineer uses would have it).
    std::optional<std::string> inline_value;
    auto value_of = [&](const std::string& flag) -> Result<std::string> {
        if (inline_value) return *inline_value;
        if (i + 1 >= args.size()) return plain_error("option " + flag + " needs a value");
        return args[++i];
    };
    for (; i < args.size(); ++i) {
        std::string arg = args[i];
        inline_value.reset();
        if (const size_t eq = arg.find('='); arg.starts_with("--") && eq != std::string::npos) {
            inline_value = arg.substr(eq + 1);
            arg.resize(eq);
        }
        if (arg == "--") {
            ++i;
            break;
        }
        if (arg.empty() || arg[0] != '-') break;
        if (arg == "--policy" || arg == "-p") {
            auto value = value_of(arg);
            if (!value) return std::move(value.error());
            options.policy = *value;
        } else if (arg == "--timeout" || arg == "-t") {
            auto value = value_of(arg);
            if (!value) return std::move(value.error());
            auto duration = parse_duration(*value);
            if (!duration || duration->count() <= 0)
                return plain_error("--timeout: bad duration `" + *value +
                                   "` (expected e.g. 30s, 10m)");
            options.timeout = *duration;
        } else if (arg == "--report") {
            auto value = value_of(arg);
            if (!value) return std::move(value.error());
            if (value->empty()) return plain_error("--report: expected a file name or `-`");
            options.report = *value;
        } else if (arg == "--cwd") {
            auto value = value_of(arg);
            if (!value) return std::move(value.error());
            if (value->empty()) return plain_error("--cwd: expected a directory");
            options.cwd = *value;
        } else if (arg == "--env" || arg == "-e") {
            auto value = value_of(arg);
            if (!value) return std::move(value.error());
            auto env = parse_env_argument(*value);
            if (!env) return std::move(env.error());
            options.env.push_back(std::move(*env));
        } else {
            return plain_error("unknown option `" + arg + "`");
        }
    }
    options.command.assign(args.begin() + static_cast<long>(i), args.end());
    if (options.command.empty()) return plain_error("no command given");
    return options;
}

void resolve_env_arguments(const std::vector<EnvArgument>& env, char* const* caller,
                           std::map<std::string, std::string>& set,
                           std::vector<std::string>& unset) {
    auto caller_value = [&](const std::string& name) -> std::optional<std::string> {
        for (char* const* entry = caller; entry && *entry; ++entry) {
            if (std::strncmp(*entry, name.c_str(), name.size()) == 0 &&
                (*entry)[name.size()] == '=')
                return std::string(*entry + name.size() + 1);
        }
        return std::nullopt;
    };
    for (const EnvArgument& argument : env) {
        std::optional<std::string> value =
            argument.value ? argument.value : caller_value(argument.name);
        std::erase(unset, argument.name);
        if (value) {
            set[argument.name] = *value;
        } else {
            set.erase(argument.name);
            unset.push_back(argument.name);
        }
    }
}

}  // namespace corral::cli
