#include "supervisor/cli/run_options.hpp"

#include "policies/units.hpp"

namespace corral::cli {

const char* run_usage() {
    return "usage: corral run [--policy FILE|NAME] [--timeout DUR] [--report FILE|-] [--cwd DIR]\n"
           "                  [--] CMD ARGS...\n"
           "  --policy   a policy file or preset name (default: default)\n"
           "  --timeout  end the whole session after DUR (e.g. 30s, 10m); status timeout\n"
           "  --report   write the exit report as JSON to FILE (- for stderr)\n"
           "  --cwd      working directory of the command (default: the current one, which\n"
           "             the sandbox keeps visible and writable)\n"
           "exit code: the command's own, 128+N if signal N ended it, 124 on timeout,\n"
           "           125 if the sandbox could not be set up (the message names the step)\n";
}

Result<RunOptions> parse_run_options(const std::vector<std::string>& args) {
    RunOptions options;
    size_t i = 0;
    auto value_of = [&](const std::string& flag) -> Result<std::string> {
        if (i + 1 >= args.size()) return plain_error("option " + flag + " needs a value");
        return args[++i];
    };
    for (; i < args.size(); ++i) {
        const std::string& arg = args[i];
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
                return plain_error("--timeout: bad duration `" + *value + "` (expected e.g. 30s, 10m)");
            options.timeout = *duration;
        } else if (arg == "--report") {
            auto value = value_of(arg);
            if (!value) return std::move(value.error());
            options.report = *value;
        } else if (arg == "--cwd") {
            auto value = value_of(arg);
            if (!value) return std::move(value.error());
            options.cwd = *value;
        } else {
            return plain_error("unknown option `" + arg + "`");
        }
    }
    options.command.assign(args.begin() + static_cast<long>(i), args.end());
    if (options.command.empty()) return plain_error("no command given");
    return options;
}

}  // namespace corral::cli
