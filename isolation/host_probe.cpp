#include "isolation/host_probe.hpp"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <iterator>
#include <sstream>

#include "base/file_io.hpp"
#include "isolation/landlock.hpp"
#include "isolation/launcher.hpp"
#include "isolation/seccomp.hpp"

namespace corral {
namespace {

/// unshare() in a forked child, so our own process never changes. "" when it works, else the
/// errno name.
std::string try_unshare(int flag) {
    pid_t pid = fork();
    if (pid < 0) return errno_name(errno);
    if (pid == 0) _exit(unshare(flag) == 0 ? 0 : (errno & 0x7f));
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status)) return "probe crashed";
    return WEXITSTATUS(status) == 0 ? "" : errno_name(WEXITSTATUS(status));
}

std::vector<NamespaceSupport> probe_namespaces() {
    const std::pair<const char*, int> kinds[] = {
        {"pid", CLONE_NEWPID}, {"mount", CLONE_NEWNS},     {"ipc", CLONE_NEWIPC},
        {"uts", CLONE_NEWUTS}, {"network", CLONE_NEWNET}, {"user", CLONE_NEWUSER},
        {"cgroup", CLONE_NEWCGROUP},
    };
    std::vector<NamespaceSupport> out;
    for (const auto& [name, flag] : kinds) {
        std::string failure = try_unshare(flag);
        out.push_back({name, failure.empty(), failure});
    }
    return out;
}

bool openat2_works() {
    open_how how{};
    how.flags = O_PATH | O_CLOEXEC;
    how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
    long fd = syscall(SYS_openat2, AT_FDCWD, "/", &how, sizeof how);
    if (fd < 0) return false;
    close(static_cast<int>(fd));
    return true;
}

/// The controllers a session could get here: those of our limits the base offers.
std::vector<std::string> limit_controllers(const CgroupHost& host) {
    std::vector<std::string> out;
    for (const char* name : {"cpu", "io", "memory", "pids"})
        for (const auto& offered : host.v2_controllers)
            if (offered == name) out.push_back(name);
    return out;
}

/// Whether this process's own v2 cgroup directory is `dir`.
bool we_live_in(const std::string& dir) {
    auto now = discover_cgroup_host();
    return now && now->v2_own == dir;
}

/// What enable_in_probe found.
struct ProbeOutcome {
    Result<std::vector<std::string>> offered = std::vector<std::string>{};
    /// This process could not step back out of the probe: the probe must not be removed (its
    /// removal kills what is inside, us included).
    bool stuck_inside = false;
};

/// Really enables `wanted` down to `<probe>/leaf`, the way a session's limits are, and returns
/// what the leaf then offers. When this process lives in the base itself (a delegated cgroup we
/// alone use), it steps into `<probe>/self` first, as corrald steps into its supervisor leaf, and
/// afterwards turns off what it enabled and steps back (a process may not join a non-root cgroup
/// whose subtree_control is set). `self` is a plain directory, never an owned Cgroup: its
/// teardown would kill this process if stepping back had failed.
ProbeOutcome enable_in_probe(const CgroupHost& host, Cgroup& probe,
                             const std::vector<std::string>& wanted) {
    const std::string& base = host.v2_own;
    // The real root (no cgroup.type) is exempt from the rule: nothing to step out of, and its
    // subtree_control is never turned off again (the whole host may rely on it).
    const bool base_is_root = ::access((base + "/cgroup.type").c_str(), F_OK) != 0;
    const bool step_out = !base_is_root && we_live_in(base);
    std::string before;
    if (auto text = read_file(base + "/cgroup.subtree_control")) before = *text;
    const std::string self = probe.path() + "/self";
    ProbeOutcome outcome;
    if (step_out) {
        if (::mkdir(self.c_str(), 0755) != 0) {
            outcome.offered = sys_error("mkdir `" + self + "`");
            return outcome;
        }
        if (auto moved = write_file(self + "/cgroup.procs", "0"); !moved) {
            outcome.offered = std::move(moved.error().context("step out of `" + base + "`"));
            return outcome;
        }
    }
    std::vector<std::string> offered;
    Status enabled = plain_error("no leaf");
    if (auto leaf = probe.create_child("leaf")) {
        enabled = enable_controllers_down_to(base, leaf->path(), wanted);
        if (enabled)
            if (auto text = read_file(leaf->path() + "/cgroup.controllers")) {
                std::istringstream words(*text);
                for (std::string word; words >> word;) offered.push_back(word);
            }
    } else {
        enabled = std::move(leaf.error());
    }
    if (step_out) {
        std::string off;  // only what this probe turned on
        std::istringstream had(before);
        std::vector<std::string> kept{std::istream_iterator<std::string>(had), {}};
        for (const auto& controller : wanted)
            if (std::find(kept.begin(), kept.end(), controller) == kept.end())
                off += (off.empty() ? "-" : " -") + controller;
        if (!off.empty()) {
            (void)write_file(probe.path() + "/cgroup.subtree_control", off);
            (void)write_file(base + "/cgroup.subtree_control", off);
        }
        if (auto back = write_file(base + "/cgroup.procs", "0"); !back) {
            outcome.stuck_inside = true;
            outcome.offered = std::move(back.error().context("step back into `" + base + "`"));
            return outcome;
        }
        (void)::rmdir(self.c_str());
    }
    if (!enabled) {
        outcome.offered = std::move(enabled.error());
        return outcome;
    }
    outcome.offered = std::move(offered);
    return outcome;
}

