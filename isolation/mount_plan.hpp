#pragma once
// Mounts as data (as bubblewrap's SetupOp list): a policy compiles to a list of steps that the
// session's namespace holder executes inside its new mount namespace, and that a unit test can
// inspect without privileges.
//
// The root itself is implicit, not a step: the holder builds a small tmpfs root holding one
// recursive bind per top-level host entry (symlinks such as /lib -> usr/lib copied as symlinks), so
// that missing mount points (/workspace) are created in corral's tmpfs and never on the host.
// mounts.hpp turns these steps into the concrete operations the holder executes.

#include <cstdint>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "policies/policy.hpp"

namespace corral {

/// One step. Paths in `target` are inside the new root (the child prefixes the staging dir).
struct MountStep {
    enum class Kind {
        bind_read_only,   ///< recursive bind of host `source` at `target`, then ro (mount_setattr)
        bind_read_write,  ///< recursive bind, writable, nosuid,nodev
        workdir,          ///< the session's working directory: a writable nosuid,nodev bind made
                          ///< from a detached copy of `source` (mounts.hpp), idmapped when the
                          ///< sandbox's identity is not the directory's owner (sandbox.cpp)
        hide,             ///< empty ro tmpfs over a directory, /dev/null over a file
        tmpfs,            ///< fresh tmpfs of `size` bytes
        dev,              ///< minimal /dev: null zero full random urandom tty, pts, shm, fd links
        proc,             ///< fresh procfs (for the new pid namespace)
        sysfs,            ///< fresh read-only sysfs (network namespace: /sys/class/net shows it)
        host_proc,        ///< no pid namespace: the host's /proc, as the root and the binds show
                          ///< it, protected as a fresh one is (read-only knobs, masked files);
                          ///< after the binds, which would otherwise show it whole again
        resolv_conf,      ///< the daemon's file `source` wherever `target` (/etc/resolv.conf)
                          ///< leads inside the sandbox: a symlink there is followed beneath the
                          ///< sandbox's root and the file bound where it ends (mounts.hpp)
    };
    Kind kind;
    std::string source;  ///< host path (binds)
    std::string target;  ///< path as seen inside the sandbox
    uint64_t size = 0;   ///< tmpfs bytes (0 = kernel default)
    int source_fd = -1;  ///< workdir: the directory itself (WorkdirBinding::host_fd), or -1
    /// bind_read_only: the parent (root) clones `source` with open_tree and the holder only
    /// attaches the clone, so the holder (the session's unprivileged identity) need not reach a
    /// path beneath the daemon's own directories (the daemon's resolv.conf).
    bool clone_in_parent = false;
    bool operator==(const MountStep&) const = default;
};

/// Where the session's files live on the host and where its processes see them.
struct WorkdirBinding {
    std::string host_path;    ///< the session's working directory on the host
    std::string inside_path;  ///< where it appears inside (== host_path for `corral run` cwd)
    /// A descriptor of host_path's directory (O_PATH will do), owned by the caller, or -1. When
    /// set, the mount is cloned from it and host_path is never resolved again (`corral run`'s
    /// job directory: a job may swap a component of its path for a symlink, CVE-2018-15664).
    int host_fd = -1;
    /// A host directory the user works in (`corral run`'s cwd, a `workdir` bind): under a user
    /// namespace of its own the sandbox writes there as the directory's owner (idmapped mount).
    /// false for a scratch dir the caller hands to Sandbox::host_identity() itself.
    bool idmap_to_owner = true;
};

/// The steps for a policy, in execution order: read_only, read_write, hidden, tmpfs, workdir,
/// /etc/resolv.conf (network isolated, when `resolv_conf` names the daemon's file), /dev, /sys
/// (network isolated), /proc (pid namespace), then the hidden, tmpfs and workdir steps at or
/// beneath one of those three (mounted before it, it would cover them). Empty when the mount
/// namespace is off.
/// Paths are normalised ("/usr/" -> "/usr"); errors name the policy key of a relative, empty or
/// ".."-containing path.
///
/// `resolv_conf`: the daemon-generated resolv.conf naming the session's own DNS resolver
/// (sessions/network/dns_resolver.hpp), what the sandbox reads at /etc/resolv.conf whether the
/// host has a file, a symlink (systemd-resolved's stub) or nothing there (a `resolv_conf` step).
/// Last of the file steps so that no policy bind of /etc covers it.
Result<std::vector<MountStep>> compile_mount_plan(const Policy& policy,
                                                  const WorkdirBinding& workdir,
                                                  const std::string& resolv_conf = {});

/// "ro-bind /usr -> /usr" etc., one line per step (for `corral policy check --plan` and tests).
std::string describe_mount_plan(const std::vector<MountStep>& plan);

}  // namespace corral
