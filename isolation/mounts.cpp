#include "isolation/mounts.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <tuple>

#include "base/file_io.hpp"
#include "base/mount_setattr.hpp"
#include "base/openat2.hpp"
#include "base/path_walk.hpp"
#include "isolation/host_unix_sockets.hpp"

namespace corral {
namespace {

using Op = MountOp::Kind;

constexpr const char* kStaging = "/tmp";  // any host directory; shadowed only until the pivot
constexpr const char* kOldRoot = "/oldroot";
constexpr const char* kNewRoot = "/newroot";
constexpr unsigned long kTmpfsFlags = MS_NOSUID | MS_NODEV;

std::string old_path(const std::string& host) {
    return host == "/" ? kOldRoot : kOldRoot + host;
}
std::string new_path(const std::string& inside) {
    return inside == "/" ? kNewRoot : kNewRoot + inside;
}

/// Whether `path` is `prefix` or lies beneath it.
bool is_within(const std::string& path, const std::string& prefix) {
    if (prefix == "/") return true;
    return path == prefix ||
           (path.size() > prefix.size() && path.compare(0, prefix.size(), prefix) == 0 &&
            path[prefix.size()] == '/');
}

/// A mount the plan has put in place so far: where it is and what it shows.
struct Placed {
    std::string target;
    bool corral_owned;     ///< a corral tmpfs: mount points may be created in it
    std::string source;    ///< host path shown there (binds)
    bool workdir = false;  ///< the workdir: idmapped to its owner, whoever the sandbox is
};

/// What the new root starts as.
enum class RootKind {
    host_bind,  ///< one recursive bind of the host's `/`: a few mounts, whatever the host has
    synthetic,  ///< a corral tmpfs with one bind per top-level host entry, so top-level mount
                ///< points the host lacks (/workspace) can be created without touching the host
};

/// Builds the operations, tracking what is mounted where so each new mount point is either
/// known to exist or created in a corral-owned tmpfs.
class Builder {
  public:
    std::vector<MountOp> ops;
    std::vector<UniqueFd> trees;  ///< detached trees the ops attach
    int workdir_tree = -1;
    std::string workdir_source;
    /// Set when a mount point is missing directly beneath a host-bound root: the plan needs the
    /// synthetic root.
    bool needs_synthetic_root = false;

    MountOp& add(Op kind, std::string source, std::string target, std::string step,
                 unsigned long flags = 0, bool recursive = false, std::string data = {}) {
        return ops.emplace_back(MountOp{kind, std::move(source), std::move(target),
                                        std::move(data), flags, recursive, std::move(step)});
    }

    void place(const std::string& target, bool owned, const std::string& source = {}) {
        placed_.push_back(Placed{target, owned, source});
    }

    /// Makes sure `target` (inside path) exists as a directory or file to mount on.
    Status ensure_mount_point(const std::string& target, bool is_dir) {
        const Placed* covering = this->covering(target);
        if (covering != nullptr && covering->target == target) return {};  // a mount point
        if (covering == nullptr || covering->corral_owned) {
            if (is_dir) {
                add(Op::mkdir_parents, {}, new_path(target), "create mount point `" + target + "`");
            } else {
                add(Op::mkdir_parents, {}, new_path(parent_of(target)),
                    "create mount point `" + target + "`");
                add(Op::touch, {}, new_path(target), "create mount point `" + target + "`");
            }
            return {};
        }
        std::string rest = target.substr(covering->target == "/" ? 0 : covering->target.size());
        std::string on_host = covering->source == "/" ? rest : covering->source + rest;
        struct stat st;
        if (::stat(on_host.c_str(), &st) != 0) {
            const int saved = errno;
            if (covering->target == "/" && top_level_missing(target)) needs_synthetic_root = true;
            // The policy's path: one the host does not have is the caller's to change (422).
            if (saved == ENOENT || saved == ENOTDIR)
                return policy_refusal("mount point `" + target +
                                      "` does not exist on the host (corral never creates it "
                                      "there)");
            return sys_error(saved, "mount point `" + target + "`");
        }
        return {};
    }

    /// Marks the last placed mount as the workdir.
    void mark_workdir() { placed_.back().workdir = true; }

    /// Whether a mount placed so far is at `dir`, beneath it, or holds it inside the workdir
    /// (covering `dir` whole would hide that mount, or part of the job's own directory).
    bool covering_would_hide_mounts(const std::string& dir) const {
        for (const auto& p : placed_) {
            if (p.target != "/" && is_within(p.target, dir)) return true;
            if (p.workdir && is_within(dir, p.target)) return true;
        }
        return false;
    }

    /// Where the host path `host` shows inside the new root, if a host bind placed so far shows
    /// it and nothing placed later covers it; `*through_workdir` says whether it shows there
    /// through the workdir's mount.
    std::optional<std::string> visible_at(const std::string& host,
                                          bool* through_workdir = nullptr) const {
        for (size_t i = placed_.size(); i-- > 0;) {
            const Placed& p = placed_[i];
            if (p.corral_owned || p.source.empty() || !is_within(host, p.source)) continue;
            std::string rest = host.substr(p.source == "/" ? 0 : p.source.size());
            std::string inside = p.target == "/" ? (rest.empty() ? "/" : rest) : p.target + rest;
            for (size_t j = placed_.size(); j-- > i + 1;) {
                if (is_within(inside, placed_[j].target)) return std::nullopt;  // covered
            }
            if (through_workdir) *through_workdir = p.workdir;
            return inside;
        }
        return std::nullopt;
    }

    /// What the sandbox will find at the inside path `inside` (absolute, normalised) with the
    /// mounts placed so far: looked up on the host through the mount that shows it, so nothing
    /// is resolved outside what the sandbox sees.
    struct ViewEntry {
        enum class Type { missing, directory, file, symlink } type = Type::missing;
        std::string link;                  ///< symlink: its text
        std::string host;                  ///< the host path shown there (host binds)
        const Placed* covering = nullptr;  ///< the mount it lies in; nullptr: none placed
    };
    ViewEntry look_up(const std::string& inside) const {
        ViewEntry entry;
        entry.covering = covering(inside);
        const Placed* p = entry.covering;
        if (p == nullptr) return entry;
        if (p->corral_owned) {
            // A corral tmpfs holds only the mount points made in it (and, as the synthetic
            // root, the host's top-level symlinks).
            if (p->target == inside) entry.type = ViewEntry::Type::directory;
            for (const auto& q : placed_)
                if (q.target != inside && is_within(q.target, inside))
                    entry.type = ViewEntry::Type::directory;
            if (entry.type == ViewEntry::Type::missing && p->target == "/" &&
                parent_of(inside) == "/")
                read_link(inside, entry);
            return entry;
        }
        const std::string rest = inside.substr(p->target == "/" ? 0 : p->target.size());
        entry.host = p->source == "/" ? (rest.empty() ? "/" : rest) : p->source + rest;
        struct stat st;
        if (::lstat(entry.host.c_str(), &st) != 0) return entry;
        if (S_ISLNK(st.st_mode)) {
            read_link(entry.host, entry);
        } else {
            entry.type = S_ISDIR(st.st_mode) ? ViewEntry::Type::directory : ViewEntry::Type::file;
        }
        return entry;
    }

