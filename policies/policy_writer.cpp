// Policy -> YAML: every key, resolved, so `corral policy check` shows exactly what is enforced,
// and parse_policy() of the output gives the same policy back.

#include <yaml-cpp/yaml.h>

#include <charconv>

#include "base/error.hpp"
#include "policies/egress_rules.hpp"
#include "policies/policy_parser.hpp"
#include "policies/units.hpp"

namespace corral {
namespace {

template <class T, class Format>
std::string optional_text(const std::optional<T>& value, Format format, const char* unset) {
    return value ? format(*value) : unset;
}

std::string count_text(uint64_t value) {
    return std::to_string(value);
}

// The shortest text that reads back as the same double.
std::string cpu_text(double value) {
    char buffer[64];
    auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value);
    return ec == std::errc() ? std::string(buffer, end) : std::to_string(value);
}

std::string errno_text(int value) {
    std::string name = errno_name(value);
    return name == "E" + std::to_string(value) ? std::to_string(value) : name;
}

void emit_list(YAML::Emitter& out, const char* key, const std::vector<std::string>& items) {
    out << YAML::Key << key << YAML::Value << YAML::Flow << YAML::BeginSeq;
    for (const auto& item : items) out << item;
    out << YAML::EndSeq;
}

void emit_user(YAML::Emitter& out, const UserSpec& user) {
    out << YAML::Key << "user" << YAML::Value;
    if (user.inherit) {
        out << "inherit";
        return;
    }
    out << YAML::Flow << YAML::BeginMap << YAML::Key << "uid" << YAML::Value << user.uid
        << YAML::Key << "gid" << YAML::Value << user.gid << YAML::Key << "groups" << YAML::Value
        << YAML::Flow << YAML::BeginSeq;
    for (gid_t group : user.groups) out << group;
    out << YAML::EndSeq << YAML::EndMap;
}

void emit_env(YAML::Emitter& out, const EnvSpec& env) {
    out << YAML::Key << "env" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "clear" << YAML::Value << env.clear;
    out << YAML::Key << "set" << YAML::Value << YAML::BeginMap;
    // Always quoted: a value like `yes`, `~` or `0755` must come back as the same string.
    for (const auto& [name, value] : env.set)
        out << YAML::Key << name << YAML::Value << YAML::DoubleQuoted << value;
    out << YAML::EndMap;
    emit_list(out, "pass", env.pass);
    out << YAML::EndMap;
}

void emit_limits(YAML::Emitter& out, const Limits& limits) {
    auto size = [](uint64_t v) { return format_size(v); };
    out << YAML::Key << "limits" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "memory" << YAML::Value << optional_text(limits.memory, size, "unlimited");
    out << YAML::Key << "swap" << YAML::Value << optional_text(limits.swap, size, "unlimited");
    out << YAML::Key << "pids" << YAML::Value
        << optional_text(limits.pids, count_text, "unlimited");
    out << YAML::Key << "cpu" << YAML::Value << optional_text(limits.cpu, cpu_text, "unlimited");
    out << YAML::Key << "io_weight" << YAML::Value
        << optional_text(limits.io_weight, count_text, "unlimited");
    out << YAML::Key << "open_files" << YAML::Value
        << optional_text(limits.open_files, count_text, "unlimited");
    out << YAML::Key << "core" << YAML::Value << optional_text(limits.core, size, "unlimited");
    out << YAML::Key << "file_size" << YAML::Value
        << optional_text(limits.file_size, size, "unlimited");
    out << YAML::Key << "processes" << YAML::Value
        << optional_text(limits.processes, count_text, "unlimited");
    out << YAML::Key << "stack" << YAML::Value << optional_text(limits.stack, size, "unlimited");
    out << YAML::Key << "output" << YAML::Value << format_size(limits.output);
    out << YAML::Key << "oom_group" << YAML::Value << limits.oom_group;
    out << YAML::Key << "accounting" << YAML::Value << limits.accounting;
    out << YAML::EndMap;
}

void emit_timeouts(YAML::Emitter& out, const Timeouts& timeouts) {
    auto duration = [](Millis v) { return format_duration(v); };
    out << YAML::Key << "timeouts" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "command" << YAML::Value
        << optional_text(timeouts.command, duration, "none");
    out << YAML::Key << "session" << YAML::Value
        << optional_text(timeouts.session, duration, "none");
    out << YAML::Key << "idle" << YAML::Value << optional_text(timeouts.idle, duration, "none");
    out << YAML::Key << "grace" << YAML::Value << format_duration(timeouts.grace);
    out << YAML::EndMap;
}

void emit_namespaces(YAML::Emitter& out, const NamespaceSpec& ns) {
    out << YAML::Key << "namespaces" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "pid" << YAML::Value << ns.pid;
    out << YAML::Key << "mount" << YAML::Value << ns.mount;
    out << YAML::Key << "ipc" << YAML::Value << ns.ipc;
    out << YAML::Key << "uts" << YAML::Value << ns.uts;
    out << YAML::Key << "user" << YAML::Value << ns.user;
    out << YAML::Key << "network" << YAML::Value
        << (ns.network == NetworkMode::host ? "host" : "isolated");
    out << YAML::EndMap;
}

void emit_filesystem(YAML::Emitter& out, const FilesystemSpec& fs) {
    out << YAML::Key << "filesystem" << YAML::Value << YAML::BeginMap;
    emit_list(out, "read_only", fs.read_only);
    emit_list(out, "read_write", fs.read_write);
    emit_list(out, "hidden", fs.hidden);
    out << YAML::Key << "tmpfs" << YAML::Value << YAML::Flow << YAML::BeginMap;
    for (const auto& [path, size] : fs.tmpfs)
        out << YAML::Key << path << YAML::Value << format_size(size);
    out << YAML::EndMap;
    out << YAML::Key << "hostname" << YAML::Value << fs.hostname;
    out << YAML::EndMap;
}

void emit_seccomp(YAML::Emitter& out, const SeccompSpec& seccomp) {
    const char* action = seccomp.action == SeccompAction::errno_code     ? "errno"
                         : seccomp.action == SeccompAction::kill_process ? "kill-process"
                                                                         : "log";
    out << YAML::Key << "seccomp" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "preset" << YAML::Value << seccomp.preset;
    emit_list(out, "deny", seccomp.deny);
    emit_list(out, "allow", seccomp.allow);
    out << YAML::Key << "action" << YAML::Value << action;
    out << YAML::Key << "errno" << YAML::Value << errno_text(seccomp.errno_value);
    out << YAML::Key << "ptrace" << YAML::Value << (seccomp.ptrace_own ? "own" : "none");
    out << YAML::EndMap;
}

std::string provenance(const Policy& policy) {
    std::string text = "Resolved policy `" + policy.name + "`";
    for (const auto& parent : policy.extends_chain) text += " <- " + parent;
    return text + ". Every key is shown; no_new_privs is always on.";
}

}  // namespace

