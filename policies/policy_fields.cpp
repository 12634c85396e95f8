// The policy keys: one table per section, each key with the function that reads its value onto
// the Policy. A key present in a document replaces that leaf of the inherited policy wholesale.

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>

#include "policies/egress_destination.hpp"
#include "policies/egress_rules.hpp"
#include "policies/policy_reader.hpp"
#include "policies/units.hpp"

namespace corral::detail {
namespace {

using Apply = void (*)(PolicyReader&, const Entry&, Policy&);
struct Rule {
    std::string_view name;
    Apply apply;
};

// Reads a section (a map) whose keys are the rules' names.
template <size_t N>
void apply_rules(PolicyReader& reader, const Entry& section, const Rule (&rules)[N],
                 Policy& policy) {
    std::vector<std::string_view> names;
    for (const Rule& rule : rules) names.push_back(rule.name);
    for (const Entry& entry : reader.entries(section, names)) {
        std::string_view name = entry.key;
        name = name.substr(name.rfind('.') + 1);
        for (const Rule& rule : rules) {
            if (rule.name == name) rule.apply(reader, entry, policy);
        }
    }
}

// A field where null, `none` or `unlimited` means "no limit".
template <class T, class Read>
void read_optional(PolicyReader& reader, const Entry& entry, std::optional<T>& field, Read read) {
    if (reader.is_unset(entry)) {
        field.reset();
    } else if (auto value = read()) {
        field = *value;
    }
}

template <class T>
void assign(std::optional<T> value, T& field) {
    if (value) field = std::move(*value);
}

// ---- value checks (return "" when fine, else what was expected) ----

std::string valid_path(std::string_view path) {
    return check_absolute_path(path);
}

std::string valid_env_name(std::string_view name) {
    bool ok = !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0]));
    for (char c : name) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
    return ok ? ""
              : "expected an environment variable name ([A-Za-z_][A-Za-z0-9_]*), got `" +
                    std::string(name) + "`";
}

std::string valid_syscall(std::string_view name) {
    std::string_view body = name.starts_with("@") ? name.substr(1) : name;
    bool ok = !body.empty();
    for (char c : body) {
        bool plain = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
        ok = ok && (plain || (c == '-' && name[0] == '@'));
    }
    return ok ? ""
              : "expected a syscall name ([a-z0-9_]) or an @group, got `" + std::string(name) + "`";
}

std::string valid_capability(std::string_view name) {
    return normalize_capability(name)
               ? ""
               : "expected a capability name like CAP_NET_BIND_SERVICE or net_bind_service, got `" +
                     std::string(name) + "`";
}

std::string valid_name(std::string_view name) {
    bool ok = !name.empty() && name.size() <= 64;
    for (char c : name)
        ok =
            ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.');
    return ok ? "" : "expected 1-64 characters of [A-Za-z0-9._-], got `" + std::string(name) + "`";
}

std::string valid_hostname(std::string_view name) {
    bool ok = !name.empty() && name.size() <= 64 && name[0] != '-' && name[0] != '.';
    for (char c : name)
        ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.');
    return ok ? ""
              : "expected a hostname of 1-64 characters [A-Za-z0-9.-], got `" + std::string(name) +
                    "`";
}

std::string valid_egress_destination(std::string_view text) {
    auto parsed = parse_egress_destination(std::string(text));
    return parsed ? "" : parsed.error().message;
}

void name_field(PolicyReader& r, const Entry& e, Policy& p) {
    auto text = r.string(e);
    if (!text) return;
    if (std::string problem = valid_name(*text); !problem.empty()) return r.error(e, problem);
    p.name = *text;
}

void extends_field(PolicyReader&, const Entry&, Policy&) {}  // resolved before the other keys

// ---- user ----

std::optional<uint32_t> read_id(PolicyReader& r, const Entry& e) {
    auto id = r.integer(e, 0, 4294967294u);  // (uid_t)-1 means "unchanged" to setresuid
    if (!id) return std::nullopt;
    return static_cast<uint32_t>(*id);
}