    /// Follows `path` through the view the way the kernel will once the sandbox runs, with `/`
    /// the sandbox's root: an absolute link starts there and `..` at the root stays there, as
    /// openat2(RESOLVE_IN_ROOT) does (and systemd-nspawn's chase() with CHASE_PREFIX_ROOT for a
    /// container's resolv.conf). Returns the path it ends at (no symlink left in it) and what
    /// is there in `*last`; a missing part ends it. ELOOP after 40 links, as the kernel.
    Result<std::string> chase(std::string path, ViewEntry* last) const {
        for (int hops = 0; hops <= 40; ++hops) {
            const std::vector<std::string> parts = path_components(path);
            std::string done;  // "" is the root
            bool followed = false;
            for (size_t i = 0; i < parts.size() && !followed; ++i) {
                if (parts[i] == "..") {
                    done = drop_last_component(done);
                    continue;
                }
                const std::string next = done + "/" + parts[i];
                // Their links are the kernel's (/proc/self/root leads out of any root, as
                // RESOLVE_NO_MAGICLINKS knows), and they are mounted later, over the result.
                for (const char* kernel : {"/dev", "/proc", "/sys"})
                    if (is_within(next, kernel))
                        return plain_error("`" + path + "` leads inside " + kernel);
                ViewEntry entry = look_up(next);
                std::string rest;
                for (size_t j = i + 1; j < parts.size(); ++j) rest += "/" + parts[j];
                if (entry.type == ViewEntry::Type::symlink) {
                    path = (entry.link.rfind('/', 0) == 0 ? "" : done + "/") + entry.link + rest;
                    followed = true;
                } else if (entry.type == ViewEntry::Type::missing) {
                    // What is missing will be created: only plain names may follow.
                    for (size_t j = i + 1; j < parts.size(); ++j)
                        if (parts[j] == "..") return sys_error(ENOENT, "`" + path + "`");
                    std::string out = next;
                    for (size_t j = i + 1; j < parts.size(); ++j) out += "/" + parts[j];
                    *last = entry;
                    return out;
                } else if (entry.type == ViewEntry::Type::file) {
                    if (!rest.empty()) return sys_error(ENOTDIR, "`" + next + "`");
                    *last = entry;
                    return next;
                } else {
                    done = next;
                }
            }
            if (!followed) {
                *last = look_up(done.empty() ? "/" : done);
                return done.empty() ? "/" : done;
            }
        }
        return sys_error(ELOOP, "`" + path + "`: too many symbolic links");
    }

    /// Replaces the host directory shown at `dir` by a corral tmpfs holding what was there, so
    /// that a file the host lacks can be created in it: the current view of `dir` is bound
    /// aside in the staging root, a tmpfs mounted over `dir`, and each entry bound back from
    /// the view (hidden files inside stay hidden: a recursive bind of a path takes the mounts on
    /// it), symlinks recreated. `host` is the host directory shown there.
    Status mirror_directory(const std::string& dir, const std::string& host) {
        const std::string aside = "/mirror";
        const std::string what = "mirror " + dir + " into a corral tmpfs";
        struct CloseDir {
            void operator()(DIR* d) const { ::closedir(d); }
        };
        std::unique_ptr<DIR, CloseDir> listing(::opendir(host.c_str()));
        if (!listing) return sys_error("list `" + host + "`");
        add(Op::mkdir, {}, aside, what);
        add(Op::bind, new_path(dir), aside, what, 0, true);
        add(Op::mount_fs, "tmpfs", new_path(dir), what, kTmpfsFlags, false, "mode=0755,size=1m");
        std::vector<Placed> beneath;
        for (const auto& p : placed_)
            if (p.target != dir && is_within(p.target, dir)) beneath.push_back(p);
        place(dir, true);
        while (dirent* entry = ::readdir(listing.get())) {
            const std::string name = entry->d_name;
            if (name == "." || name == "..") continue;
            const std::string from = host + "/" + name;
            const std::string inside = (dir == "/" ? "" : dir) + "/" + name;
            struct stat st;
            if (::lstat(from.c_str(), &st) != 0) continue;
            if (S_ISLNK(st.st_mode)) {
                ViewEntry link;
                read_link(from, link);
                add(Op::symlink, link.link, new_path(inside), what);
                continue;
            }
            add(S_ISDIR(st.st_mode) ? Op::mkdir : Op::touch, {}, new_path(inside), what);
            add(Op::bind, aside + "/" + name, new_path(inside), what, 0, true);
            place(inside, false, from);
        }
        // The mounts beneath `dir` came along with the entries' binds.
        placed_.insert(placed_.end(), beneath.begin(), beneath.end());
        return {};
    }

    /// Whether what shows `target` is a corral tmpfs placed at or beneath `top` (a policy tmpfs
    /// beneath a fresh /proc or /sys): mount points are made in it, as anywhere corral owns.
    bool in_corral_tmpfs_beneath(const std::string& target, const std::string& top) const {
        const Placed* found = covering(target);
        return found != nullptr && found->corral_owned && is_within(found->target, top);
    }

    /// A directory of the session's /proc or /sys hidden when the mounts are made
    /// (Op::hide_if_present): an empty read-only tmpfs if it is a directory, nothing else.
    void hide_at_setup(const std::string& path) { hidden_at_setup_.push_back(path); }
    /// The hide at setup that `target` lies beneath, if any.
    const std::string* hidden_at_setup_above(const std::string& target) const {
        for (const auto& hidden : hidden_at_setup_)
            if (target != hidden && is_within(target, hidden)) return &hidden;
        return nullptr;
    }

  private:
    std::vector<Placed> placed_;
    std::vector<std::string> hidden_at_setup_;

    /// The mount that shows `target`: the deepest, of two at one path (a tmpfs over a host bind
    /// of /tmp) the later, which is on top.
    const Placed* covering(const std::string& target) const {
        const Placed* found = nullptr;
        for (const auto& p : placed_)
            if (is_within(target, p.target) &&
                (found == nullptr || p.target.size() >= found->target.size()))
                found = &p;
        return found;
    }

    static void read_link(const std::string& host, ViewEntry& entry) {
        char link[PATH_MAX];
        const ssize_t n = ::readlink(host.c_str(), link, sizeof link - 1);
        if (n <= 0) return;
        entry.type = ViewEntry::Type::symlink;
        entry.link.assign(link, static_cast<size_t>(n));
    }

