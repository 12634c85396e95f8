#include "policies/environment.hpp"

#include <algorithm>
#include <cstring>

namespace corral {
namespace {

std::map<std::string, std::string> parse_environ(char* const* environ_array) {
    std::map<std::string, std::string> out;
    for (char* const* entry = environ_array; entry && *entry; ++entry) {
        const char* eq = std::strchr(*entry, '=');
        if (!eq) continue;
        out.emplace(std::string(*entry, static_cast<size_t>(eq - *entry)), std::string(eq + 1));
    }
    return out;
}

}  // namespace

std::vector<std::string> build_environment(const EnvSpec& spec, char* const* caller,
                                           const std::map<std::string, std::string>& overrides,
                                           const std::vector<std::string>& unset) {
    auto inherited = parse_environ(caller);
    std::map<std::string, std::string> env;
    if (!spec.clear) {
        env = std::move(inherited);  // all of it: `pass` has nothing to add
    } else {
        for (const auto& name : spec.pass) {
            if (auto it = inherited.find(name); it != inherited.end()) env[name] = it->second;
        }
    }
    for (const auto& [key, value] : spec.set) env[key] = value;
    for (const auto& [key, value] : overrides) env[key] = value;
    for (const auto& key : unset) env.erase(key);

    std::vector<std::string> out;
    out.reserve(env.size());
    for (const auto& [key, value] : env) {
        std::string& entry = out.emplace_back();
        entry.reserve(key.size() + 1 + value.size());
        entry.append(key).append(1, '=').append(value);
    }
    return out;
}

}  // namespace corral
