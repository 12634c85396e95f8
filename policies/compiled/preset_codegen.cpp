// corral_preset_codegen OUT.cpp: parses every embedded preset with the real parser and writes
// C++ that constructs the same resolved Policy (compiled_presets.hpp says why). Run by the build.
//
// Every struct is taken apart with a structured binding naming all of its fields: a field added
// to policy.hpp makes this file fail to compile until it is written out, so a compiled preset can
// never silently lack a field the parser sets.

#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "policies/compiled/compiled_presets.hpp"
#include "policies/policy_parser.hpp"
#include "policies/presets.hpp"

namespace corral {
namespace {

/// A quoted C++ literal of `s` followed by its length: every byte outside printable ASCII (and
/// `\`, `"`, `?`) as a three-digit octal escape, so any byte string comes out exact.
std::string literal(const std::string& s) {
    std::string out = "\"";
    for (unsigned char c : s) {
        if (c >= 0x20 && c < 0x7f && c != '\\' && c != '"' && c != '?') {
            out += static_cast<char>(c);
        } else {
            char escaped[8];
            std::snprintf(escaped, sizeof escaped, "\\%03o", c);
            out += escaped;
        }
    }
    return out + "\", " + std::to_string(s.size());
}

std::string text(const std::string& s) {
    return "std::string(" + literal(s) + ")";
}

std::string boolean(bool value) {
    return value ? "true" : "false";
}

std::string u64(uint64_t value) {
    return std::to_string(value) + "ull";
}

std::string texts(const std::vector<std::string>& values) {
    std::string out = "std::vector<std::string>{";
    for (const auto& v : values) out += text(v) + ", ";
    return out + "}";
}

std::string ids(const std::vector<gid_t>& values) {
    std::string out = "std::vector<gid_t>{";
    for (gid_t v : values) out += std::to_string(v) + "u, ";
    return out + "}";
}

std::string optional_u64(const std::optional<uint64_t>& value) {
    return value ? "std::optional<uint64_t>(" + u64(*value) + ")" : "std::nullopt";
}

std::string optional_double(const std::optional<double>& value) {
    if (!value) return "std::nullopt";
    char exact[64];
    std::snprintf(exact, sizeof exact, "%a", *value);  // hexadecimal: no rounding
    return std::string("std::optional<double>(") + exact + ")";
}

std::string millis(Millis value) {
    return "Millis(" + std::to_string(value.count()) + ")";
}

std::string optional_millis(const std::optional<Millis>& value) {
    return value ? "std::optional<Millis>(" + millis(*value) + ")" : "std::nullopt";
}

template <class Enum>
std::string enumerator(const char* type, Enum value) {
    return std::string("static_cast<") + type + ">(" + std::to_string(static_cast<int>(value)) +
           ")";
}

/// Lines of the function body: `p.<path> = <expression>;`.
class Body {
  public:
    void set(const std::string& path, const std::string& expression) {
        text_ += "    p." + path + " = " + expression + ";\n";
    }
    const std::string& str() const { return text_; }