    static bool top_level_missing(const std::string& target) {
        std::string top = target.substr(0, target.find('/', 1));
        struct stat st;
        return ::lstat(top.c_str(), &st) != 0 && errno == ENOENT;
    }
};

void add_staging(Builder& b) {
    b.add(Op::make_rprivate, {}, "/", "make / private");
    b.add(Op::mount_fs, "tmpfs", kStaging, "mount staging tmpfs", kTmpfsFlags, false,
          "mode=0700,size=64k");
    b.add(Op::mkdir, {}, std::string(kStaging) + kOldRoot, "create staging dirs");
    b.add(Op::mkdir, {}, std::string(kStaging) + kNewRoot, "create staging dirs");
    b.add(Op::pivot_to_staging, std::string(kStaging) + kOldRoot, kStaging,
          "pivot_root to staging");
}

void add_host_root(Builder& b) {
    b.add(Op::bind, kOldRoot, kNewRoot, "bind /", 0, true);
    b.place("/", false, "/");
}

/// One bind per top-level host entry; returns the bound names (for a read-only "/").
Result<std::vector<std::string>> add_root_entries(Builder& b) {
    b.add(Op::mount_fs, "tmpfs", kNewRoot, "mount root tmpfs", kTmpfsFlags, false,
          "mode=0755,size=1m");
    b.place("/", true);
    std::vector<std::string> bound;
    struct CloseDir {
        void operator()(DIR* d) const { ::closedir(d); }
    };
    std::unique_ptr<DIR, CloseDir> dir(::opendir("/"));
    if (!dir) return sys_error("list `/`");
    while (dirent* entry = ::readdir(dir.get())) {
        std::string name = entry->d_name;
        if (name == "." || name == "..") continue;
        std::string path = "/" + name;
        struct stat st;
        if (::lstat(path.c_str(), &st) != 0) continue;
        if (S_ISLNK(st.st_mode)) {
            char link[PATH_MAX];
            ssize_t n = ::readlink(path.c_str(), link, sizeof link - 1);
            if (n < 0) continue;
            b.add(Op::symlink, std::string(link, static_cast<size_t>(n)), new_path(path),
                  "symlink " + path);
        } else if (S_ISDIR(st.st_mode) || S_ISREG(st.st_mode)) {
            b.add(S_ISDIR(st.st_mode) ? Op::mkdir : Op::touch, {}, new_path(path),
                  "create mount point `" + path + "`");
            b.add(Op::bind, old_path(path), new_path(path), "bind " + path, 0, true);
            b.place(path, false, path);
            bound.push_back(path);
        }
    }
    return bound;
}

Status add_bind(Builder& b, const MountStep& step) {
    bool read_only = step.kind == MountStep::Kind::bind_read_only;
    auto source = real_path(step.source);
    if (!source) {
        if (read_only && errno == ENOENT) return {};  // nothing there to protect
        return sys_error("bind source `" + step.source + "`");
    }
    // A policy path names what the sandbox sees at that path: bind where the host resolves it
    // (/lib64 -> /usr/lib64), so no target path crosses a symlink inside the new root.
    std::string target = step.source == step.target ? *source : step.target;
    struct stat st;
    if (::stat(source->c_str(), &st) != 0) return sys_error("stat `" + *source + "`");
    CORRAL_TRY(b.ensure_mount_point(target, S_ISDIR(st.st_mode)), "");
    std::string what = (read_only ? "ro-bind " : "bind ") + *source + " -> " + target;
    if (read_only && step.clone_in_parent) {
        // A detached read-only clone made here, attached by the holder (as the workdir is): the
        // holder never walks the path, which lies beneath a directory it may not enter.
        UniqueFd tree(static_cast<int>(::syscall(SYS_open_tree, AT_FDCWD, source->c_str(),
                                                 OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC)));
        if (tree) {
            if (!set_tree_attributes(tree.get(), false,
                                     MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                                         MOUNT_ATTR_NOEXEC))
                return sys_error(what + ": read-only");
            b.add(Op::attach_tree, {}, new_path(target), what);
            b.ops.back().fd = tree.get();
            b.trees.push_back(std::move(tree));
            b.place(target, false, *source);
            return {};
        }
        if (errno != EPERM && errno != ENOSYS) return sys_error(what + ": open_tree");
    }
    b.add(Op::bind, old_path(*source), new_path(target), what, 0, true);
    if (read_only) {
        b.add(Op::set_readonly, {}, new_path(target), what, 0, true);
    } else {
        // Issue 10 item 4: nothing the sandbox can write may carry a working setuid bit or a
        // device node (the host's own nosuid/nodev stay as they are on read-only parts).
        b.add(Op::set_attributes, {}, new_path(target), what + " nosuid,nodev",
              MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, true);
    }
    b.place(target, false, *source);
    return {};
}

/// The session's working directory. The parent (root in the host's user namespace) makes a
/// detached copy with open_tree(OPEN_TREE_CLONE) and marks it nosuid,nodev; the holder only moves
/// it into place. So the holder, running as the session's unprivileged identity, never walks the
/// host path (the session dir stays 0700), and sandbox.cpp can still idmap the copy once the
/// holder's user namespace exists (only a detached mount can be idmapped). A caller that may not
/// clone mounts (no CAP_SYS_ADMIN: an unprivileged `corral run`) binds by path instead.
///
/// With a descriptor of the directory (step.source_fd: `corral run`'s job directory, resolved
/// once by the caller), the clone is made from the descriptor and the path is not resolved
/// again: a job that swapped a component of it for a symlink since (CVE-2018-15664's
/// symlink-exchange race) gets its own directory bound, not the link's target.
Status add_workdir(Builder& b, const MountStep& step) {
    const bool by_fd = step.source_fd >= 0;
    auto source = by_fd ? std::optional<std::string>(step.source) : real_path(step.source);
    if (!source) return sys_error("workdir `" + step.source + "`");
    struct stat st;
    if ((by_fd ? ::fstat(step.source_fd, &st) : ::stat(source->c_str(), &st)) != 0)
        return sys_error("stat `" + *source + "`");
    if (!S_ISDIR(st.st_mode)) return sys_error(ENOTDIR, "workdir `" + *source + "`");
    const std::string& target = step.target;
    CORRAL_TRY(b.ensure_mount_point(target, true), "");
    std::string what = "bind " + *source + " -> " + target;
    UniqueFd tree(static_cast<int>(
        by_fd ? ::syscall(SYS_open_tree, step.source_fd, "",
                          OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE | AT_EMPTY_PATH)
              : ::syscall(SYS_open_tree, AT_FDCWD, source->c_str(),
                          OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE)));
    if (tree) {
        if (!set_tree_attributes(tree.get(), true, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV))
            return sys_error("workdir `" + *source + "`: nosuid,nodev");
        b.workdir_tree = tree.get();
        b.workdir_source = *source;
        b.add(Op::attach_tree, {}, new_path(target), what);
        b.ops.back().fd = tree.get();
        b.trees.push_back(std::move(tree));
    } else if (errno == EPERM || errno == ENOSYS) {
        // By path: a caller without CAP_SYS_ADMIN, whose job runs as that caller (a swapped
        // path shows the job nothing its caller could not open itself); but root gets here too
        // (an old kernel, an outer seccomp answering ENOSYS), and for root a swapped path is
        // CVE-2018-15664's race again. So what the path mounted must be the directory resolved
        // (its st_dev/st_ino, from the descriptor when there is one), or the bind is undone and
        // the sandbox refused (issue 10, red-team round 3).
        b.add(Op::bind, old_path(*source), new_path(target),
              what + " (by path: it must still be the directory resolved)", 0, true);
        b.ops.back().expect_dev = st.st_dev;
        b.ops.back().expect_ino = st.st_ino;
        b.add(Op::set_attributes, {}, new_path(target), what + " nosuid,nodev",
              MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, true);
    } else {
        return sys_error("workdir `" + *source + "`: open_tree");
    }
    b.place(target, false, *source);
    b.mark_workdir();
    return {};
}

/// The daemon's resolv.conf where the sandbox will read /etc/resolv.conf (step.target). On a
/// host whose /etc/resolv.conf is a symlink (systemd-resolved's ../run/systemd/resolve/
/// stub-resolv.conf, most Ubuntu hosts) the link is followed here, in the daemon, through the
/// sandbox's own view (Builder::chase: beneath its root, so no link can lead out of it) and the
/// file is bound where the link ends: created in a corral tmpfs (the fresh /run of `default`),
/// or over the host's file shown there. Where the host has no file to mount on (no
/// /etc/resolv.conf at all, a dangling link into a host directory), the directory that should
/// hold it is mirrored into a corral tmpfs (Builder::mirror_directory) and the file created
/// there; nothing is ever created on the host.
///
/// The holder mounts on the resolved path with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)
/// (Op::attach_tree_beneath): a link swapped into the path after it was resolved fails the
/// sandbox (ELOOP) instead of redirecting the mount, which is runc's CVE-2021-30465 (a
/// symlink-exchange race that moved a bind mount outside the container's root). The file itself
/// is a read-only clone made here (the holder never walks the daemon's state dir).
Status add_resolv_conf(Builder& b, const MountStep& step, std::vector<std::string>& owned_dirs) {
    const std::string what = "resolv.conf " + step.source + " -> " + step.target;
    Builder::ViewEntry last;
    auto resolved = b.chase(step.target, &last);
    if (!resolved) return std::move(resolved.error().context(what));
    const std::string target = *resolved;
    // The kernel file systems are mounted after this step and would cover it.
    for (const char* kernel : {"/dev", "/proc", "/sys"})
        if (is_within(target, kernel))
            return plain_error(what + ": it leads to `" + target + "`, inside " + kernel);
    if (target == "/" || last.type == Builder::ViewEntry::Type::directory)
        return sys_error(EISDIR, what + ": it leads to the directory `" + target + "`");
    if (last.type == Builder::ViewEntry::Type::missing && last.covering &&
        !last.covering->corral_owned) {
        // The deepest directory the sandbox sees on the way is the host's: mirror it.
        std::string dir = parent_of(target);
        while (dir != "/" && b.look_up(dir).type != Builder::ViewEntry::Type::directory)
            dir = parent_of(dir);
        if (dir == "/") {
            // A top-level entry the host lacks: the synthetic root can hold it (prepare_mounts).
            b.needs_synthetic_root = true;
            return sys_error(ENOENT, what + ": `" + target + "` needs a top-level mount point");
        }
        const Builder::ViewEntry shown = b.look_up(dir);
        if (shown.host.empty()) return plain_error(what + ": no directory to create it in");
        CORRAL_TRY(b.mirror_directory(dir, shown.host), what);
        owned_dirs.push_back(dir);
    }
    CORRAL_TRY(b.ensure_mount_point(target, false), what);
    auto source = real_path(step.source);
    if (!source) return sys_error(what);
    UniqueFd tree(static_cast<int>(
        ::syscall(SYS_open_tree, AT_FDCWD, source->c_str(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC)));
    if (!tree) return sys_error(what + ": open_tree");
    if (!set_tree_attributes(tree.get(), false,
                             MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                                 MOUNT_ATTR_NOEXEC))
        return sys_error(what + ": read-only");
    b.add(Op::attach_tree_beneath, kNewRoot, target.substr(1),
          what + (target == step.target ? "" : " (at " + target + ")"));
    b.ops.back().fd = tree.get();
    b.trees.push_back(std::move(tree));
    b.place(target, false, *source);
    return {};
}

/// Whether some identity of `reach` may write (hence connect to) a socket with this owner and
/// mode: as its owner, as a member of its group, or as anyone else (it can pick which).
bool may_connect(const SocketReach& reach, const struct stat& st) {
    const bool owner = st.st_uid >= reach.uid_base && st.st_uid - reach.uid_base < reach.uid_count;
    const bool group =
        (st.st_gid >= reach.gid_base && st.st_gid - reach.gid_base < reach.gid_count) ||
        std::find(reach.groups.begin(), reach.groups.end(), st.st_gid) != reach.groups.end();
    return (owner && (st.st_mode & S_IWUSR)) || (group && (st.st_mode & S_IWGRP)) ||
           (st.st_mode & S_IWOTH);
}

/// Whether the socket at `path` carries an access ACL. Its named entries (`setfacl -m
/// u:alice:rw`) grant what st_mode does not show (the group bits become the ACL's mask), so
/// may_connect cannot judge it; such a socket is treated as reachable, masked (issue 10,
/// red-team round 3). Conservative: any ACL, whoever it names.
bool has_access_acl(const std::string& path) {
    return ::lgetxattr(path.c_str(), "system.posix_acl_access", nullptr, 0) >= 0 || errno == ERANGE;
}

/// Issue 10 item 3: a read-only bind does not stop connect(), and a unix socket's file mode is the
/// only check the kernel makes. Every socket the host has bound where the sandbox would see it
/// (outside corral's own tmpfs mounts: /var/tmp, /var/lib/..., a corrald socket anywhere) and
/// could connect to gets /dev/null, read-only, bound over it: connect() then finds no socket
/// (ECONNREFUSED). Found by the kernel's list of bound sockets and their files' inodes
/// (host_unix_sockets.hpp: a name with a newline, a socket renamed into place after its bind or
/// bound by a relative name escaped the text of /proc/net/unix). Not covered (README: residual
/// risk): sockets bound after the session started, and socket files moved to another directory
/// or linked elsewhere, which a sandbox that can write where a masked host socket is (the
/// workdir) can do for the next session by renaming a directory above it; under `default` the
/// session's unprivileged identity still cannot connect to those that are not world-writable
/// (in the workdir, it owns them).
///
/// Bounded (issue 10, second round): with `reach` (a user namespace's host identity, which no
/// capability helps on host inodes), only sockets whose mode lets it write are masked, so a host
/// with thousands of private sockets (5000 root-owned 0755 ones: tests/security) costs one listing
/// of the host's sockets and a stat each, not thousands of mounts. Sockets under the workdir are
/// always masked (its idmapped mount makes the sandbox their owner). Beyond kMaxMaskedSockets,
/// the directories holding most of them are covered whole; what still exceeds it is refused,
/// naming some, rather than made into as many mounts.
Status mask_host_sockets(Builder& b, const std::optional<SocketReach>& reach) {
    std::vector<std::pair<std::string, std::string>> masks;  // inside, host
    for (auto& host : host_unix_socket_files()) {
        bool through_workdir = false;
        auto inside = b.visible_at(host, &through_workdir);
        if (!inside) continue;
        struct stat st;
        if (::lstat(host.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
        if (reach && !through_workdir && !may_connect(*reach, st) && !has_access_acl(host))
            continue;
        masks.emplace_back(std::move(*inside), std::move(host));
    }
    // Over the cap, directories holding many of them are covered whole by an empty read-only
    // tmpfs (one mount for all the sockets beneath, and for anything else there: the sandbox
    // sees less, never more). Any ancestor may be covered, not only a socket's own directory:
    // one socket in each of 1025 directories of /var/tmp must not refuse every session (issue
    // 10, red-team round 3: a denial of service by any local user). Never `/`, the workdir or a
    // directory holding it, or one with other mounts in it. Greedy, in one pass: the directory
    // with the most sockets beneath first, the deepest of equals (it hides the least).
    std::vector<std::string> covered;
    if (masks.size() > kMaxMaskedSockets) {
        std::map<std::string, size_t> beneath;  // coverable directory -> sockets beneath it
        std::map<std::string, bool> coverable;
        for (const auto& mask : masks) {
            for (std::string dir = parent_of(mask.first); dir != "/"; dir = parent_of(dir)) {
                auto [it, fresh] = coverable.try_emplace(dir, false);
                if (fresh) it->second = !b.covering_would_hide_mounts(dir);
                if (it->second) ++beneath[dir];
            }
        }
        std::vector<std::tuple<size_t, size_t, std::string>> order;  // count, depth, dir
        for (const auto& [dir, count] : beneath)
            if (count >= 2)
                order.emplace_back(
                    count, static_cast<size_t>(std::count(dir.begin(), dir.end(), '/')), dir);
        std::sort(order.rbegin(), order.rend());
        std::set<std::string> taken, holding_taken;  // covered; their ancestors
        auto under_taken = [&](const std::string& path) {
            for (std::string dir = path; dir != "/"; dir = parent_of(dir))
                if (taken.count(dir)) return true;
            return false;
        };
        size_t remaining = masks.size();
        // The deepest directory that alone brings it under the cap, when there is one (one
        // crowded directory: it, not a whole /var that also holds one more socket elsewhere).
        const std::string* alone = nullptr;
        size_t alone_depth = 0;
        for (const auto& [count, depth, dir] : order)
            if (remaining - (count - 1) <= kMaxMaskedSockets && (!alone || depth > alone_depth)) {
                alone = &dir;
                alone_depth = depth;
            }
        for (const auto& [count, depth, dir] : order) {
            if (remaining <= kMaxMaskedSockets) break;
            if (alone && &dir != alone) continue;
            // Sorted by count, an ancestor comes before its descendants unless they are equal:
            // one holding a covered directory, or beneath one, adds nothing.
            if (holding_taken.count(dir) || under_taken(dir)) continue;
            taken.insert(dir);
            covered.push_back(dir);
            for (std::string up = parent_of(dir); up != "/"; up = parent_of(up))
                holding_taken.insert(up);
            remaining -= count - 1;
        }
        std::erase_if(masks, [&](const auto& mask) { return under_taken(mask.first); });
    }
    if (masks.size() > kMaxMaskedSockets) {
        std::string some;
        for (size_t i = 0; i < 3; ++i) some += (i ? ", " : "") + masks[i].second;
        return plain_error(
            "the host has " + std::to_string(masks.size()) +
            " unix sockets this sandbox could see and connect to (" + some +
            ", ...); corral masks each one with a mount and makes at most " +
            std::to_string(kMaxMaskedSockets) +
            ": hide their directories in the policy (filesystem.hidden) or tighten their modes");
    }
    for (const auto& dir : covered)
        b.add(Op::mount_fs, "tmpfs", new_path(dir), "mask the sockets in " + dir,
              kTmpfsFlags | MS_RDONLY, false, "mode=0755,size=4k");
    for (const auto& [inside, host] : masks) {
        std::string what = "mask socket " + inside;
        b.add(Op::bind, old_path("/dev/null"), new_path(inside), what);
        b.ops.back().optional = true;
        b.add(Op::set_readonly, {}, new_path(inside), what);
        b.ops.back().optional = true;
    }
    return {};
}

void add_readonly_root(Builder& b, const std::vector<std::string>& root_entries) {
    for (const auto& entry : root_entries)
        b.add(Op::set_readonly, {}, new_path(entry), "read-only " + entry, 0, true);
}

/// A corral-owned dir beneath a new mount at `target` (/run/user under a fresh /run, a hidden
/// state dir under a hidden socket dir) is covered by it and can no longer be reached to be made
/// read-only at the end.
void forget_covered(std::vector<std::string>& owned_dirs, const std::string& target) {
    std::erase_if(owned_dirs,
                  [&](const std::string& dir) { return dir != target && is_within(dir, target); });
}

/// The host devices corral's /dev shows (add_dev), each where the host has it.
constexpr const char* kDevDevices[] = {"null", "zero", "full", "random", "urandom", "tty"};

/// The fresh kernel filesystems of a plan (/dev, /sys, /proc): what lies beneath them is the
/// session's, not the host's.
std::vector<std::string> fresh_kernel_filesystems(const std::vector<MountStep>& plan) {
    std::vector<std::string> fresh;
    for (const auto& step : plan)
        if (step.kind == MountStep::Kind::dev || step.kind == MountStep::Kind::proc ||
            step.kind == MountStep::Kind::sysfs)
            fresh.push_back(step.target);
    return fresh;
}

const std::string* fresh_filesystem_holding(const std::vector<std::string>& fresh,
                                            const std::string& path) {
    for (const auto& mount : fresh)
        if (is_within(path, mount)) return &mount;
    return nullptr;
}

bool all_digits(const std::string& name) {
    return !name.empty() && std::all_of(name.begin(), name.end(),
                                        [](char c) { return c >= '0' && c <= '9'; });
}

/// A hidden or tmpfs path as the session will find it: where, and what is there.
struct SessionPath {
    /// at_setup: beneath a fresh /proc or /sys, whose entries are the session's (its network
    /// namespace's interfaces, its pid namespace's), or beneath the host's /proc/sys/net, which
    /// shows each reader's network namespace: looked at when its mounts are made.
    enum class Kind { missing, directory, other, at_setup };
    std::string path;
    Kind kind = Kind::missing;
    std::string top;  ///< at_setup: the /proc or /sys it is looked up beneath
};

SessionPath::Kind kind_of(const struct stat& st) {
    return S_ISDIR(st.st_mode) ? SessionPath::Kind::directory : SessionPath::Kind::other;
}

/// A policy's hidden or tmpfs path at or beneath /proc (fresh or the host's), a fresh /sys or a
/// fresh /dev, as the session sees it. Resolving it on the host, as a path elsewhere is,
/// answered for the host: /proc/self/environ became /proc/<corrald's pid>/environ (another pid's
/// entry hidden, or none, and every session process's own /proc/self/environ left readable),
/// /dev/fd the host's /proc/self/fd. So the path is taken as written, and refused where a mount
/// cannot stand for every process of the session: a per-process directory of /proc (self,
/// thread-self, a pid: each process that looks sees its own, with the host's /proc as with a
/// fresh one), or a symbolic link, which the kernel resolves for each reader (/proc/net,
/// /proc/mounts, /dev/fd, /dev/stdin, /dev/ptmx, /sys/class/...). /dev is corral's own: what is
/// there is what add_dev makes, whatever the host's /dev holds (beneath /dev/pts, the session's
/// own devpts instance, nothing can be mounted). Beneath a fresh /proc or /sys, what is there is
/// the session's (an interface only its network namespace has, none of the host's), so the
/// hide is decided when the mounts are made (Op::hide_if_present); the host's entries only
/// refuse, early and by name, a link the host shows. Beneath the host's /proc (no pid namespace)
/// the host's entries are the session's, but for /proc/sys/net, which shows each reader's
/// network namespace: decided at setup too (an interface only the host has is nothing to hide
/// in a session with an isolated network).
Result<SessionPath> kernel_filesystem_path(const std::string& key, const std::string& target,
                                           const std::string& top, bool fresh) {
    const std::vector<std::string> parts = path_components(target.substr(top.size()));
    auto refuse = [&](const std::string& at, const std::string& why) {
        return policy_refusal(key + ": `" + target + "` lies beneath the session's " +
                           (fresh ? "fresh " : "") + top + ", where `" + at + "` " + why +
                           ": a mount there would not stand for every process of the session");
    };
    const char* link_why = "is a symbolic link (name what it leads to)";
    if (parts.empty()) return SessionPath{target, SessionPath::Kind::directory};
    const std::string first = top + "/" + parts[0];
    if (top == "/proc" &&
        (parts[0] == "self" || parts[0] == "thread-self" || all_digits(parts[0])))
        return refuse(first, "is a per-process directory");
    // Links into /proc/self in every procfs, whatever the host's view shows (a /proc narrowed to
    // processes has neither).
    if (top == "/proc" && (parts[0] == "net" || parts[0] == "mounts"))
        return refuse(first, link_why);
    if (top == "/dev") {
        for (const char* link : {"fd", "stdin", "stdout", "stderr", "ptmx"})
            if (parts[0] == link) return refuse(first, link_why);
        if (parts[0] == "pts" && parts.size() > 1)
            return refuse(first, "is the session's own devpts instance");
        if (parts.size() > 1) return SessionPath{target};  // shm is empty, the rest are files
        if (parts[0] == "pts" || parts[0] == "shm")
            return SessionPath{target, SessionPath::Kind::directory};
        for (const char* device : kDevDevices)
            if (parts[0] == device && ::access(first.c_str(), F_OK) == 0)
                return SessionPath{target, SessionPath::Kind::other};
        return SessionPath{target};
    }
    std::string at = top;
    struct stat st {};
    bool on_host = true;
    for (const auto& part : parts) {
        at += "/" + part;
        if (::lstat(at.c_str(), &st) != 0) {
            on_host = false;
            break;
        }
        if (S_ISLNK(st.st_mode)) return refuse(at, link_why);
    }
    if (fresh) return SessionPath{target, SessionPath::Kind::at_setup, top};
    // The host's /proc/sys/net is the reader's network namespace's: with an isolated network an
    // interface only the host has is not the session's (it failed the creation at setup).
    if (top == "/proc" && parts.size() >= 2 && parts[0] == "sys" && parts[1] == "net")
        return SessionPath{target, SessionPath::Kind::at_setup, top};
    if (!on_host) return SessionPath{target};  // the host's /proc is the session's
    return SessionPath{target, kind_of(st)};
}

/// The host's resolution of a path, link by link as the kernel goes (realpath's answer), that
/// stops where any step of the way enters one of the `tops`: the host's resolution of a path
/// through /proc is the host's, not the session's, and a magic link there (/proc/self/cwd,
/// /proc/self/root) leads through corrald's own cwd or root to a host path realpath would show
/// as an ordinary one.
struct HostResolution {
    std::string path;      // where it ends, or the step that went in with the rest of the way
    bool entered = false;  // whether it stopped at one of the `tops`
};

/// std::nullopt: a part is missing.
Result<std::optional<HostResolution>> resolve_on_host(const std::string& path,
                                                      const std::vector<std::string>& tops) {
    std::deque<std::string> todo;
    auto push_front_parts = [&](const std::string& text) {
        std::vector<std::string> parts = path_components(text);
        todo.insert(todo.begin(), parts.begin(), parts.end());
    };
    push_front_parts(path);
    std::string done;  // "" is the root
    for (int links = 0; !todo.empty();) {
        const std::string part = std::move(todo.front());
        todo.pop_front();
        if (part == "..") {
            done = drop_last_component(done);
            continue;
        }
        const std::string next = done + "/" + part;
        for (const auto& top : tops)
            if (is_within(next, top)) {
                HostResolution entered{next, true};  // with the rest, as the kernel would go on
                for (const auto& rest : todo) entered.path += "/" + rest;
                return std::optional<HostResolution>(std::move(entered));
            }
        struct stat st {};
        if (::lstat(next.c_str(), &st) != 0) return std::optional<HostResolution>();
        if (!S_ISLNK(st.st_mode)) {
            done = next;
            continue;
        }
        if (++links > 40) return sys_error(ELOOP, "`" + path + "`");
        char text[PATH_MAX];
        const ssize_t n = ::readlink(next.c_str(), text, sizeof text - 1);
        if (n <= 0) return sys_error("readlink `" + next + "`");
        text[n] = '\0';
        if (text[0] == '/') done.clear();
        push_front_parts(text);
    }
    return std::optional<HostResolution>(HostResolution{done.empty() ? "/" : done});
}

/// Where the session finds a policy's hidden or tmpfs path. Beneath /proc or a fresh /sys or
/// /dev: kernel_filesystem_path. Elsewhere: where the host resolves it, refused when the way
/// there enters /proc or a fresh kernel filesystem (/etc/mtab -> ../proc/self/mounts: mounted
/// over on the host's terms, it hid nothing of the session's; a link into /proc/self/cwd led
/// through corrald's cwd to whatever that held).
Result<SessionPath> policy_path_for_session(const std::string& key, const MountStep& step,
                                            const std::vector<std::string>& fresh) {
    if (const std::string* mount = fresh_filesystem_holding(fresh, step.target))
        return kernel_filesystem_path(key, step.target, *mount, true);
    if (is_within(step.target, "/proc"))
        return kernel_filesystem_path(key, step.target, "/proc", false);
    std::vector<std::string> tops = fresh;
    tops.push_back("/proc");
    auto resolved = resolve_on_host(step.target, tops);
    if (!resolved) return std::move(resolved.error().context(key));
    if (!*resolved) return SessionPath{step.target};
    const HostResolution& host = **resolved;
    if (host.entered) {
        const std::string* mount = fresh_filesystem_holding(fresh, host.path);
        return policy_refusal(key + ": `" + step.target + "` leads to `" + host.path +
                           "` on the host, in " +
                           (mount != nullptr ? "the session's fresh " + *mount : "/proc") +
                           ", which each process sees as its own; name the path there instead");
    }
    struct stat st {};
    if (::stat(host.path.c_str(), &st) != 0) return SessionPath{host.path};
    return SessionPath{host.path, kind_of(st)};
}

Status add_hide(Builder& b, const MountStep& step, std::vector<std::string>& owned_dirs,
                const std::vector<std::string>& fresh) {
    auto found = policy_path_for_session("filesystem.hidden", step, fresh);
    if (!found) return std::move(found.error());
    if (found->kind == SessionPath::Kind::missing) return {};  // nothing to hide
    const std::string& resolved = found->path;
    if (found->kind == SessionPath::Kind::at_setup) {
        // (In a policy tmpfs there, it finds what corral made: nothing but later mount points.)
        const bool in_tmpfs = b.in_corral_tmpfs_beneath(resolved, found->top);
        b.add(Op::hide_if_present, old_path("/dev/null"), new_path(resolved),
              "filesystem.hidden: hide " + resolved + " (as the session's " + found->top +
                  " has it)",
              0, false, new_path(found->top))
            .policy_path = true;
        if (!in_tmpfs) b.hide_at_setup(resolved);
        return {};
    }
    const bool is_dir = found->kind == SessionPath::Kind::directory;
    std::string what = "hide " + resolved;
    CORRAL_TRY(b.ensure_mount_point(resolved, is_dir), "");
    if (is_dir) {
        // Writable until the end, so later mount points (a workdir under /home) can be made in it.
        b.add(Op::mount_fs, "tmpfs", new_path(resolved), what, kTmpfsFlags, false,
              "mode=0755,size=1m");
        b.place(resolved, true);
        forget_covered(owned_dirs, resolved);
        owned_dirs.push_back(resolved);
    } else {
        b.add(Op::bind, old_path("/dev/null"), new_path(resolved), what);
        b.add(Op::set_readonly, {}, new_path(resolved), what);
        b.place(resolved, false, "/dev/null");
    }
    return {};
}

Status add_tmpfs(Builder& b, const MountStep& step, std::vector<std::string>& owned_dirs,
                 const std::vector<std::string>& fresh) {
    auto found = policy_path_for_session("filesystem.tmpfs", step, fresh);
    if (!found) return std::move(found.error());
    const std::string target = found->path;
    if (const std::string* hidden = b.hidden_at_setup_above(target))
        return policy_refusal("filesystem.tmpfs: `" + target + "` lies beneath `" + *hidden +
                           "`, hidden as the session's own filesystem has it when its mounts "
                           "are made (an empty read-only directory, or nothing): nothing can be "
                           "mounted there");
    if (found->kind == SessionPath::Kind::at_setup &&
        !b.in_corral_tmpfs_beneath(target, found->top)) {
        // Beneath a fresh /proc or /sys the mount point is the session's (nothing can be created
        // there): looked up when the mounts are made, as a hide there is.
        b.add(Op::tmpfs_at_setup, step.size != 0 ? std::to_string(step.size) : "",
              new_path(target),
              "filesystem.tmpfs: mount tmpfs on " + target + " (where the session's " +
                  found->top + " has that directory)",
              0, false, new_path(found->top))
            .policy_path = true;
        b.place(target, true);
        forget_covered(owned_dirs, target);
        return {};
    }
    // Not there: mounted where the policy says, the mount point made in a corral tmpfs or refused.
    CORRAL_TRY(b.ensure_mount_point(target, true), "");
    forget_covered(owned_dirs, target);
    std::string data = "mode=1777";
    if (step.size != 0) data += ",size=" + std::to_string(step.size);
    b.add(Op::mount_fs, "tmpfs", new_path(target), "mount tmpfs on " + target, kTmpfsFlags, false,
          data);
    b.place(target, true);
    return {};
}

Status add_dev(Builder& b, const MountStep& step, std::vector<std::string>& owned_dirs) {
    const std::string& dev = step.target;
    CORRAL_TRY(b.ensure_mount_point(dev, true), "");
    b.add(Op::mount_fs, "tmpfs", new_path(dev), "mount tmpfs on " + dev, MS_NOSUID | MS_NOEXEC,
          false, "mode=0755,size=64k");
    b.place(dev, true);
    owned_dirs.push_back(dev);
    for (const char* name : kDevDevices) {
        std::string host = std::string("/dev/") + name;
        if (::access(host.c_str(), F_OK) != 0) continue;
        std::string inside = dev + "/" + name;
        b.add(Op::touch, {}, new_path(inside), "create " + inside);
        b.add(Op::bind, old_path(host), new_path(inside), "bind " + host);
        // Issue 10 item 6: the bind is the host's inode; read-only, chmod/chown/utimes on it fail
        // (EROFS) while reads and writes of the device itself still work.
        b.add(Op::set_attributes, {}, new_path(inside), "read-only " + inside,
              MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC);
    }
    b.add(Op::mkdir, {}, new_path(dev + "/pts"), "create " + dev + "/pts");
    b.add(Op::mount_fs, "devpts", new_path(dev + "/pts"), "mount devpts on " + dev + "/pts",
          MS_NOSUID | MS_NOEXEC, false, "newinstance,ptmxmode=0666,mode=0620");
    b.add(Op::symlink, "pts/ptmx", new_path(dev + "/ptmx"), "symlink " + dev + "/ptmx");
    b.add(Op::mkdir, {}, new_path(dev + "/shm"), "create " + dev + "/shm");
    b.add(Op::mount_fs, "tmpfs", new_path(dev + "/shm"), "mount tmpfs on " + dev + "/shm",
          MS_NOSUID | MS_NODEV, false, "mode=1777");
    b.add(Op::symlink, "/proc/self/fd", new_path(dev + "/fd"), "symlink " + dev + "/fd");
    const char* stdio[] = {"stdin", "stdout", "stderr"};
    for (int i = 0; i < 3; ++i) {
        b.add(Op::symlink, "/proc/self/fd/" + std::to_string(i), new_path(dev + "/" + stdio[i]),
              "symlink " + dev + "/" + stdio[i]);
    }
    return {};
}

Status add_kernel_fs(Builder& b, const MountStep& step, const char* fstype, unsigned long flags) {
    CORRAL_TRY(b.ensure_mount_point(step.target, true), "");
    b.add(Op::mount_fs, fstype, new_path(step.target),
          std::string("mount ") + fstype + " on " + step.target, flags);
    return {};
}

/// A fresh procfs still exposes host-wide kernel knobs, and their permission check is by uid, not
/// capability: uid 0 without any capability may write /proc/sys/kernel/core_pattern, whose
/// "|program" form the host kernel runs as root on the next crash (the reason runc and Docker
/// mount these read-only or mask them). Make the knobs read-only and mask the files that leak
/// kernel memory, keys and timers. Only what exists on this kernel is touched.
void protect_proc(Builder& b, const std::string& proc) {
    // Whether each is there is the session's fresh /proc's to say, when it is mounted: the host's
    // may be narrowed (procfs `subset=pid`, systemd's ProcSubset=pid), and judged by it the
    // session's /proc/sys and /proc/sysrq-trigger were left writable.
    for (const char* name : {"sys", "sysrq-trigger", "irq", "bus", "fs"}) {
        b.add(Op::readonly_if_present, {}, new_path(proc + "/" + name),
              "read-only " + proc + "/" + name, 0, true, new_path(proc));
    }
    for (const char* name : {"kcore", "keys", "timer_list", "sched_debug"}) {
        b.add(Op::hide_if_present, old_path("/dev/null"), new_path(proc + "/" + name),
              "mask " + proc + "/" + name, 0, false, new_path(proc));
    }
}

// ---- holder side: async-signal-safe ----

/// mkdir -p without allocation: walks a stack copy of the path.
bool mkdir_parents(const char* path) noexcept {
    char buf[PATH_MAX];
    size_t len = 0;
    while (path[len] != '\0') {
        if (len + 1 >= sizeof buf) {
            errno = ENAMETOOLONG;
            return false;
        }
        buf[len] = path[len];
        ++len;
    }
    buf[len] = '\0';
    for (size_t i = 1; i <= len; ++i) {
        if (buf[i] != '/' && buf[i] != '\0') continue;
        char saved = buf[i];
        buf[i] = '\0';
        if (::mkdir(buf, 0755) != 0 && errno != EEXIST) return false;
        buf[i] = saved;
    }
    return true;
}

bool pivot_root(const char* new_root, const char* put_old) noexcept {
    return ::syscall(SYS_pivot_root, new_root, put_old) == 0;
}

/// Closes `fd` keeping errno.
void close_keeping_errno(int fd) noexcept {
    const int saved = errno;
    ::close(fd);
    errno = saved;
}

/// What the session's /proc or /sys (mounted at `top`, absolute) holds at `path` (absolute,
/// beneath it), opened with open_path_beneath_without_links: never what a link leads to, and a
/// link there itself refused (ELOOP); `found` is what it is. -1 with errno; ENOENT only where
/// `path` is not there: a `top` that cannot be opened (or is not absolute) fails as anything but
/// ENOENT, so that no caller takes it for "nothing to cover".
int open_in_kernel_filesystem(const char* top, const char* path, struct stat& found) noexcept {
    size_t n = 0;
    for (; top[n] != '\0'; ++n)
        if (path[n] != top[n]) {
            errno = EINVAL;
            return -1;
        }
    if (top[0] != '/' || path[n] != '/' || path[n + 1] == '\0') {
        errno = EINVAL;
        return -1;
    }
    const int root = ::open(top, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (root < 0) {
        if (errno == ENOENT) errno = ENXIO;
        return -1;
    }
    const int at = open_path_beneath_without_links(root, path + n + 1);
    close_keeping_errno(root);
    found = {};
    if (at >= 0 && (::fstat(at, &found) != 0 || S_ISLNK(found.st_mode))) {
        if (S_ISLNK(found.st_mode)) errno = ELOOP;
        close_keeping_errno(at);
        return -1;
    }
    return at;
}

/// Moves the detached mount `tree` onto what `at` names. Closes `tree`.
bool move_onto(int tree, int at) noexcept {
    const bool moved = ::syscall(SYS_move_mount, tree, "", at, "",
                                 MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) == 0;
    close_keeping_errno(tree);
    return moved;
}

/// A detached new tmpfs of `mode` and `size` (tmpfs's default where empty), mounted with
/// `attributes` (MOUNT_ATTR_*); -1 with errno.
int detached_tmpfs(const char* mode, const char* size, unsigned attributes) noexcept {
    const int fs = static_cast<int>(::syscall(SYS_fsopen, "tmpfs", FSOPEN_CLOEXEC));
    if (fs < 0) return -1;
    int tree = -1;
    if (::syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "source", "tmpfs", 0) == 0 &&
        ::syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "mode", mode, 0) == 0 &&
        (size[0] == '\0' ||
         ::syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "size", size, 0) == 0) &&
        ::syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, nullptr, nullptr, 0) == 0)
        tree = static_cast<int>(::syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC, attributes));
    close_keeping_errno(fs);
    return tree;
}

/// Whether a new mount API call (open_tree, fsopen, move_mount) failed for not being there for
/// us: an outer seccomp filter answering ENOSYS or EPERM (a kernel without them, before 5.2,
/// lacks mount_setattr too, which the by-path way needs as well: there it still fails closed).
/// The same mount is then made by path, as before the API was used: the path was just opened
/// without following a link (open_in_kernel_filesystem), and at setup nothing else runs in this
/// mount namespace, so it still names what was found.
bool mount_api_unavailable() noexcept { return errno == ENOSYS || errno == EPERM; }

/// `source` bound read-only onto `target` by path (with its submounts when `recursive`).
bool bind_readonly_by_path(const char* source, const char* target, bool recursive) noexcept {
    return ::mount(source, target, nullptr, MS_BIND | (recursive ? MS_REC : 0), nullptr) == 0 &&
           set_mount_attributes(AT_FDCWD, target, AT_NO_AUTOMOUNT | (recursive ? AT_RECURSIVE : 0),
                                MOUNT_ATTR_RDONLY);
}

/// Moves the detached `tree` (-1: not made, errno set) onto `at`; false with errno otherwise.
bool attach_made_tree(int tree, int at) noexcept { return tree >= 0 && move_onto(tree, at); }

/// Op::hide_if_present: what is at `at` (`found`, its stat; `target`, its path) covered, an
/// empty read-only tmpfs over a directory, `null` (/dev/null) bound read-only over anything else.
bool hide_found(int at, const struct stat& found, const char* target, const char* null) noexcept {
    const bool directory = S_ISDIR(found.st_mode);
    constexpr unsigned kHiddenDirectory =
        MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC;
    int tree = directory ? detached_tmpfs("0555", "4k", kHiddenDirectory)
                         : static_cast<int>(::syscall(SYS_open_tree, AT_FDCWD, null,
                                                      OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC));
    if (tree >= 0 && !directory && !set_tree_attributes(tree, false, MOUNT_ATTR_RDONLY)) {
        close_keeping_errno(tree);
        return false;
    }
    if (attach_made_tree(tree, at)) return true;
    if (!mount_api_unavailable()) return false;
    return directory ? ::mount("tmpfs", target, "tmpfs",
                               MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                               "mode=0555,size=4k") == 0
                     : bind_readonly_by_path(null, target, false);
}

/// Op::tmpfs_at_setup: a writable tmpfs of `size` onto the directory at `at` (`found`, `target`).
bool mount_tmpfs_onto(int at, const struct stat& found, const char* target,
                      const char* size) noexcept {
    if (!S_ISDIR(found.st_mode)) {
        errno = ENOTDIR;
        return false;
    }
    if (attach_made_tree(detached_tmpfs("1777", size, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV), at))
        return true;
    if (!mount_api_unavailable()) return false;
    char data[64] = "mode=1777";  // and ",size=N": a size of at most 20 digits
    size_t n = sizeof "mode=1777" - 1;
    if (size[0] != '\0') {
        for (const char* c = ",size="; *c != '\0';) data[n++] = *c++;
        for (size_t i = 0; size[i] != '\0' && n + 1 < sizeof data; ++i) data[n++] = size[i];
        data[n] = '\0';
    }
    return ::mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, data) == 0;
}