void user_field(PolicyReader& r, const Entry& e, Policy& p) {
    if (e.value.IsScalar()) {
        if (e.value.Scalar() == "inherit") {
            p.user = UserSpec{};
        } else {
            r.error(e, "expected `inherit` or {uid: N, gid: N, groups: [N...]}");
        }
        return;
    }
    if (!e.value.IsMap())
        return r.error(e, "expected `inherit` or {uid: N, gid: N, groups: [N...]}");
    static constexpr std::string_view keys[] = {"uid", "gid", "groups"};
    UserSpec user;
    user.inherit = false;
    std::optional<uint32_t> uid, gid;
    bool ok = true;
    for (const Entry& field : r.entries(e, keys)) {
        if (field.key == "user.uid") {
            uid = read_id(r, field);
            ok = ok && uid;
        } else if (field.key == "user.gid") {
            gid = read_id(r, field);
            ok = ok && gid;
        } else if (!field.value.IsNull() && !field.value.IsSequence()) {
            r.error(field, "expected a list of group ids, e.g. [100, 101]");
            ok = false;
        } else {
            for (size_t i = 0; field.value.IsSequence() && i < field.value.size(); ++i) {
                auto group = read_id(r, field.child(field.value[i], "[" + std::to_string(i) + "]"));
                ok = ok && group;
                if (group) user.groups.push_back(*group);
            }
        }
    }
    if (!uid && ok) {
        r.error(e.key_mark, "user.uid", "missing uid (write {uid: N} or `user: inherit`)");
        return;
    }
    if (!ok) return;
    user.uid = *uid;
    user.gid = gid.value_or(*uid);  // the common case: nobody/nogroup, 1000/1000
    p.user = user;
}

// ---- env ----

void env_set(PolicyReader& r, const Entry& e, Policy& p) {
    std::map<std::string, std::string> set;
    bool ok = e.value.IsNull() || e.value.IsMap();
    for (const Entry& var : r.free_entries(e, valid_env_name, false)) {
        if (!var.value.IsScalar()) {
            r.error(var, "expected a string value (write \"\" for an empty one)");
            ok = false;
            continue;
        }
        if (!r.spend(var.value.Scalar().size())) return;  // aliases repeating a large value
        set[var.key.substr(e.key.size() + 1)] = var.value.Scalar();
    }
    if (ok) p.env.set = std::move(set);
}

constexpr Rule kEnvRules[] = {
    {"clear",
     [](PolicyReader& r, const Entry& e, Policy& p) { assign(r.boolean(e), p.env.clear); }},
    {"set", env_set},
    {"pass", [](PolicyReader& r, const Entry& e,
                Policy& p) { assign(r.string_list(e, valid_env_name), p.env.pass); }},
};

// ---- workdir ----

constexpr std::string_view kWorkdirSources[] = {"cwd", "copy"};

// An output of `workdir.from: copy`: a path inside the job directory, so relative and without
// `..` (it is copied back beneath the job directory and nowhere else).
std::string valid_output(std::string_view path) {
    if (path.empty() || path[0] == '/')
        return "expected a path relative to the job directory, got `" + std::string(path) + "`";
    if (!check_absolute_path("/" + std::string(path)).empty())
        return "expected a path inside the job directory, without `..`, got `" +
               std::string(path) + "`";
    return path == "." || path == "./" ? "`.` would copy back everything: name the outputs" : "";
}

constexpr Rule kWorkdirRules[] = {
    {"from",
     [](PolicyReader& r, const Entry& e, Policy& p) {
         if (auto from = r.choice(e, kWorkdirSources))
             p.workdir.from = *from == "copy" ? WorkdirFrom::copy : WorkdirFrom::cwd;
     }},
    {"outputs", [](PolicyReader& r, const Entry& e,
                   Policy& p) { assign(r.string_list(e, valid_output), p.workdir.outputs); }},
    {"size",
     [](PolicyReader& r, const Entry& e, Policy& p) {
         read_optional(r, e, p.workdir.size, [&] { return r.size(e, 1 << 20); });
     }},
    {"mount",
     [](PolicyReader& r, const Entry& e, Policy& p) {
         auto path = r.string(e);
         if (!path) return;
         if (std::string problem = check_absolute_path(*path); !problem.empty())
             return r.error(e, problem);
         if (*path == "/") return r.error(e, "the workdir cannot be mounted over /");
         p.workdir.mount = *path;
     }},
};