  private:
    std::string text_;
};

void write_user(Body& b, const UserSpec& user) {
    const auto& [inherit, uid, gid, groups] = user;
    b.set("user.inherit", boolean(inherit));
    b.set("user.uid", std::to_string(uid) + "u");
    b.set("user.gid", std::to_string(gid) + "u");
    b.set("user.groups", ids(groups));
}

void write_env(Body& b, const EnvSpec& env) {
    const auto& [clear, set, pass] = env;
    b.set("env.clear", boolean(clear));
    std::string map = "std::map<std::string, std::string>{";
    for (const auto& [key, value] : set) map += "{" + text(key) + ", " + text(value) + "}, ";
    b.set("env.set", map + "}");
    b.set("env.pass", texts(pass));
}

void write_workdir(Body& b, const WorkdirSpec& workdir) {
    const auto& [size, mount, from, outputs] = workdir;
    b.set("workdir.size", optional_u64(size));
    b.set("workdir.mount", text(mount));
    b.set("workdir.from", enumerator("WorkdirFrom", from));
    b.set("workdir.outputs", texts(outputs));
}

void write_limits(Body& b, const Limits& limits) {
    const auto& [memory, swap, pids, cpu, io_weight, open_files, core, file_size, processes, stack,
                 output, oom_group, accounting] = limits;
    b.set("limits.memory", optional_u64(memory));
    b.set("limits.swap", optional_u64(swap));
    b.set("limits.pids", optional_u64(pids));
    b.set("limits.cpu", optional_double(cpu));
    b.set("limits.io_weight", optional_u64(io_weight));
    b.set("limits.open_files", optional_u64(open_files));
    b.set("limits.core", optional_u64(core));
    b.set("limits.file_size", optional_u64(file_size));
    b.set("limits.processes", optional_u64(processes));
    b.set("limits.stack", optional_u64(stack));
    b.set("limits.output", u64(output));
    b.set("limits.oom_group", boolean(oom_group));
    b.set("limits.accounting", boolean(accounting));
}

void write_timeouts(Body& b, const Timeouts& timeouts) {
    const auto& [command, session, idle, grace] = timeouts;
    b.set("timeouts.command", optional_millis(command));
    b.set("timeouts.session", optional_millis(session));
    b.set("timeouts.idle", optional_millis(idle));
    b.set("timeouts.grace", millis(grace));
}

void write_namespaces(Body& b, const NamespaceSpec& ns) {
    const auto& [pid, mount, ipc, uts, user, network] = ns;
    b.set("namespaces.pid", boolean(pid));
    b.set("namespaces.mount", boolean(mount));
    b.set("namespaces.ipc", boolean(ipc));
    b.set("namespaces.uts", boolean(uts));
    b.set("namespaces.user", boolean(user));
    b.set("namespaces.network", enumerator("NetworkMode", network));
}

void write_filesystem(Body& b, const FilesystemSpec& fs) {
    const auto& [read_only, read_write, hidden, tmpfs, hostname] = fs;
    b.set("filesystem.read_only", texts(read_only));
    b.set("filesystem.read_write", texts(read_write));
    b.set("filesystem.hidden", texts(hidden));
    std::string map = "std::map<std::string, uint64_t>{";
    for (const auto& [path, size] : tmpfs) map += "{" + text(path) + ", " + u64(size) + "}, ";
    b.set("filesystem.tmpfs", map + "}");
    b.set("filesystem.hostname", text(hostname));
}

void write_network(Body& b, const NetworkSpec& network) {
    const auto& [ports, allow, egress] = network;
    b.set("network.ports", std::to_string(ports) + "u");
    b.set("network.allow", texts(allow));
    const auto& [mode, allowed_hosts, allowed_cidrs, denied_cidrs] = egress;
    b.set("network.egress.mode", enumerator("EgressMode", mode));
    b.set("network.egress.allowed_hosts", texts(allowed_hosts));
    b.set("network.egress.allowed_cidrs", texts(allowed_cidrs));
    b.set("network.egress.denied_cidrs", texts(denied_cidrs));
}

void write_seccomp(Body& b, const SeccompSpec& seccomp) {
    const auto& [preset, deny, allow, action, errno_value, ptrace_own] = seccomp;
    b.set("seccomp.preset", text(preset));
    b.set("seccomp.deny", texts(deny));
    b.set("seccomp.allow", texts(allow));
    b.set("seccomp.action", enumerator("SeccompAction", action));
    b.set("seccomp.errno_value", std::to_string(errno_value));
    b.set("seccomp.ptrace_own", boolean(ptrace_own));
}

std::string write_policy(const Policy& policy) {
    const auto& [name, extends_chain, user, env, workdir, limits, timeouts, namespaces, filesystem,
                 network, seccomp, capabilities, landlock, enforcement, shell, no_new_privs] =
        policy;
    Body b;
    b.set("name", text(name));
    b.set("extends_chain", texts(extends_chain));
    write_user(b, user);
    write_env(b, env);
    write_workdir(b, workdir);
    write_limits(b, limits);
    write_timeouts(b, timeouts);
    write_namespaces(b, namespaces);
    write_filesystem(b, filesystem);
    write_network(b, network);
    write_seccomp(b, seccomp);
    const auto& [caps_inherit, keep] = capabilities;
    b.set("capabilities.inherit", boolean(caps_inherit));
    b.set("capabilities.keep", texts(keep));
    const auto& [read, write] = landlock;
    b.set("landlock.read", texts(read));
    b.set("landlock.write", texts(write));
    b.set("enforcement", enumerator("Enforcement", enforcement));
    b.set("shell", text(shell));
    b.set("no_new_privs", boolean(no_new_privs));
    return b.str();
}

}  // namespace
}  // namespace corral

int main(int argc, char** argv) {
    using namespace corral;
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s OUT.cpp\n", argv[0]);
        return 2;
    }
    std::string out =
        "// Generated by corral_preset_codegen (policies/compiled/preset_codegen.cpp) from\n"
        "// policies/presets/*.yaml. Do not edit.\n"
        "#include \"policies/compiled/compiled_presets.hpp\"\n\n"
        "namespace corral::detail {\nnamespace {\n\n";
    std::string table;
    const std::vector<std::string> names = preset_names();
    for (size_t i = 0; i < names.size(); ++i) {
        PolicyParseResult parsed = load_policy(names[i]);
        if (!parsed.ok()) {
            std::fprintf(stderr, "preset `%s` does not parse:\n%s", names[i].c_str(),
                         parsed.format_errors().c_str());
            return 1;
        }
        out += "// preset `" + names[i] + "`\nPolicy preset_" + std::to_string(i) +
               "() {\n    Policy p;\n" + write_policy(*parsed.policy) + "    return p;\n}\n\n";
        table += "        {std::string_view(" + literal(names[i]) + "), &preset_" +
                 std::to_string(i) + "},\n";
    }
    out +=
        "}  // namespace\n\nconst std::vector<CompiledPresetEntry>& compiled_preset_entries() {\n"
        "    static const std::vector<CompiledPresetEntry> entries = {\n" +
        table + "    };\n    return entries;\n}\n\n";
    char hash[32];
    std::snprintf(hash, sizeof hash, "0x%016" PRIx64 "ull",
                  preset_set_hash(embedded_preset_texts()));
    out += "uint64_t compiled_preset_set_hash() { return " + std::string(hash) +
           "; }\n\n}  // namespace corral::detail\n";
    std::ofstream file(argv[1], std::ios::trunc);
    file << out;
    file.close();
    if (!file) {
        std::fprintf(stderr, "cannot write %s\n", argv[1]);
        return 1;
    }
    return 0;
}