/// Op::readonly_if_present: what is at `at` (`target`) bound read-only onto itself, with its
/// submounts.
bool make_found_readonly(int at, const char* target) noexcept {
    const int tree = static_cast<int>(::syscall(
        SYS_open_tree, at, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE));
    if (tree >= 0 && !set_tree_attributes(tree, true, MOUNT_ATTR_RDONLY)) {
        close_keeping_errno(tree);
        return false;
    }
    if (attach_made_tree(tree, at)) return true;
    return mount_api_unavailable() && bind_readonly_by_path(target, target, true);
}

bool run_op(const MountOp& op) noexcept {
    const char* source = op.source.c_str();
    const char* target = op.target.c_str();
    switch (op.kind) {
        case Op::make_rprivate:
            return ::mount(nullptr, target, nullptr, MS_REC | MS_PRIVATE, nullptr) == 0;
        case Op::mount_fs:
            return ::mount(source, target, source, op.flags,
                           op.data.empty() ? nullptr : op.data.c_str()) == 0;
        case Op::mkdir:
            return ::mkdir(target, 0755) == 0 || errno == EEXIST;
        case Op::mkdir_parents:
            return mkdir_parents(target);
        case Op::touch: {
            // O_NOCTTY: the holder leads a session, and a terminal it opened would become its own.
            int fd = ::open(target, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0644);
            if (fd < 0) return errno == EEXIST;
            ::close(fd);
            return true;
        }
        case Op::bind: {
            if (::mount(source, target, nullptr, MS_BIND | (op.recursive ? MS_REC : 0), nullptr) !=
                0)
                return false;
            if (op.expect_ino == 0) return true;
            struct stat st {};
            if (::stat(target, &st) == 0 && st.st_dev == op.expect_dev &&
                st.st_ino == op.expect_ino)
                return true;
            (void)::umount2(target, MNT_DETACH);
            errno = EXDEV;
            return false;
        }
        case Op::set_readonly:
        case Op::set_attributes:
            return set_mount_attributes(
                AT_FDCWD, target, AT_NO_AUTOMOUNT | (op.recursive ? AT_RECURSIVE : 0),
                op.kind == Op::set_readonly ? MOUNT_ATTR_RDONLY : op.flags);
        case Op::attach_tree:
            return ::syscall(SYS_move_mount, op.fd, "", AT_FDCWD, target,
                             MOVE_MOUNT_F_EMPTY_PATH) == 0;
        case Op::attach_tree_beneath: {
            const int root = ::open(source, O_PATH | O_DIRECTORY | O_CLOEXEC);
            if (root < 0) return false;
            const int at = open_path_beneath_without_links(root, target);
            close_keeping_errno(root);
            if (at < 0) return false;
            const bool moved = ::syscall(SYS_move_mount, op.fd, "", at, "",
                                         MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) == 0;
            close_keeping_errno(at);
            return moved;
        }
        case Op::hide_if_present:
        case Op::readonly_if_present: {
            struct stat found;
            const int at = open_in_kernel_filesystem(op.data.c_str(), target, found);
            if (at < 0) return errno == ENOENT;  // not in the session's: nothing to cover
            const bool done = op.kind == Op::hide_if_present
                                  ? hide_found(at, found, target, source)
                                  : make_found_readonly(at, target);
            close_keeping_errno(at);
            return done;
        }
        case Op::tmpfs_at_setup: {
            struct stat found;
            const int at = open_in_kernel_filesystem(op.data.c_str(), target, found);
            if (at < 0) return false;  // the policy's mount point: not there is a failure
            const bool done = mount_tmpfs_onto(at, found, target, source);
            close_keeping_errno(at);
            return done;
        }
        case Op::symlink:
            return ::symlink(source, target) == 0;
        case Op::pivot_to_staging:
            return pivot_root(target, source) && ::chdir("/") == 0;
        case Op::pivot_into:
            // pivot_root(".", ".") stacks the old root on the new one; detaching "." then drops
            // the old tree (staging tmpfs and the host's mounts beneath it) from our namespace.
            return ::chdir(target) == 0 && pivot_root(".", ".") &&
                   ::umount2(".", MNT_DETACH) == 0 && ::chdir("/") == 0;
    }
    errno = EINVAL;
    return false;
}