// ---- limits ----

std::optional<double> read_cpu(PolicyReader& r, const Entry& e) {
    std::string expected = "a number of CPUs greater than 0, e.g. 1.5";
    if (!e.value.IsScalar()) {
        r.error(e, "expected " + expected);
        return std::nullopt;
    }
    const std::string& text = e.value.Scalar();
    double value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(value) ||
        value <= 0 || value > 4096) {
        r.error(e, "expected " + expected + ", got `" + text + "`");
        return std::nullopt;
    }
    return value;
}

constexpr uint64_t kMaxTasks = 4194304;  // PID_MAX_LIMIT

constexpr Rule kLimitRules[] = {
    {"memory",
     [](PolicyReader& r, const Entry& e, Policy& p) {
         read_optional(r, e, p.limits.memory, [&] { return r.size(e, 1 << 20); });
     }},
    {"swap", [](PolicyReader& r, const Entry& e,
                Policy& p) { read_optional(r, e, p.limits.swap, [&] { return r.size(e); }); }},
    {"pids",
     [](PolicyReader& r, const Entry& e, Policy& p) {
         read_optional(r, e, p.limits.pids, [&] { return r.integer(e, 1, kMaxTasks); });
     }},
    {"cpu", [](PolicyReader& r, const Entry& e,
               Policy& p) { read_optional(r, e, p.limits.cpu, [&] { return read_cpu(r, e); }); }},
    {"io_weight",
     [](PolicyReader& r, const Entry& e, Policy& p) {
         read_optional(r, e, p.limits.io_weight, [&] { return r.integer(e, 1, 10000); });
     }},
    {"open_files",
     [](PolicyReader& r, const Entry& e, Policy& p) {
         read_optional(r, e, p.limits.open_files, [&] { return r.integer(e, 1, 1u << 30); });
     }},
    {"core", [](PolicyReader& r, const Entry& e,
                Policy& p) { read_optional(r, e, p.limits.core, [&] { return r.size(e); }); }},
    {"file_size",
     [](PolicyReader& r, const Entry& e, Policy& p) {
         read_optional(r, e, p.limits.file_size, [&] { return r.size(e); });
     }},
    {"processes",
     [](PolicyReader& r, const Entry& e, Policy& p) {
         read_optional(r, e, p.limits.processes, [&] { return r.integer(e, 1, kMaxTasks); });
     }},
    {"stack",
     [](PolicyReader& r, const Entry& e, Policy& p) {
         read_optional(r, e, p.limits.stack, [&] { return r.size(e, 64 << 10); });
     }},
    {"output",
     [](PolicyReader& r, const Entry& e, Policy& p) { assign(r.size(e), p.limits.output); }},
    {"oom_group",
     [](PolicyReader& r, const Entry& e, Policy& p) { assign(r.boolean(e), p.limits.oom_group); }},
    {"accounting",
     [](PolicyReader& r, const Entry& e, Policy& p) { assign(r.boolean(e), p.limits.accounting); }},
};

// ---- timeouts ----

// command/session/idle: a duration > 0, or none.
void read_timeout(PolicyReader& r, const Entry& e, std::optional<Millis>& field) {
    read_optional(r, e, field, [&]() -> std::optional<Millis> {
        auto value = r.duration(e);
        if (value && value->count() == 0) {
            r.error(e, "expected a duration greater than 0 (write `none` for no timeout)");
            return std::nullopt;
        }
        return value;
    });
}

constexpr Rule kTimeoutRules[] = {
    {"command",
     [](PolicyReader& r, const Entry& e, Policy& p) { read_timeout(r, e, p.timeouts.command); }},
    {"session",
     [](PolicyReader& r, const Entry& e, Policy& p) { read_timeout(r, e, p.timeouts.session); }},
    {"idle",
     [](PolicyReader& r, const Entry& e, Policy& p) { read_timeout(r, e, p.timeouts.idle); }},
    {"grace",
     [](PolicyReader& r, const Entry& e, Policy& p) { assign(r.duration(e), p.timeouts.grace); }},
};

