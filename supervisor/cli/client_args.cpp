#include "supervisor/cli/client_args.hpp"

#include <signal.h>
#include <string.h>

#include <algorithm>
#include <cctype>

#include "policies/units.hpp"

namespace corral::cli {
namespace {

/// Options every client command accepts: where corrald is and which token to present.
const std::vector<OptionSpec>& connection_options() {
    static const std::vector<OptionSpec> options = {{"--socket", true, ""}, {"--token", true, ""}};
    return options;
}

const OptionSpec* find_option(const ArgsSpec& spec, const std::string& name) {
    for (const auto* list : {&spec.options, &connection_options()}) {
        for (const auto& option : *list) {
            if (option.name == name || (!option.alias.empty() && option.alias == name))
                return &option;
        }
    }
    return nullptr;
}

Error usage_error(const ArgsSpec& spec, const std::string& problem) {
    std::string message = spec.command + ": " + problem;
    if (!spec.synopsis.empty()) message += "\nusage: " + spec.synopsis;
    return plain_error(std::move(message));
}

bool looks_like_option(const std::string& word) {
    return word.size() > 1 && word[0] == '-';
}

}  // namespace

std::optional<std::string> ParsedArgs::value(const std::string& name) const {
    auto it = values.find(name);
    if (it == values.end() || it->second.empty()) return std::nullopt;
    return it->second.back();
}

std::vector<std::string> ParsedArgs::all(const std::string& name) const {
    auto it = values.find(name);
    return it == values.end() ? std::vector<std::string>{} : it->second;
}

bool ParsedArgs::flag(const std::string& name) const {
    auto it = flags.find(name);
    return it != flags.end() && it->second;
}

Result<ParsedArgs> parse_args(const std::vector<std::string>& args, const ArgsSpec& spec) {
    ParsedArgs parsed;
    size_t i = 0;
    for (; i < args.size(); ++i) {
        const std::string& word = args[i];
        if (word == "--") {
            ++i;
            break;
        }
        if (!looks_like_option(word)) {
            if (spec.takes_command && parsed.positionals.size() == spec.max_positionals) break;
            if (parsed.positionals.size() == spec.max_positionals) {
                return usage_error(spec, "unexpected argument `" + word + "`");
            }
            parsed.positionals.push_back(word);
            continue;
        }
        std::string name = word;
        std::optional<std::string> inline_value;
        if (size_t eq = word.find('='); eq != std::string::npos && word.rfind("--", 0) == 0) {
            name = word.substr(0, eq);
            inline_value = word.substr(eq + 1);
        }
        const OptionSpec* option = find_option(spec, name);
        if (option == nullptr) return usage_error(spec, "unknown option `" + name + "`");
        if (!option->takes_value) {
            if (inline_value) return usage_error(spec, option->name + " takes no value");
            parsed.flags[option->name] = true;
            continue;
        }
        if (!inline_value) {
            if (i + 1 >= args.size()) return usage_error(spec, option->name + " needs a value");
            inline_value = args[++i];
        }
        parsed.values[option->name].push_back(*inline_value);
    }
    if (spec.takes_command) {
        parsed.command.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
    } else if (i < args.size()) {
        return usage_error(spec, "unexpected argument `" + args[i] + "` after --");
    }
    if (parsed.positionals.size() < spec.min_positionals) {
        size_t missing = parsed.positionals.size();
        std::string what =
            missing < spec.positional_names.size() ? spec.positional_names[missing] : "argument";
        return usage_error(spec, "missing " + what);
    }
    if (spec.takes_command && parsed.command.empty()) return usage_error(spec, "missing command");
    return parsed;
}

std::pair<std::string, std::vector<std::string>> split_verb(const std::vector<std::string>& args) {
    for (size_t i = 0; i < args.size(); ++i) {
        if (args[i] == "--socket" || args[i] == "--token") {
            ++i;  // skip its value
            continue;
        }
        if (looks_like_option(args[i])) continue;
        std::vector<std::string> rest = args;
        rest.erase(rest.begin() + static_cast<std::ptrdiff_t>(i));
        return {args[i], std::move(rest)};
    }
    return {"", args};
}

Result<std::map<std::string, std::string>> parse_env_assignments(
    const std::vector<std::string>& words) {
    std::map<std::string, std::string> env;
    for (const auto& word : words) {
        size_t eq = word.find('=');
        if (eq == std::string::npos || eq == 0) {
            return plain_error("--env `" + word + "`: expected NAME=VALUE");
        }
        env[word.substr(0, eq)] = word.substr(eq + 1);
    }
    return env;
}

std::optional<int> parse_signal(const std::string& text) {
    if (text.empty()) return std::nullopt;
    if (std::all_of(text.begin(), text.end(), ::isdigit)) {
        if (text.size() > 3) return std::nullopt;
        int number = std::stoi(text);
        if (number >= 1 && number < NSIG) return number;
        return std::nullopt;
    }
    std::string name = text;
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return std::toupper(c); });
    if (name.rfind("SIG", 0) == 0) name.erase(0, 3);
    for (int number = 1; number < NSIG; ++number) {
        const char* abbrev =
            sigabbrev_np(number);  // "TERM" for SIGTERM; null for real-time signals
        if (abbrev != nullptr && name == abbrev) return number;
    }
    return std::nullopt;
}

Result<long long> parse_duration_ms(const std::string& option, const std::string& text) {
    auto duration = parse_duration(text);
    if (!duration)
        return plain_error(option + ": bad duration `" + text +
                           "` (expected e.g. 30s, 10m, 250ms)");
    return static_cast<long long>(duration->count());
}

}  // namespace corral::cli
