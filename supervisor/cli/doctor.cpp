#include "supervisor/cli/doctor.hpp"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sched.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "isolation/cgroup.hpp"
#include "isolation/landlock.hpp"
#include "isolation/launcher.hpp"
#include "isolation/limits.hpp"
#include "isolation/seccomp.hpp"

namespace corral::cli {
namespace {

/// Whether a child can unshare() this namespace type: probed in a forked child so our own
/// process is never changed. Returns "" when it works, else the errno name.
std::string probe_unshare(int flag) {
    pid_t pid = fork();
    if (pid < 0) return "fork failed";
    if (pid == 0) _exit(unshare(flag) == 0 ? 0 : (errno & 0x7f));
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status)) return "probe crashed";
    int code = WEXITSTATUS(status);
    return code == 0 ? "" : errno_name(code);
}

nlohmann::json probe_namespaces() {
    const std::pair<const char*, int> kinds[] = {
        {"pid", CLONE_NEWPID}, {"mount", CLONE_NEWNS},     {"ipc", CLONE_NEWIPC},
        {"uts", CLONE_NEWUTS}, {"network", CLONE_NEWNET}, {"user", CLONE_NEWUSER},
        {"cgroup", CLONE_NEWCGROUP},
    };
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [name, flag] : kinds) {
        std::string failure = probe_unshare(flag);
        out[name] = failure.empty() ? nlohmann::json(true) : nlohmann::json("no: " + failure);
    }
    return out;
}

bool openat2_supported() {
    open_how how{};
    how.flags = O_PATH | O_CLOEXEC;
    how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
    long fd = syscall(SYS_openat2, AT_FDCWD, "/", &how, sizeof how);
    if (fd < 0) return false;
    close(static_cast<int>(fd));
    return true;
}

nlohmann::json probe_cgroups() {
    nlohmann::json out;
    auto host = discover_cgroup_host();
    if (!host) {
        out["error"] = host.error().describe();
        return out;
    }
    out["mode"] = host->layout == CgroupLayout::unified ? "unified" : "hybrid";
    out["v2Mount"] = host->v2_mount;
    out["v2Own"] = host->v2_own;
    out["v2Controllers"] = host->v2_controllers;
    nlohmann::json v1 = nlohmann::json::object();
    for (const auto& [controller, dir] : host->v1_own) v1[controller] = dir;
    out["v1Controllers"] = v1;

    auto probe = Cgroup::create(host->v2_own, "corral-doctor-" + std::to_string(getpid()));
    if (probe) {
        out["cgroupKill"] = cgroup_kill_supported(*probe);
        out["cloneIntoCgroup"] = clone_into_cgroup_supported();
        (void)probe->remove();
    } else {
        out["error"] = probe.error().context("create a probe cgroup").describe();
    }

    auto backend = make_limit_backend(*host);
    nlohmann::json limits = nlohmann::json::object();
    limits["backend"] = backend->name();
    for (const auto& [kind, capability] : backend->support().kinds)
        limits[limit_name(kind)] = {{"enforceable", capability.enforceable}, {"how", capability.detail}};
    out["limits"] = limits;
    return out;
}

void print_text(const nlohmann::json& report) {
    const auto& cg = report["cgroups"];
    std::printf("corral %s doctor\n\n", CORRAL_VERSION);
    if (cg.contains("mode")) {
        std::printf("cgroups        %s, cgroup2 at %s\n", cg["mode"].get<std::string>().c_str(),
                    cg["v2Mount"].get<std::string>().c_str());
        std::printf("  own cgroup   %s\n", cg["v2Own"].get<std::string>().c_str());
        std::printf("  cgroup.kill  %s\n", cg.value("cgroupKill", false) ? "yes" : "no (freeze fallback)");
        std::printf("  clone3 CLONE_INTO_CGROUP  %s\n",
                    cg.value("cloneIntoCgroup", false) ? "yes" : "no (attach fallback)");
        if (cg.contains("limits")) {
            std::printf("  limits via   %s\n", cg["limits"]["backend"].get<std::string>().c_str());
            for (const auto& [name, entry] : cg["limits"].items()) {
                if (name == "backend") continue;
                std::printf("    %-10s %s  %s\n", name.c_str(),
                            entry["enforceable"].get<bool>() ? "yes" : "NO ",
                            entry["how"].get<std::string>().c_str());
            }
        }
    }
    if (cg.contains("error")) std::printf("  problem: %s\n", cg["error"].get<std::string>().c_str());
    std::printf("namespaces\n");
    for (const auto& [name, value] : report["namespaces"].items())
        std::printf("  %-8s %s\n", name.c_str(), value.is_boolean() ? "yes" : value.get<std::string>().c_str());
    std::printf("seccomp        %s\n", report["seccomp"].get<bool>() ? "yes (filter mode)" : "no");
    int abi = report["landlockAbi"].get<int>();
    if (abi > 0) std::printf("landlock       ABI %d\n", abi);
    else std::printf("landlock       no\n");
    std::printf("openat2        %s\n", report["openat2"].get<bool>() ? "yes" : "no");
}

}  // namespace

nlohmann::json probe_host() {
    return {
        {"version", CORRAL_VERSION},
        {"cgroups", probe_cgroups()},
        {"namespaces", probe_namespaces()},
        {"seccomp", seccomp_available()},
        {"landlockAbi", landlock_abi_version()},
        {"openat2", openat2_supported()},
    };
}

int doctor_command(bool as_json) {
    auto report = probe_host();
    if (as_json) std::cout << report.dump(2) << "\n";
    else print_text(report);
    return report["cgroups"].contains("error") ? 1 : 0;
}

}  // namespace corral::cli