// ---- namespaces ----

constexpr std::string_view kNetworkModes[] = {"isolated", "host"};

constexpr Rule kNamespaceRules[] = {
    {"pid",
     [](PolicyReader& r, const Entry& e, Policy& p) { assign(r.boolean(e), p.namespaces.pid); }},
    {"mount",
     [](PolicyReader& r, const Entry& e, Policy& p) { assign(r.boolean(e), p.namespaces.mount); }},
    {"ipc",
     [](PolicyReader& r, const Entry& e, Policy& p) { assign(r.boolean(e), p.namespaces.ipc); }},
    {"uts",
     [](PolicyReader& r, const Entry& e, Policy& p) { assign(r.boolean(e), p.namespaces.uts); }},
    {"user",
     [](PolicyReader& r, const Entry& e, Policy& p) { assign(r.boolean(e), p.namespaces.user); }},
    {"network",
     [](PolicyReader& r, const Entry& e, Policy& p) {
         if (auto mode = r.choice(e, kNetworkModes)) {
             p.namespaces.network = *mode == "host" ? NetworkMode::host : NetworkMode::isolated;
         }
     }},
};

// ---- filesystem ----

void filesystem_tmpfs(PolicyReader& r, const Entry& e, Policy& p) {
    std::map<std::string, uint64_t> tmpfs;
    bool ok = e.value.IsNull() || e.value.IsMap();
    for (const Entry& mount : r.free_entries(e, valid_path, true)) {
        auto size = r.size(mount, 4096);  // tmpfs size=0 would mean "unlimited" to the kernel
        ok = ok && size;
        if (size)
            tmpfs[mount.key.substr(e.key.size() + 1, mount.key.size() - e.key.size() - 2)] = *size;
    }
    if (ok) p.filesystem.tmpfs = std::move(tmpfs);
}

constexpr Rule kFilesystemRules[] = {
    {"read_only", [](PolicyReader& r, const Entry& e,
                     Policy& p) { assign(r.string_list(e, valid_path), p.filesystem.read_only); }},
    {"read_write",
     [](PolicyReader& r, const Entry& e, Policy& p) {
         assign(r.string_list(e, valid_path), p.filesystem.read_write);
     }},
    {"hidden", [](PolicyReader& r, const Entry& e,
                  Policy& p) { assign(r.string_list(e, valid_path), p.filesystem.hidden); }},
    {"tmpfs", filesystem_tmpfs},
    {"hostname",
     [](PolicyReader& r, const Entry& e, Policy& p) {
         auto name = r.string(e);
         if (!name) return;
         if (std::string problem = valid_hostname(*name); !problem.empty())
             return r.error(e, problem);
         p.filesystem.hostname = *name;
     }},
};

// ---- network ----

std::string valid_host_pattern(std::string_view pattern) {
    return check_host_pattern(pattern);
}

std::string valid_cidr(std::string_view text) {
    auto cidr = parse_cidr(text);
    return cidr ? "" : cidr.error().message;
}

constexpr std::string_view kEgressModes[] = {"deny-all", "allow-all", "custom"};

constexpr Rule kEgressRules[] = {
    {"mode",
     [](PolicyReader& r, const Entry& e, Policy& p) {
         if (auto mode = r.choice(e, kEgressModes)) p.network.egress.mode = *egress_mode_from(*mode);
     }},
    {"allowedHosts",
     [](PolicyReader& r, const Entry& e, Policy& p) {
         assign(r.string_list(e, valid_host_pattern), p.network.egress.allowed_hosts);
     }},
    {"allowedCIDRs",
     [](PolicyReader& r, const Entry& e, Policy& p) {
         assign(r.string_list(e, valid_cidr), p.network.egress.allowed_cidrs);
     }},
    {"deniedCIDRs",
     [](PolicyReader& r, const Entry& e, Policy& p) {
         assign(r.string_list(e, valid_cidr), p.network.egress.denied_cidrs);
     }},
};