/// Whether a later tmpfs step mounts over step `i`'s target (or a directory above it): the
/// default preset hides /run/user and then puts a fresh /run over it. Nothing of step `i` would
/// be visible, so it is not mounted at all. Paths compare as written (already normalized).
bool covered_later(const std::vector<MountStep>& plan, size_t i) {
    const MountStep& step = plan[i];
    if (step.target == "/" || step.kind == MountStep::Kind::dev ||
        step.kind == MountStep::Kind::proc || step.kind == MountStep::Kind::sysfs)
        return false;
    for (size_t j = i + 1; j < plan.size(); ++j) {
        if (plan[j].kind == MountStep::Kind::tmpfs && is_within(step.target, plan[j].target))
            return true;
    }
    return false;
}

/// The operations of `plan` on a root of the given kind. `b.needs_synthetic_root` tells a
/// failure the other kind of root would not have.
Result<PreparedMounts> build_ops(Builder& b, const std::vector<MountStep>& plan, RootKind root,
                                 const std::optional<SocketReach>& reach) {
    add_staging(b);
    std::vector<std::string> root_entries = {"/"};
    std::vector<std::string> owned_dirs;
    const std::vector<std::string> fresh = fresh_kernel_filesystems(plan);
    if (root == RootKind::host_bind) {
        add_host_root(b);
    } else {
        auto entries = add_root_entries(b);
        if (!entries) return std::move(entries.error());
        root_entries = std::move(*entries);
        owned_dirs.push_back("/");
    }
    for (size_t i = 0; i < plan.size(); ++i) {
        const MountStep& step = plan[i];
        if (covered_later(plan, i)) continue;
        switch (step.kind) {
            case MountStep::Kind::bind_read_only:
                if (step.target == "/") {
                    add_readonly_root(b, root_entries);
                    break;
                }
                [[fallthrough]];
            case MountStep::Kind::bind_read_write:
                CORRAL_TRY(add_bind(b, step), "");
                break;
            case MountStep::Kind::workdir:
                CORRAL_TRY(add_workdir(b, step), "");
                break;
            case MountStep::Kind::hide:
                CORRAL_TRY(add_hide(b, step, owned_dirs, fresh), "");
                break;
            case MountStep::Kind::tmpfs:
                CORRAL_TRY(add_tmpfs(b, step, owned_dirs, fresh), "");
                break;
            case MountStep::Kind::dev:
                CORRAL_TRY(add_dev(b, step, owned_dirs), "");
                break;
            case MountStep::Kind::proc:
                CORRAL_TRY(add_kernel_fs(b, step, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC), "");
                protect_proc(b, step.target);
                break;
            case MountStep::Kind::sysfs:
                CORRAL_TRY(
                    add_kernel_fs(b, step, "sysfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC),
                    "");
                break;
            case MountStep::Kind::host_proc: {
                // Its knobs are writable by uid alone as much as a fresh one's (helper 29's L4:
                // host uid 0 without capabilities could write /proc/sys/kernel/core_pattern
                // under `pid: false, user: false`); a host without /proc has nothing to protect.
                struct stat host {};
                if (::stat(step.target.c_str(), &host) == 0 && S_ISDIR(host.st_mode))
                    protect_proc(b, step.target);
                break;
            }
            case MountStep::Kind::resolv_conf:
                CORRAL_TRY(add_resolv_conf(b, step, owned_dirs), "");
                break;
        }
    }
    CORRAL_TRY(mask_host_sockets(b, reach), "");
    // Only the mount itself, not what is mounted beneath: a workdir inside a hidden dir stays
    // writable.
    for (const auto& dir : owned_dirs)
        b.add(Op::set_readonly, {}, new_path(dir), "read-only " + dir);
    b.add(Op::pivot_into, {}, kNewRoot, "pivot_root into the new root");
    PreparedMounts out;
    out.ops = std::move(b.ops);
    out.trees = std::move(b.trees);
    out.workdir_tree = b.workdir_tree;
    out.workdir_source = b.workdir_source;
    return out;
}

}  // namespace

Result<PreparedMounts> prepare_mounts(const std::vector<MountStep>& plan,
                                      const std::optional<SocketReach>& reach) {
    if (plan.empty()) return PreparedMounts{};
    // The host root as one recursive bind costs a handful of mount calls; the synthetic root
    // ~2 per top-level entry (and one mount_setattr each for a read-only `/`). Only a plan that
    // must create a top-level mount point needs the latter.
    Builder host;
    auto ops = build_ops(host, plan, RootKind::host_bind, reach);
    if (ops || !host.needs_synthetic_root) return ops;
    Builder synthetic;
    return build_ops(synthetic, plan, RootKind::synthetic, reach);
}

PreparedMounts PreparedMounts::without_trees() const {
    PreparedMounts copy;
    copy.ops = ops;
    copy.workdir_source = workdir_source;
    return copy;
}

const MountOp* execute_mounts(const PreparedMounts& mounts) noexcept {
    for (const auto& op : mounts.ops) {
        if (!run_op(op) && !op.optional) return &op;
    }
    return nullptr;
}

}  // namespace corral
