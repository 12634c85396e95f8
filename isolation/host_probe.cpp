#include "isolation/host_probe.hpp"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sched.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

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

void probe_cgroups(HostProbe& probe) {
    auto host = discover_cgroup_host();
    if (!host) {
        probe.cgroup_error = host.error().describe();
        return;
    }
    probe.cgroups = *host;
    auto scratch = Cgroup::create(host->v2_own, "corral-probe-" + std::to_string(getpid()));
    if (scratch) {
        probe.cgroup_kill = cgroup_kill_supported(*scratch);
        (void)scratch->remove();
    } else {
        probe.cgroup_error = scratch.error().context("create a probe cgroup").describe();
    }
    probe.clone_into_cgroup = clone_into_cgroup_supported();
    auto backend = make_limit_backend(*host);
    probe.limit_backend = backend->name();
    probe.limits = backend->support();
}

}  // namespace

HostProbe probe_host() {
    HostProbe probe;
    probe_cgroups(probe);
    probe.namespaces = probe_namespaces();
    probe.seccomp = seccomp_available();
    probe.landlock_abi = landlock_abi_version();
    probe.openat2 = openat2_works();
    return probe;
}

}  // namespace corral