template <const auto& Rules>
void section(PolicyReader& r, const Entry& e, Policy& p);

constexpr Rule kNetworkRules[] = {
    {"ports",
     [](PolicyReader& r, const Entry& e, Policy& p) {
         if (auto ports = r.integer(e, 0, 1024)) p.network.ports = static_cast<unsigned>(*ports);
     }},
    {"allow",
     [](PolicyReader& r, const Entry& e, Policy& p) {
         assign(r.string_list(e, valid_egress_destination), p.network.allow);
     }},
    {"egress", section<kEgressRules>},
};

// ---- seccomp ----

constexpr std::string_view kSeccompPresets[] = {"default", "strict", "none"};
constexpr std::string_view kSeccompActions[] = {"errno", "kill-process", "log"};
constexpr std::string_view kSeccompPtrace[] = {"none", "own"};

void seccomp_errno(PolicyReader& r, const Entry& e, Policy& p) {
    std::string expected = "an errno name like EPERM or a number from 1 to 4095";
    if (!e.value.IsScalar()) return r.error(e, "expected " + expected);
    const std::string& text = e.value.Scalar();
    if (!text.empty() && std::isdigit(static_cast<unsigned char>(text[0]))) {
        if (auto value = r.integer(e, 1, 4095)) p.seccomp.errno_value = static_cast<int>(*value);
        return;
    }
    if (auto value = errno_from_name(text)) {
        p.seccomp.errno_value = *value;
    } else {
        r.error(e, "expected " + expected + ", got `" + text + "`");
    }
}

constexpr Rule kSeccompRules[] = {
    {"preset", [](PolicyReader& r, const Entry& e,
                  Policy& p) { assign(r.choice(e, kSeccompPresets), p.seccomp.preset); }},
    {"deny", [](PolicyReader& r, const Entry& e,
                Policy& p) { assign(r.string_list(e, valid_syscall), p.seccomp.deny); }},
    {"allow", [](PolicyReader& r, const Entry& e,
                 Policy& p) { assign(r.string_list(e, valid_syscall), p.seccomp.allow); }},
    {"action",
     [](PolicyReader& r, const Entry& e, Policy& p) {
         auto action = r.choice(e, kSeccompActions);
         if (!action) return;
         p.seccomp.action = *action == "errno"          ? SeccompAction::errno_code
                            : *action == "kill-process" ? SeccompAction::kill_process
                                                        : SeccompAction::log;
     }},
    {"errno", seccomp_errno},
    {"ptrace",
     [](PolicyReader& r, const Entry& e, Policy& p) {
         if (auto mode = r.choice(e, kSeccompPtrace)) p.seccomp.ptrace_own = *mode == "own";
     }},
};

// ---- capabilities, landlock ----

constexpr Rule kCapabilityRules[] = {
    {"inherit", [](PolicyReader& r, const Entry& e,
                   Policy& p) { assign(r.boolean(e), p.capabilities.inherit); }},
    {"keep",
     [](PolicyReader& r, const Entry& e, Policy& p) {
         auto names = r.string_list(e, valid_capability);
         if (!names) return;
         p.capabilities.keep.clear();
         for (const auto& name : *names) {
             std::string normal = *normalize_capability(name);
             auto& keep = p.capabilities.keep;
             if (std::find(keep.begin(), keep.end(), normal) == keep.end()) keep.push_back(normal);
         }
     }},
};

constexpr Rule kLandlockRules[] = {
    {"read", [](PolicyReader& r, const Entry& e,
                Policy& p) { assign(r.string_list(e, valid_path), p.landlock.read); }},
    {"write", [](PolicyReader& r, const Entry& e,
                 Policy& p) { assign(r.string_list(e, valid_path), p.landlock.write); }},
};

// ---- top level ----

constexpr std::string_view kEnforcements[] = {"strict", "best-effort"};

template <const auto& Rules>
void section(PolicyReader& r, const Entry& e, Policy& p) {
    apply_rules(r, e, Rules, p);
}

