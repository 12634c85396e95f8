// Daemon-level endpoints: health, the policy catalogue, policy validation.

#include <dirent.h>

#include <algorithm>

#include "isolation/launch_worker.hpp"
#include "policies/compiled/compiled_presets.hpp"
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

/// The value of finished off-loop work; 503 when shutdown interrupted the wait.
template <class T>
T off_loop_result(std::optional<T> value) {
    if (!value) throw ApiFailure({503, "shutting_down", "corrald is shutting down", nullptr});
    return std::move(*value);
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
    // Where forked launches and holders come from (issue 18): corrald's own small program, or a
    // fork of corrald where it could not be executed (a memfd that may not run, an LSM, fewer
    // capabilities), or corrald's worker when there is no zygote. Not a layer of its own, but an
    // operator who confines corrald with an LSM needs to see which program its children run.
    const LaunchWorker* worker = LaunchWorker::shared();
    layers["launchZygote"] = worker != nullptr ? worker->zygote_kind() : "none";
    // corrald --prepare: each pool's size, what is ready and what is being prepared.
    nlohmann::json prepared = nlohmann::json::object();
    for (const auto& [name, pool] : sessions_.prepared_pools())
        prepared[name] = {
            {"target", pool.target}, {"ready", pool.ready}, {"preparing", pool.preparing}};
    nlohmann::json body = {
        {"status", "ok"},
        {"version", CORRAL_VERSION},
        {"instance", options_.instance},
        {"cgroup", std::move(cgroup)},
        {"layers", std::move(layers)},
        {"sessions", sessions_.session_count()},
        {"prepared", std::move(prepared)},
        {"portRange",
         {{"first", sessions_.config().port_first}, {"last", sessions_.config().port_last}}}};
    co_await ex.send_json(200, body);
}

asio::awaitable<void> Api::list_policies(Exchange& ex, const RouteParams&, const Caller&) {
    // Reading and parsing the dir's files is off the loop: they are the operator's, but a slow
    // disk or a large file must not stall every other client.
    const std::string dir = options_.policy_dir;
    auto list = [dir] {
        nlohmann::json presets = nlohmann::json::array();
        for (const auto& name : preset_names())
            presets.push_back({{"name", name}, {"source", "preset"}});
        nlohmann::json named = nlohmann::json::array();
        for (const auto& name : policy_files(dir)) {
            auto parsed = load_named_policy(name, dir);
            nlohmann::json entry = {
                {"name", name}, {"source", dir + "/" + name + ".yaml"}, {"valid", parsed.ok()}};
            if (!parsed.ok()) entry["diagnostics"] = diagnostics_json(parsed.diagnostics);
            named.push_back(std::move(entry));
        }
        return nlohmann::json{{"presets", std::move(presets)}, {"policies", std::move(named)}};
    };
    auto listed = co_await off_loop_.run(list);
    const nlohmann::json reply = off_loop_result(std::move(listed));
    co_await ex.send_json(200, reply);
}

asio::awaitable<void> Api::validate_policy(Exchange& ex, const RouteParams&, const Caller&) {
    // The body is the YAML itself (what `corral policy check` reads from a file). Its size is
    // capped before it is read whole, and it is parsed confined (extends reaches presets and the
    // policy dir only) on a worker thread, so no body can read host files or hold the loop.
    const std::string yaml = co_await ex.read_body(kMaxPolicyBytes, "policy");
    const std::string dir = options_.policy_dir;
    auto validate = [yaml, dir] {
        auto parsed = parse_confined_policy(yaml, "<request>", dir);
        if (!parsed.ok()) {
            return nlohmann::json{{"valid", false},
                                  {"diagnostics", diagnostics_json(parsed.diagnostics)},
                                  {"message", parsed.format_errors()}};
        }
        return nlohmann::json{{"valid", true},
                              {"name", parsed.policy->name},
                              {"resolvedYaml", policy_to_yaml(*parsed.policy)}};
    };
    auto validated = co_await off_loop_.run(validate);
    const nlohmann::json reply = off_loop_result(std::move(validated));
    co_await ex.send_json(200, reply);
}

asio::awaitable<Policy> Api::resolve_session_policy(const CreateSessionRequest& request) {
    if (request.policy_yaml.size() > kMaxPolicyBytes)
        throw ApiFailure({413, "too_large",
                          "field `policyYaml` is " + std::to_string(request.policy_yaml.size()) +
                              " bytes, more than the limit of " + std::to_string(kMaxPolicyBytes) +
                              " (1 MiB)",
                          nullptr});
    const std::string yaml = request.policy_yaml;
    const std::string name = request.policy.empty() ? "default" : request.policy;
    const std::string dir = options_.policy_dir;
    // A preset comes compiled (policies/compiled/; equal to what the parser makes of its text,
    // unit_compiled_presets): ~0.5 ms of yaml-cpp less on every creation of a preset, which is
    // most of what taking a prepared session costs (issue 18). A policy-dir file still comes first.
    // When none can (an fstatat per file name it could have finds nothing), the preset is taken
    // here on the loop: the hop to the worker pool and back (a futex wake there, an epoll wake
    // back) was ~125 us of a ~570 us creation from a prepared session, to copy a compiled Policy.
    // Reading a file or parsing YAML stays off the loop: a slow disk or a large policy must not
    // stall it.
    if (yaml.empty()) {
        if (auto preset = unshadowed_compiled_preset(name, dir)) co_return std::move(*preset);
    }
    auto resolve = [yaml, name, dir] {
        return yaml.empty() ? load_named_policy_compiled(name, dir)
                            : parse_confined_policy(yaml, "<policyYaml>", dir);
    };
    auto resolved = co_await off_loop_.run(resolve);
    PolicyParseResult parsed = off_loop_result(std::move(resolved));
    if (!parsed.ok()) throw ApiFailure(policy_error(parsed.diagnostics));
    co_return std::move(*parsed.policy);
}

}  // namespace corral::daemon
