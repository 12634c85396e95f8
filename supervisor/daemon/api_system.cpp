// Daemon-level endpoints: health, the policy catalogue, policy validation.

#include <dirent.h>

#include <algorithm>

#include "policies/policy_parser.hpp"
#include "policies/presets.hpp"
#include "supervisor/daemon/api.hpp"
#include "supervisor/reports/report_json.hpp"

namespace corral::daemon {
namespace {

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
    // The probe's cgroup part under "cgroup" (with where sessions live), the enforcement layers
    // (namespaces, seccomp, Landlock, clone-into-cgroup, limits) under "layers".
    nlohmann::json layers = host_probe_to_json(options_.host);
    nlohmann::json cgroup = layers["cgroups"];
    layers.erase("cgroups");
    cgroup["sessions"] = sessions_.sessions_cgroup_path();
    layers["cloneIntoCgroup"] = cgroup.value("cloneIntoCgroup", false);
    layers["limits"] = cgroup.value("limits", nlohmann::json::object());
    nlohmann::json body = {
        {"status", "ok"},
        {"version", CORRAL_VERSION},
        {"instance", options_.instance},
        {"cgroup", std::move(cgroup)},
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