constexpr Rule kTopRules[] = {
    {"name", name_field},
    {"extends", extends_field},
    {"user", user_field},
    {"env", section<kEnvRules>},
    {"workdir", section<kWorkdirRules>},
    {"limits", section<kLimitRules>},
    {"timeouts", section<kTimeoutRules>},
    {"namespaces", section<kNamespaceRules>},
    {"filesystem", section<kFilesystemRules>},
    {"network", section<kNetworkRules>},
    {"seccomp", section<kSeccompRules>},
    {"capabilities", section<kCapabilityRules>},
    {"landlock", section<kLandlockRules>},
    {"shell",
     [](PolicyReader& r, const Entry& e, Policy& p) {
         auto text = r.string(e);
         if (!text) return;
         if (std::string problem = valid_path(*text); !problem.empty()) return r.error(e, problem);
         p.shell = *text;
     }},
    {"enforcement",
     [](PolicyReader& r, const Entry& e, Policy& p) {
         if (auto mode = r.choice(e, kEnforcements)) {
             p.enforcement = *mode == "strict" ? Enforcement::strict : Enforcement::best_effort;
         }
     }},
};

// The position of the first of `keys` written in this document (null mark if none was).
YAML::Mark first_mark(const PolicyReader& r, std::initializer_list<std::string> keys) {
    for (const auto& key : keys) {
        if (auto mark = r.where(key)) return *mark;
    }
    return YAML::Mark::null_mark();
}

}  // namespace

void apply_policy_keys(const YAML::Node& document, Policy& policy, PolicyReader& reader) {
    apply_rules(reader, Entry{document, document.Mark(), ""}, kTopRules, policy);
}

void check_resolved_policy(const Policy& policy, PolicyReader& reader) {
    const FilesystemSpec& fs = policy.filesystem;
    bool changes_filesystem =
        !fs.read_only.empty() || !fs.read_write.empty() || !fs.hidden.empty() || !fs.tmpfs.empty();
    if (changes_filesystem && !policy.namespaces.mount) {
        reader.error(first_mark(reader, {"namespaces.mount", "filesystem", "namespaces"}),
                     "filesystem",
                     "filesystem read_only/read_write/hidden/tmpfs need namespaces.mount: true");
    }
    if (!policy.workdir.outputs.empty() && policy.workdir.from != WorkdirFrom::copy) {
        reader.error(first_mark(reader, {"workdir.outputs", "workdir.from", "workdir"}),
                     "workdir.outputs",
                     "outputs are copied back from a copied workdir: they need workdir.from: copy "
                     "(with from: cwd the job writes into its directory directly)");
    }
    if (policy.workdir.from == WorkdirFrom::copy && !policy.namespaces.mount) {
        reader.error(first_mark(reader, {"workdir.from", "namespaces.mount", "workdir"}),
                     "workdir.from", "a copied workdir needs namespaces.mount: true");
    }
    if (policy.seccomp.ptrace_own && !policy.namespaces.pid) {
        // Without a pid namespace the job sees, and as the same uid could trace, every process
        // of that uid on the host, other sessions' included.
        reader.error(first_mark(reader, {"seccomp.ptrace", "namespaces.pid", "seccomp"}),
                     "seccomp.ptrace",
                     "`own` needs namespaces.pid: true (without a pid namespace of its own the job "
                     "could trace processes outside its session)");
    }
    if (!policy.network.allow.empty() && policy.namespaces.network == NetworkMode::host) {
        reader.error(first_mark(reader, {"network.allow", "namespaces.network", "network"}),
                     "network.allow",
                     "an egress allow-list needs namespaces.network: isolated (the host network "
                     "filters nothing)");
    }
    if (policy.network.egress != EgressSpec{} && policy.namespaces.network == NetworkMode::host) {
        reader.error(first_mark(reader, {"network.egress", "namespaces.network", "network"}),
                     "network.egress",
                     "an egress policy needs namespaces.network: isolated (the host network "
                     "filters nothing)");
    }
}

}  // namespace corral::detail
