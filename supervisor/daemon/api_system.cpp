// Daemon-level endpoints: health, the policy catalogue, policy validation.

#include <dirent.h>

#include <algorithm>

#include "isolation/landlock.hpp"
#include "isolation/launcher.hpp"
#include "isolation/limits.hpp"
#include "isolation/seccomp.hpp"
#include "policies/policy_parser.hpp"
#include "policies/presets.hpp"
#include "supervisor/daemon/api.hpp"

namespace corral::daemon {
namespace {

nlohmann::json cgroup_json(const CgroupHost& host, const std::string& sessions_path) {
    nlohmann::json v1 = nlohmann::json::object();
    for (const auto& [controller, dir] : host.v1_own) v1[controller] = dir;
    return {{"mode", host.layout == CgroupLayout::unified ? "unified" : "hybrid"},
            {"v2Mount", host.v2_mount},
            {"v2Own", host.v2_own},
            {"v2Controllers", host.v2_controllers},
            {"v1", std::move(v1)},
            {"sessions", sessions_path}};
}

nlohmann::json limits_json(const CgroupHost& host) {
    auto backend = make_limit_backend(host);
    nlohmann::json out = {{"backend", backend->name()}};
    const auto support = backend->support();
    for (LimitKind kind :
         {LimitKind::memory, LimitKind::swap, LimitKind::pids, LimitKind::cpu, LimitKind::io}) {
        const auto cap = support.get(kind);
        out[limit_name(kind)] = {{"enforceable", cap.enforceable}, {"detail", cap.detail}};
    }
    return out;
}

/// The *.yaml names in the policy directory, sorted.
std::vector<std::string> policy_files(const std::string& dir) {
    std::vector<std::string> names;
    if (dir.empty()) return names;
    DIR* d = ::opendir(dir.c_str());
    if (!d) return names;
    while (dirent* entry = ::readdir(d)) {
        std::string name = entry->d_name;
        if (name.size() > 5 && name.compare(name.size() - 5, 5, ".yaml") == 0 && name[0] != '.')
            names.push_back(name.substr(0, name.size() - 5));
    }
    ::closedir(d);
    std::sort(names.begin(), names.end());
    return names;
}

nlohmann::json diagnostics_json(const std::vector<PolicyDiagnostic>& diagnostics) {
    return policy_error(diagnostics).diagnostics;
}

}  // namespace

asio::awaitable<void> Api::health(Exchange& ex, const RouteParams&, const Caller&) {
    const auto& host = sessions_.cgroup_host();
    nlohmann::json layers = {
        {"cgroupV2Tracking", true},       {"cloneIntoCgroup", clone_into_cgroup_supported()},
        {"seccomp", seccomp_available()}, {"landlockAbi", landlock_abi_version()},
        {"limits", limits_json(host)},
    };
    nlohmann::json body = {
        {"status", "ok"},
        {"version", CORRAL_VERSION},
        {"instance", options_.instance},
        {"cgroup", cgroup_json(host, sessions_.sessions_cgroup_path())},
        {"layers", std::move(layers)},
        {"sessions", sessions_.list_sessions().size()},
        {"portRange",
         {{"first", sessions_.config().port_first}, {"last", sessions_.config().port_last}}}};
    co_await ex.send_json(200, body);
}

asio::awaitable<void> Api::list_policies(Exchange& ex, const RouteParams&, const Caller&) {
    nlohmann::json presets = nlohmann::json::array();
    for (const auto& name : preset_names())
        presets.push_back({{"name", name}, {"source", "preset"}});
    nlohmann::json named = nlohmann::json::array();
    for (const auto& name : policy_files(options_.policy_dir)) {
        const std::string path = options_.policy_dir + "/" + name + ".yaml";
        auto parsed = parse_policy_file(path);
        nlohmann::json entry = {{"name", name}, {"source", path}, {"valid", parsed.ok()}};
        if (!parsed.ok()) entry["diagnostics"] = diagnostics_json(parsed.diagnostics);
        named.push_back(std::move(entry));
    }
    nlohmann::json reply = {{"presets", std::move(presets)}, {"policies", std::move(named)}};
    co_await ex.send_json(200, reply);
}

asio::awaitable<void> Api::validate_policy(Exchange& ex, const RouteParams&, const Caller&) {
    // The body is the YAML itself (what `corral policy check` reads from a file).
    const std::string yaml = co_await ex.read_body(kJsonBodyLimit);
    auto parsed = parse_policy(yaml, "<request>", options_.policy_dir);
    if (!parsed.ok()) {
        nlohmann::json reply = {{"valid", false},
                                {"diagnostics", diagnostics_json(parsed.diagnostics)},
                                {"message", parsed.format_errors()}};
        co_await ex.send_json(200, reply);
        co_return;
    }
    nlohmann::json reply = {{"valid", true},
                            {"name", parsed.policy->name},
                            {"resolvedYaml", policy_to_yaml(*parsed.policy)}};
    co_await ex.send_json(200, reply);
}

}  // namespace corral::daemon