/// Returns false when this process is stuck inside `scratch` (see ProbeOutcome).
bool probe_controllers(HostProbe& probe, Cgroup& scratch) {
    const CgroupHost& host = *probe.cgroups;
    auto wanted = limit_controllers(host);
    if (wanted.empty()) {
        probe.controller_probe_error =
            "`" + host.v2_own + "/cgroup.controllers` offers none of cpu, io, memory, pids";
        return true;
    }
    auto outcome = enable_in_probe(host, scratch, wanted);
    if (!outcome.offered) {
        probe.controller_probe_error = outcome.offered.error().describe();
        return !outcome.stuck_inside;
    }
    probe.controllers_enabled = *outcome.offered;
    return true;
}

/// A limit the backend would claim whose controller the probe could not really enable is not
/// enforceable, with the probe's finding as the reason.
void confirm_limits(HostProbe& probe) {
    const char* controller_of[] = {"memory", "memory", "pids", "cpu", "io"};
    const LimitKind kinds[] = {LimitKind::memory, LimitKind::swap, LimitKind::pids, LimitKind::cpu,
                               LimitKind::io};
    for (size_t i = 0; i < 5; ++i) {
        auto& capability = probe.limits.kinds[kinds[i]];
        if (!capability.enforceable) continue;
        bool enabled = false;
        for (const auto& name : probe.controllers_enabled) enabled |= name == controller_of[i];
        if (enabled) continue;
        capability.enforceable = false;
        capability.detail = probe.controller_probe_error.empty()
                                ? std::string("controller `") + controller_of[i] +
                                      "` could not be enabled below `" + probe.cgroups->v2_own + "`"
                                : probe.controller_probe_error;
    }
}

void probe_cgroups(HostProbe& probe, const PlacementOptions& placement) {
    auto host = discover_cgroup_host();
    if (!host) {
        probe.cgroup_error = host.error().describe();
        return;
    }
    auto plan = place_cgroups(*host, placement);
    if (!plan) {
        probe.cgroup_error = plan.error().describe();
        return;
    }
    probe.placement = *plan;
    probe.cgroups = *host;
    auto scratch = Cgroup::create(host->v2_own, "corral-probe-" + std::to_string(getpid()));
    if (scratch) {
        probe.cgroup_kill = cgroup_kill_supported(*scratch);
        bool stepped_back = true;
        if (host->layout == CgroupLayout::unified && plan->mode != PlacementMode::unavailable)
            stepped_back = probe_controllers(probe, *scratch);
        if (stepped_back) {
            (void)scratch->remove();
        } else {
            // Never reached in practice (moving back into our own cgroup failed): leave the
            // probe cgroup rather than have its teardown kill this process inside it.
            probe.cgroup_error = "left `" + scratch->path() + "`: " + probe.controller_probe_error;
            static_cast<void>(new Cgroup(std::move(*scratch)));
        }
    } else {
        probe.cgroup_error = scratch.error().context("create a probe cgroup").describe();
    }
    probe.clone_into_cgroup = clone_into_cgroup_supported();
    auto backend = make_limit_backend(*host);
    probe.limit_backend = backend->name();
    probe.limits = backend->support();
    if (host->layout == CgroupLayout::unified) confirm_limits(probe);
}

}  // namespace

HostProbe probe_host(const PlacementOptions& placement) {
    HostProbe probe;
    probe_cgroups(probe, placement);
    probe.namespaces = probe_namespaces();
    probe.seccomp = seccomp_available();
    probe.landlock_abi = landlock_abi_version();
    probe.openat2 = openat2_works();
    return probe;
}

}  // namespace corral
