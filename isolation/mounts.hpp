#pragma once
// Executes a mount plan (mount_plan.hpp) inside the namespace holder's new mount namespace.
//
// The plan is turned, in the parent, into concrete operations with every path spelled out
// (prepare_mounts), because the holder is cloned from a multithreaded daemon and must not
// allocate. The sequence the operations encode:
//   1. make / rprivate, so nothing we mount propagates back to the host;
//   2. mount a staging tmpfs on /tmp and pivot_root into it: the host tree is now /oldroot, and
//      /oldroot/tmp shows the host's /tmp again (the staging mount moved away from it);
//   3. /newroot becomes one recursive bind of the host's root; only when the plan needs a
//      top-level mount point the host lacks (/workspace) is it instead a tmpfs receiving one
//      recursive bind per top-level host entry (symlinks recreated), so that mount point is
//      created in corral's tmpfs, never on the host;
//   4. the policy's steps (the daemon's resolv.conf wherever /etc/resolv.conf leads, see
//      add_resolv_conf in mounts.cpp); every pathname unix socket the host has bound and the
//      sandbox would see is masked (issue 10 item 3); then the corral-made tmpfs mounts (root,
//      hidden dirs, /dev) become read-only;
//   5. pivot_root into /newroot and detach the old tree.

#include <optional>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "base/unique_fd.hpp"
#include "isolation/mount_plan.hpp"

namespace corral {

/// One concrete operation of the holder.
struct MountOp {
    enum class Kind {
        make_rprivate,     ///< mount(NULL, target, NULL, MS_REC|MS_PRIVATE)
        mount_fs,          ///< mount(source=fstype, target, fstype, flags, data)
        mkdir,             ///< one directory; an existing one is fine
        mkdir_parents,     ///< mkdir -p (only inside corral's own tmpfs mounts)
        touch,             ///< empty file as a mount point for a file bind
        bind,              ///< bind mount source -> target (recursive when `recursive`)
        set_readonly,      ///< mount_setattr(MOUNT_ATTR_RDONLY), AT_RECURSIVE when `recursive`
        set_attributes,    ///< mount_setattr(attr_set = `flags`, MOUNT_ATTR_*), AT_RECURSIVE too
        attach_tree,       ///< move_mount(`fd`, "", target): a detached tree the parent made
        /// attach_tree onto `target` (relative) beneath the directory `source`, opened with
        /// openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS): a path the parent resolved is
        /// mounted on as it was resolved, or not at all (ELOOP), never through a swapped link
        attach_tree_beneath,
        /// What the session's own /proc or /sys (`data`: where it is mounted; a fresh one, or
        /// the host's /proc, whose /proc/sys/net shows the reader's network namespace) has at
        /// `target`, hidden as found there when the mounts are made: nothing (nothing to hide),
        /// a directory (an empty read-only tmpfs over it), anything else (`source`, /dev/null,
        /// bound read-only over it). Reached from `data` without following any link, and a
        /// link there refused (ELOOP): /proc/net is each reader's own self/net, never one
        /// process's
        hide_if_present,
        /// `target` in the session's own fresh /proc (`data`) bound read-only onto itself, with
        /// what is mounted beneath it, where it is there; reached as hide_if_present's
        readonly_if_present,
        /// A writable tmpfs (nosuid, nodev, mode 1777; `source` its size in bytes, "" for
        /// tmpfs's default) onto the directory the session's own /proc or /sys (`data`, as
        /// hide_if_present's) has at `target`, reached as hide_if_present's; fails (ENOENT, ENOTDIR) where it has
        /// none: what a narrowed host shows of /proc says nothing of the session's
        tmpfs_at_setup,
        symlink,           ///< symlink(source, target)
        pivot_to_staging,  ///< pivot_root(target, source) then chdir /
        pivot_into,  ///< chdir target; pivot_root(".", "."); umount2(".", MNT_DETACH); chdir /
    };
    Kind kind;
    std::string source;
    std::string target;
    std::string data;
    unsigned long flags = 0;
    bool recursive = false;
    std::string step;       ///< what an error names: "mount proc on /proc"
    int fd = -1;            ///< attach_tree: the detached tree (owned by PreparedMounts)
    bool optional = false;  ///< a failure is ignored (a socket that vanished before it was masked)
    /// Places a path the policy named (filesystem.hidden, filesystem.tmpfs) where only the
    /// session's own /proc or /sys says what is there: not finding it is the policy's to change
    /// (HTTP 422 invalid_policy), not a failure of the host's (ChildReport::policy_path_failure).
    bool policy_path = false;
    /// bind: when nonzero, what the target must be once mounted (st_dev, st_ino); otherwise the
    /// mount is undone and the op fails (a path swapped since it was resolved)
    dev_t expect_dev = 0;
    ino_t expect_ino = 0;
};

/// The operations for one holder, in order, and the detached trees they attach.
struct PreparedMounts {
    std::vector<MountOp> ops;
    /// Detached copies (open_tree OPEN_TREE_CLONE) the holder moves into place: made by the
    /// parent, which runs as root in the host's user namespace, so the holder never has to walk
    /// the host path (a session dir 0700 stays closed to its own sandbox identity) and the
    /// parent can still idmap them after the holder's user namespace exists.
    std::vector<UniqueFd> trees;
    /// The workdir's detached tree (-1: bound by path, e.g. a caller without CAP_SYS_ADMIN) and
    /// its host path.
    int workdir_tree = -1;
    std::string workdir_source;

    /// A copy without the detached trees, which only this one owns (so it cannot simply be
    /// copied): `ops` still name them by number, for a holder cloned from a table where those
    /// numbers are renumbered copies (sandbox.cpp, clone_holder_on_worker). `workdir_tree`, one
    /// of the trees, is -1 in the copy.
    PreparedMounts without_trees() const;
};

/// Who the sandbox can be on the host when it has a user namespace of its own (a leased range,
/// or an unprivileged caller's own uid): any uid and gid its maps give it (root inside may
/// setuid to each), and no capability of it applies to host inodes. So it can connect() only to
/// a unix socket whose mode lets one of those uids, gids or `groups` write.
struct SocketReach {
    uid_t uid_base = 0;
    uint32_t uid_count = 1;
    gid_t gid_base = 0;
    uint32_t gid_count = 1;
    std::vector<gid_t> groups;  ///< supplementary groups it keeps (an unprivileged caller's)
};

/// At most this many host sockets are masked for one sandbox: each is a bind mount made at
/// every session start. More is refused with an error naming where they are (issue 10's second
/// round: an unbounded walk and one mount per host socket, however many the host has).
constexpr size_t kMaxMaskedSockets = 1024;

/// Turns a plan into operations: lists the host's top-level entries, resolves symlinks of policy
/// paths on the host, skips read-only binds and hidden paths that do not exist, and refuses
/// targets that would have to be created on the host. Lists the host's bound unix sockets to
/// mask those the sandbox could connect to: all it can see without `reach`, those whose mode
/// lets `reach` write with it (and every one it sees through the workdir, which is idmapped to
/// its owner). Runs in the parent.
Result<PreparedMounts> prepare_mounts(const std::vector<MountStep>& plan,
                                      const std::optional<SocketReach>& reach = std::nullopt);

/// Runs the operations (holder side, async-signal-safe). Returns nullptr on success, else the
/// failed operation with errno set.
const MountOp* execute_mounts(const PreparedMounts& mounts) noexcept;

}  // namespace corral
