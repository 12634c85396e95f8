#include "isolation/mount_plan.hpp"

#include <algorithm>
#include <optional>

#include "base/path_walk.hpp"

namespace corral {
namespace {

// Lexical normalisation of an absolute path: "//usr/./lib/" -> "/usr/lib". ".." is refused rather
// than resolved: a policy that says /usr/../etc means something other than it looks like.
std::optional<std::string> normalize_absolute(const std::string& path) {
    if (path.empty() || path[0] != '/') return std::nullopt;
    std::string out;
    for (const auto& component : path_components(path)) {
        if (component == "..") return std::nullopt;
        out += '/' + component;
    }
    return out.empty() ? "/" : out;
}

Result<std::string> checked_path(const std::string& key, const std::string& path) {
    auto normalized = normalize_absolute(path);
    if (!normalized)
        return policy_refusal(key + ": `" + path +
                           "` must be an absolute path without `..` components");
    return *normalized;
}

Status add_binds(std::vector<MountStep>& plan, const std::string& key,
                 const std::vector<std::string>& paths, MountStep::Kind kind) {
    for (const auto& path : paths) {
        auto checked = checked_path(key, path);
        if (!checked) return std::move(checked.error());
        plan.push_back(MountStep{kind, *checked, *checked, 0});
    }
    return {};
}

/// The workdir's bind, its paths normalised (std::nullopt: no workdir).
Result<std::optional<MountStep>> workdir_step(const WorkdirBinding& workdir) {
    if (workdir.host_path.empty()) return std::optional<MountStep>();
    auto host = checked_path("workdir (host path)", workdir.host_path);
    if (!host) return std::move(host.error());
    auto inside = checked_path(
        "workdir.mount", workdir.inside_path.empty() ? workdir.host_path : workdir.inside_path);
    if (!inside) return std::move(inside.error());
    if (*inside == "/") return policy_refusal("workdir.mount: the workdir cannot replace `/`");
    return std::optional<MountStep>(
        MountStep{MountStep::Kind::workdir, *host, *inside, 0, workdir.host_fd});
}

}  // namespace

Result<std::vector<MountStep>> compile_mount_plan(const Policy& policy,
                                                  const WorkdirBinding& workdir,
                                                  const std::string& resolv_conf) {
    std::vector<MountStep> plan;
    if (!policy.namespaces.mount) return plan;
    const FilesystemSpec& fs = policy.filesystem;
    CORRAL_TRY(
        add_binds(plan, "filesystem.read_only", fs.read_only, MountStep::Kind::bind_read_only), "");
    CORRAL_TRY(
        add_binds(plan, "filesystem.read_write", fs.read_write, MountStep::Kind::bind_read_write),
        "");
    // The workdir is bound after hidden dirs and tmpfs mounts, so that it stays visible when it
    // lies beneath one (a project under a hidden /home, a cwd under a fresh /tmp). Hidden dirs and
    // tmpfs mounts beneath the workdir go after it, or the bind would uncover them again. Paths
    // compare normalised: `mount: /workspace/` is the workdir /workspace.
    auto workdir_bind = workdir_step(workdir);
    if (!workdir_bind) return std::move(workdir_bind.error());
    std::vector<MountStep> beneath_workdir;
    auto place = [&](MountStep step) {
        bool beneath = *workdir_bind && step.target != (*workdir_bind)->target &&
                       step.target.rfind((*workdir_bind)->target + "/", 0) == 0;
        (beneath ? beneath_workdir : plan).push_back(std::move(step));
    };
    for (const auto& path : fs.hidden) {
        auto checked = checked_path("filesystem.hidden", path);
        if (!checked) return std::move(checked.error());
        if (*checked == "/") return policy_refusal("filesystem.hidden: cannot hide `/`");
        place(MountStep{MountStep::Kind::hide, "", *checked, 0});
    }
    for (const auto& [path, size] : fs.tmpfs) {
        auto checked = checked_path("filesystem.tmpfs", path);
        if (!checked) return std::move(checked.error());
        if (*checked == "/") return policy_refusal("filesystem.tmpfs: cannot replace `/`");
        place(MountStep{MountStep::Kind::tmpfs, "", *checked, size});
    }
    if (*workdir_bind) plan.push_back(**workdir_bind);
    plan.insert(plan.end(), beneath_workdir.begin(), beneath_workdir.end());
    if (policy.namespaces.network == NetworkMode::isolated && !resolv_conf.empty())
        plan.push_back(
            MountStep{MountStep::Kind::resolv_conf, resolv_conf, "/etc/resolv.conf", 0, -1, true});
    std::vector<MountStep> fresh{MountStep{MountStep::Kind::dev, "", "/dev", 0}};
    // A fresh sysfs shows the network devices of the namespace that mounts it; the host's /sys
    // would list the host's interfaces under /sys/class/net.
    if (policy.namespaces.network == NetworkMode::isolated)
        fresh.push_back(MountStep{MountStep::Kind::sysfs, "", "/sys", 0});
    // procfs shows the pid namespace of its mounter: only a new pid namespace gets a fresh one.
    // Without it the host's /proc stays (bound with the rest of the root, or by a bind of the
    // policy's) and is protected here, after every bind (helper 30's M1: a `read_write: [/proc/sys]`
    // bound later showed the writable host knobs again).
    fresh.push_back(MountStep{
        policy.namespaces.pid ? MountStep::Kind::proc : MountStep::Kind::host_proc, "", "/proc", 0});
    // What is hidden, replaced with a tmpfs or bound as the workdir at or beneath one of those
    // goes after it: mounted before, the fresh /dev, /sys or /proc covered it (a hidden
    // /sys/kernel shown again, a hidden /proc dir failing the creation, `tmpfs: {/dev/shm: 8Mi}`
    // losing its size, a state directory under /dev/shm failing every session's).
    std::vector<MountStep> beneath_fresh;
    auto is_beneath_fresh = [&](const MountStep& step) {
        if (step.kind != MountStep::Kind::hide && step.kind != MountStep::Kind::tmpfs &&
            step.kind != MountStep::Kind::workdir)
            return false;
        return std::any_of(fresh.begin(), fresh.end(), [&](const MountStep& mount) {
            return step.target == mount.target || step.target.rfind(mount.target + "/", 0) == 0;
        });
    };
    for (auto& step : plan)
        if (is_beneath_fresh(step)) beneath_fresh.push_back(step);
    std::erase_if(plan, is_beneath_fresh);
    plan.insert(plan.end(), fresh.begin(), fresh.end());
    plan.insert(plan.end(), beneath_fresh.begin(), beneath_fresh.end());
    return plan;
}

std::string describe_mount_plan(const std::vector<MountStep>& plan) {
    std::string out;
    for (const auto& step : plan) {
        switch (step.kind) {
            case MountStep::Kind::bind_read_only:
                out += "ro-bind " + step.source + " -> " + step.target;
                break;
            case MountStep::Kind::bind_read_write:
                out += "bind " + step.source + " -> " + step.target;
                break;
            case MountStep::Kind::workdir:
                out += "workdir " + step.source + " -> " + step.target;
                break;
            case MountStep::Kind::hide:
                out += "hide " + step.target;
                break;
            case MountStep::Kind::tmpfs:
                out += "tmpfs " + step.target;
                if (step.size != 0) out += " size=" + std::to_string(step.size);
                break;
            case MountStep::Kind::dev:
                out += "dev " + step.target;
                break;
            case MountStep::Kind::proc:
                out += "proc " + step.target;
                break;
            case MountStep::Kind::sysfs:
                out += "sysfs " + step.target;
                break;
            case MountStep::Kind::host_proc:
                out += "protect host " + step.target;
                break;
            case MountStep::Kind::resolv_conf:
                out += "resolv.conf " + step.source + " -> " + step.target;
                break;
        }
        out += '\n';
    }
    return out;
}

}  // namespace corral