std::string policy_to_yaml(const Policy& policy) {
    YAML::Emitter out;
    out << YAML::Comment(provenance(policy)) << YAML::Newline;
    out << YAML::BeginMap;
    out << YAML::Key << "name" << YAML::Value << policy.name;
    emit_user(out, policy.user);
    emit_env(out, policy.env);
    out << YAML::Key << "workdir" << YAML::Value << YAML::BeginMap << YAML::Key << "size"
        << YAML::Value
        << optional_text(
               policy.workdir.size, [](uint64_t v) { return format_size(v); }, "none")
        << YAML::Key << "mount" << YAML::Value << policy.workdir.mount << YAML::Key << "from"
        << YAML::Value << (policy.workdir.from == WorkdirFrom::copy ? "copy" : "cwd");
    emit_list(out, "outputs", policy.workdir.outputs);
    out << YAML::EndMap;
    emit_limits(out, policy.limits);
    emit_timeouts(out, policy.timeouts);
    emit_namespaces(out, policy.namespaces);
    emit_filesystem(out, policy.filesystem);
    out << YAML::Key << "network" << YAML::Value << YAML::BeginMap << YAML::Key << "ports"
        << YAML::Value << policy.network.ports;
    emit_list(out, "allow", policy.network.allow);
    const EgressSpec& egress = policy.network.egress;
    out << YAML::Key << "egress" << YAML::Value << YAML::BeginMap << YAML::Key << "mode"
        << YAML::Value << std::string(to_string(egress.mode));
    emit_list(out, "allowedHosts", egress.allowed_hosts);
    emit_list(out, "allowedCIDRs", egress.allowed_cidrs);
    emit_list(out, "deniedCIDRs", egress.denied_cidrs);
    out << YAML::EndMap;
    out << YAML::EndMap;
    emit_seccomp(out, policy.seccomp);
    out << YAML::Key << "capabilities" << YAML::Value << YAML::BeginMap << YAML::Key << "inherit"
        << YAML::Value << policy.capabilities.inherit;
    emit_list(out, "keep", policy.capabilities.keep);
    out << YAML::EndMap;
    out << YAML::Key << "landlock" << YAML::Value << YAML::BeginMap;
    emit_list(out, "read", policy.landlock.read);
    emit_list(out, "write", policy.landlock.write);
    out << YAML::EndMap;
    out << YAML::Key << "enforcement" << YAML::Value
        << (policy.enforcement == Enforcement::strict ? "strict" : "best-effort");
    if (!policy.shell.empty()) out << YAML::Key << "shell" << YAML::Value << policy.shell;
    out << YAML::EndMap;
    return std::string(out.c_str()) + "\n";
}

}  // namespace corral
