#include "supervisor/cli/workdir_copy.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <utility>

#include "base/openat2.hpp"
#include "base/path_walk.hpp"

namespace corral::cli {
namespace {

/// Deeper trees are refused: each level holds descriptors, and a job could build a deep one.
constexpr int kMaxDepth = 256;

/// How one copy treats what it finds.
struct CopyRules {
    CopyOwner owner;
    std::optional<dev_t> skip_device;     ///< a directory on this device is not entered (the tmpfs)
    bool links_must_stay_inside = false;  ///< copy-back: a link leaving the job dir is skipped
    int source_root = -1;  ///< copy-back: the tmpfs root, links are resolved beneath it
    std::vector<std::string>* skipped = nullptr;
    /// copy-back: every link made, as (path from the job dir, target), for the final check
    std::vector<std::pair<std::string, std::string>>* links_made = nullptr;
};

std::string joined(const std::string& rel, const std::string& name) {
    return rel.empty() ? name : rel + "/" + name;
}

const char* kind_of(mode_t mode) {
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISSOCK(mode)) return "a socket";
    if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
    return "not a regular file, directory or symlink";
}

/// Owner, mode without setuid/setgid, times: in this order, since chown clears those bits.
Status set_attributes(int fd, const struct stat& source, const CopyRules& rules,
                      const std::string& rel) {
    if (rules.owner.uid != static_cast<uid_t>(-1) &&
        ::fchown(fd, rules.owner.uid, rules.owner.gid) != 0)
        return sys_error("chown `" + rel + "`");
    if (::fchmod(fd, source.st_mode & 01777) != 0) return sys_error("chmod `" + rel + "`");
    const struct timespec times[2] = {source.st_atim, source.st_mtim};
    if (::futimens(fd, times) != 0) return sys_error("set times of `" + rel + "`");
    return {};
}

/// Removes a non-directory in the way of a new entry; a directory in the way is an error.
Status clear_way(int dir, const std::string& name, const std::string& rel) {
    struct stat st {};
    if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
        return errno == ENOENT ? Status{} : sys_error("`" + rel + "`");
    if (S_ISDIR(st.st_mode)) return sys_error(EISDIR, "`" + rel + "`: a directory is in the way");
    if (::unlinkat(dir, name.c_str(), 0) != 0) return sys_error("replace `" + rel + "`");
    return {};
}

Status copy_bytes(int in, int out, const std::string& rel) {
    for (;;) {
        ssize_t n = ::sendfile(out, in, nullptr, 1 << 20);
        if (n == 0) return {};
        if (n > 0) continue;
        if (errno == EINTR) continue;
        if (errno != EINVAL && errno != ENOSYS) return sys_error("copy `" + rel + "`");
        break;  // sendfile cannot do these two: plain read/write
    }
    char buf[1 << 16];
    for (;;) {
        ssize_t n = ::read(in, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return sys_error("read `" + rel + "`");
        if (n == 0) return {};
        for (ssize_t done = 0; done < n;) {
            ssize_t w = ::write(out, buf + done, static_cast<size_t>(n - done));
            if (w < 0 && errno == EINTR) continue;
            if (w < 0) return sys_error("write `" + rel + "`");
            done += w;
        }
    }
}

Status copy_file(int src_dir, int dst_dir, const std::string& name, const std::string& rel,
                 const CopyRules& rules) {
    // O_NONBLOCK and the fstat: what was a regular file a moment ago may not be one now.
    UniqueFd in(
        ::openat(src_dir, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
    if (!in) return sys_error("open `" + rel + "`");
    struct stat st {};
    if (::fstat(in.get(), &st) != 0) return sys_error("stat `" + rel + "`");
    if (!S_ISREG(st.st_mode)) {
        if (rules.skipped) rules.skipped->push_back(rel + " (" + kind_of(st.st_mode) + ")");
        return {};
    }
    CORRAL_TRY(clear_way(dst_dir, name, rel), "");
    UniqueFd out(::openat(dst_dir, name.c_str(),
                          O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!out) return sys_error("create `" + rel + "`");
    CORRAL_TRY(copy_bytes(in.get(), out.get(), rel), "");
    return set_attributes(out.get(), st, rules, rel);
}

/// Whether a relative symlink at `rel` pointing to `target` stays beneath the copy's root, by its
/// text alone. `..` is accepted only as the leading components: after them every name goes one
/// level down or is a link, and links are what resolves_beneath checks. A `..` after a name
/// cannot be counted from the text, since the name may be a link to `.` (zero levels down) or
/// to a deeper directory (issue 10, red-team round 3: `b -> .` plus `a -> b/b/c/../../..`).
bool link_stays_inside(const std::string& rel, const std::string& target) {
    if (target.empty() || target[0] == '/') return false;
    long depth = static_cast<long>(std::count(rel.begin(), rel.end(), '/'));
    bool leading = true;
    size_t pos = 0;
    while (pos <= target.size()) {
        size_t next = target.find('/', pos);
        if (next == std::string::npos) next = target.size();
        std::string part = target.substr(pos, next - pos);
        if (part == "..") {
            if (!leading || --depth < 0) return false;
        } else if (!part.empty() && part != ".") {
            leading = false;
        }
        pos = next + 1;
    }
    return true;
}

/// Whether `path` (relative) resolves beneath `root` the way the kernel would follow it,
/// symlinks on the way included: openat2(RESOLVE_BENEATH) refuses with EXDEV an absolute link
/// or a `..` that climbs above `root`, wherever they hide in the chain (a textual look at one
/// link's target cannot see that `a/x` goes out because `a` is a link to `/etc`). Only a
/// missing last name is beneath (nothing left `root` on the way to it, the link dangles): a
/// missing directory on the way is not, since what later appears there decides where the
/// `..` after it leads. A dangling link at the end is followed, textually, up to 40 hops.
bool resolves_beneath(int root, const std::string& path, int hops = 0) {
    if (hops > 40) return false;
    open_how how{};
    how.flags = O_PATH | O_CLOEXEC;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
    int fd = openat2_retrying(root, path.c_str(), how);
    if (fd >= 0) {
        ::close(fd);
        return true;
    }
    if (errno != ENOENT) return false;
    const size_t slash = path.rfind('/');
    const std::string parent = slash == std::string::npos ? "." : path.substr(0, slash);
    const std::string leaf = slash == std::string::npos ? path : path.substr(slash + 1);
    if (leaf.empty() || leaf == "." || leaf == "..") return false;
    how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
    UniqueFd dir(openat2_retrying(root, parent.c_str(), how));
    if (!dir) return false;  // a directory on the way is missing, or leaves
    struct stat st {};
    if (::fstatat(dir.get(), leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return errno == ENOENT;
    if (!S_ISLNK(st.st_mode)) return false;  // it appeared meanwhile: refuse rather than guess
    std::string target(PATH_MAX, '\0');
    ssize_t n = ::readlinkat(dir.get(), leaf.c_str(), target.data(), target.size());
    if (n <= 0) return false;
    target.resize(static_cast<size_t>(n));
    if (target[0] == '/') return false;
    // The kernel resolves a link's target from the directory holding it: `parent/target`.
    return resolves_beneath(root, parent + "/" + target, hops + 1);
}

/// Where the link at `rel` would lead, as a path relative to the copy's root.
std::string link_target_from_root(const std::string& rel, const std::string& target) {
    const size_t slash = rel.rfind('/');
    return slash == std::string::npos ? target : rel.substr(0, slash) + "/" + target;
}

Status copy_link(int src_dir, int dst_dir, const std::string& name, const std::string& rel,
                 const struct stat& st, const CopyRules& rules) {
    std::string target(PATH_MAX, '\0');
    ssize_t n = ::readlinkat(src_dir, name.c_str(), target.data(), target.size());
    if (n < 0) return sys_error("readlink `" + rel + "`");
    target.resize(static_cast<size_t>(n));
    // Textual, then structural: resolved beneath the job's copy (what the job built, complete
    // by now). Where it lands is checked once every output is there (links_escaping_the_job_dir):
    // in sorted order, a sibling the chain goes through may not have been copied yet. The link
    // is recreated as a link either way, never dereferenced by corral.
    const bool escapes =
        rules.links_must_stay_inside &&
        (!link_stays_inside(rel, target) ||
         (rules.source_root >= 0 &&
          !resolves_beneath(rules.source_root, link_target_from_root(rel, target))));
    if (escapes) {
        if (rules.skipped)
            rules.skipped->push_back(rel + " (symlink to `" + target +
                                     "`, which leaves the job directory)");
        return {};
    }
    CORRAL_TRY(clear_way(dst_dir, name, rel), "");
    if (::symlinkat(target.c_str(), dst_dir, name.c_str()) != 0)
        return sys_error("symlink `" + rel + "`");
    if (rules.owner.uid != static_cast<uid_t>(-1) &&
        ::fchownat(dst_dir, name.c_str(), rules.owner.uid, rules.owner.gid, AT_SYMLINK_NOFOLLOW) !=
            0)
        return sys_error("chown `" + rel + "`");
    const struct timespec times[2] = {st.st_atim, st.st_mtim};
    (void)::utimensat(dst_dir, name.c_str(), times, AT_SYMLINK_NOFOLLOW);
    if (rules.links_made) rules.links_made->push_back({rel, target});
    return {};
}

Status copy_entry(int src_dir, int dst_dir, const std::string& name, const std::string& rel,
                  const CopyRules& rules, int depth);

/// The names in a directory, sorted (the listing is closed before recursing: fewer fds).
Result<std::vector<std::string>> list_names(int dir, const std::string& rel) {
    int copy = ::openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (copy < 0) return sys_error("open `" + (rel.empty() ? "." : rel) + "`");
    DIR* listing = ::fdopendir(copy);
    if (listing == nullptr) {
        ::close(copy);
        return sys_error("list `" + rel + "`");
    }
    std::vector<std::string> names;
    while (dirent* entry = ::readdir(listing)) {
        std::string name = entry->d_name;
        if (name != "." && name != "..") names.push_back(std::move(name));
    }
    ::closedir(listing);
    std::sort(names.begin(), names.end());
    return names;
}

Status copy_children(int src, int dst, const std::string& rel, const CopyRules& rules, int depth) {
    auto names = list_names(src, rel);
    if (!names) return std::move(names.error());
    for (const auto& name : *names)
        CORRAL_TRY(copy_entry(src, dst, name, joined(rel, name), rules, depth + 1), "");
    return {};
}

Status copy_directory(int src_dir, int dst_dir, const std::string& name, const std::string& rel,
                      const struct stat& st, const CopyRules& rules, int depth) {
    if (rules.skip_device && st.st_dev == *rules.skip_device) return {};
    if (depth > kMaxDepth)
        return sys_error(ELOOP, "`" + rel + "`: deeper than " + std::to_string(kMaxDepth));
    UniqueFd src(::openat(src_dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!src) return sys_error("open `" + rel + "`");
    if (::mkdirat(dst_dir, name.c_str(), 0700) != 0 && errno != EEXIST)
        return sys_error("mkdir `" + rel + "`");
    UniqueFd dst(::openat(dst_dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!dst && (errno == ENOTDIR || errno == ELOOP)) {  // a file or link in the way
        CORRAL_TRY(clear_way(dst_dir, name, rel), "");
        if (::mkdirat(dst_dir, name.c_str(), 0700) != 0) return sys_error("mkdir `" + rel + "`");
        dst.reset(::openat(dst_dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    }
    if (!dst) return sys_error("open `" + rel + "`");
    CORRAL_TRY(copy_children(src.get(), dst.get(), rel, rules, depth), "");
    return set_attributes(dst.get(), st, rules, rel);
}

Status copy_entry(int src_dir, int dst_dir, const std::string& name, const std::string& rel,
                  const CopyRules& rules, int depth) {
    struct stat st {};
    if (::fstatat(src_dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
        return sys_error("stat `" + rel + "`");
    if (S_ISDIR(st.st_mode)) return copy_directory(src_dir, dst_dir, name, rel, st, rules, depth);
    if (S_ISREG(st.st_mode)) return copy_file(src_dir, dst_dir, name, rel, rules);
    if (S_ISLNK(st.st_mode)) return copy_link(src_dir, dst_dir, name, rel, st, rules);
    if (rules.skipped) rules.skipped->push_back(rel + " (" + kind_of(st.st_mode) + ")");
    return {};
}

/// Opens the directory `parts` beneath `base` without following any symlink; with `create`,
/// makes missing ones (mode 0755, owned by `owner`). ELOOP/ENOTDIR for a link or file on the way.
Result<UniqueFd> open_beneath(int base, const std::vector<std::string>& parts, bool create,
                              CopyOwner owner) {
    UniqueFd dir(::openat(base, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!dir) return sys_error("open");
    for (const auto& part : parts) {
        int next =
            ::openat(dir.get(), part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (next < 0 && errno == ENOENT && create) {
            if (::mkdirat(dir.get(), part.c_str(), 0755) != 0 && errno != EEXIST)
                return sys_error("mkdir `" + part + "`");
            next =
                ::openat(dir.get(), part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (next >= 0 && owner.uid != static_cast<uid_t>(-1))
                (void)::fchown(next, owner.uid, owner.gid);
        }
        if (next < 0) return sys_error("`" + part + "`");
        dir.reset(next);
    }
    return dir;
}

/// fchown of everything beneath `dir` (the copy is ours alone: nothing runs in it yet).
Status chown_children(int dir, CopyOwner owner, const std::string& rel, int depth) {
    if (depth > kMaxDepth) return sys_error(ELOOP, "`" + rel + "`: too deep");
    auto names = list_names(dir, rel);
    if (!names) return std::move(names.error());
    for (const auto& name : *names) {
        const std::string path = joined(rel, name);
        if (::fchownat(dir, name.c_str(), owner.uid, owner.gid, AT_SYMLINK_NOFOLLOW) != 0)
            return sys_error("chown `" + path + "`");
        UniqueFd child(
            ::openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (child) CORRAL_TRY(chown_children(child.get(), owner, path, depth + 1), "");
    }
    return {};
}

/// The final check of copy-back: every link it made is resolved in the job directory as it now
/// is, all outputs in place, and removed if its chain leaves the directory or goes through a
/// missing one; again while one goes (a removed link may have been on another's way). Checked
/// one by one as they were made, `a -> b/...` passed before its sibling `b -> .` existed
/// (issue 10, red-team round 3; CVE-2018-15664 for links trusted where they land). Returns the
/// paths removed.
std::vector<std::string> remove_links_leaving(
    int root, const std::vector<std::pair<std::string, std::string>>& links,
    std::vector<std::string>& skipped) {
    std::vector<std::string> removed;
    std::vector<bool> gone(links.size(), false);
    for (bool again = true; again;) {
        again = false;
        for (size_t i = 0; i < links.size(); ++i) {
            if (gone[i]) continue;
            const auto& [rel, target] = links[i];
            std::vector<std::string> parts = path_components(rel);
            if (parts.empty()) continue;
            const std::string leaf = parts.back();
            parts.pop_back();
            auto dir = open_beneath(root, parts, false, CopyOwner{});
            struct stat st {};
            if (!dir || ::fstatat(dir->get(), leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 ||
                !S_ISLNK(st.st_mode)) {
                gone[i] = true;  // replaced by a later output: not a link of ours any more
                continue;
            }
            if (resolves_beneath(root, rel)) continue;
            gone[i] = true;
            again = true;
            if (::unlinkat(dir->get(), leaf.c_str(), 0) != 0) continue;
            skipped.push_back(rel + " (symlink to `" + target +
                              "`, which leaves the job directory)");
            removed.push_back(rel);
        }
    }
    return removed;
}

/// Our own mount namespace, with nothing propagating to or from the host's.
Status enter_private_mount_namespace() {
    if (::unshare(CLONE_NEWNS) != 0) return sys_error("unshare a mount namespace for the copy");
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
        return sys_error("make our mounts private");
    return {};
}

}  // namespace

CopiedWorkdir::CopiedWorkdir(CopiedWorkdir&& other) noexcept
    : mount_point_(std::exchange(other.mount_point_, {})), root_(std::move(other.root_)) {}

CopiedWorkdir& CopiedWorkdir::operator=(CopiedWorkdir&& other) noexcept {
    if (this != &other) {
        detach();
        mount_point_ = std::exchange(other.mount_point_, {});
        root_ = std::move(other.root_);
    }
    return *this;
}

CopiedWorkdir::~CopiedWorkdir() {
    detach();
}

Status CopiedWorkdir::give_to(CopyOwner owner) const {
    if (::fchown(root_.get(), owner.uid, owner.gid) != 0)
        return sys_error("chown the workdir copy");
    return chown_children(root_.get(), owner, "", 0);
}

void CopiedWorkdir::detach() {
    if (mount_point_.empty()) return;
    (void)::umount2(mount_point_.c_str(), MNT_DETACH);
    (void)::rmdir(mount_point_.c_str());
    mount_point_.clear();
}

Result<CopiedWorkdir> CopiedWorkdir::create(int job_dir_fd, const std::string& job_dir,
                                            std::optional<uint64_t> size, CopyOwner owner) {
    UniqueFd source(::openat(job_dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!source) return sys_error("open the job directory `" + job_dir + "`");
    struct stat job {};
    if (::fstat(source.get(), &job) != 0) return sys_error("stat `" + job_dir + "`");
    CORRAL_TRY(enter_private_mount_namespace(), "");

    CopiedWorkdir copy;
    char dir[] = "/tmp/corral-workdir-XXXXXX";
    if (::mkdtemp(dir) == nullptr) return sys_error("mkdtemp /tmp/corral-workdir-XXXXXX");
    copy.mount_point_ = dir;
    std::string options = "mode=0700";
    if (size) options += ",size=" + std::to_string(*size);
    if (::mount("corral-workdir", dir, "tmpfs", MS_NOSUID | MS_NODEV, options.c_str()) != 0)
        return sys_error("mount a tmpfs (workdir.size) on `" + copy.mount_point_ + "`");
    copy.root_.reset(::open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!copy.root_) return sys_error("open `" + copy.mount_point_ + "`");
    struct stat tmpfs {};
    if (::fstat(copy.root_.get(), &tmpfs) != 0) return sys_error("stat the workdir tmpfs");

    CopyRules rules;
    rules.owner = owner;
    rules.skip_device = tmpfs.st_dev;  // a job directory above /tmp must not copy the copy
    std::vector<std::string> skipped;
    rules.skipped = &skipped;
    auto copied = copy_children(source.get(), copy.root_.get(), "", rules, 0);
    if (!copied) {
        auto& error = copied.error();
        if (error.code == ENOSPC) error.context("the job directory does not fit in workdir.size");
        return std::move(error.context("copy `" + job_dir + "` into the workdir"));
    }
    CORRAL_TRY(set_attributes(copy.root_.get(), job, rules, "."), "copy the job directory");
    return copy;
}

namespace {

/// Copies each output from the tmpfs at `source` into `destination`; stops at the first error.
void copy_outputs(int source, const std::vector<std::string>& outputs, int destination,
                  const CopyRules& rules, CopyOwner owner, OutputsCopied& result) {
    for (const auto& output : outputs) {
        std::vector<std::string> parts = path_components(output);
        if (parts.empty()) continue;
        const std::string leaf = parts.back();
        parts.pop_back();
        auto from = open_beneath(source, parts, false, owner);
        struct stat st {};
        if (!from || ::fstatat(from->get(), leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
            bool absent = from ? errno == ENOENT : from.error().code == ENOENT;
            if (absent) {
                result.missing.push_back(output);
            } else {
                result.skipped.push_back(output + " (a symlink or file on the way)");
            }
            continue;
        }
        auto to = open_beneath(destination, parts, true, owner);
        if (!to) {
            result.error = to.error().context("copy back `" + output + "`").describe();
            return;
        }
        std::string rel;
        for (const auto& part : parts) rel = joined(rel, part);
        const std::string path = joined(rel, leaf);
        const size_t skipped_before = result.skipped.size();
        auto copied = copy_entry(from->get(), to->get(), leaf, path, rules, 0);
        if (!copied) {
            result.error = copied.error().context("copy back `" + output + "`").describe();
            return;
        }
        bool leaf_skipped = result.skipped.size() > skipped_before &&
                            result.skipped[skipped_before].starts_with(path + " (");
        if (!leaf_skipped) result.copied.push_back(output);
    }
}

}  // namespace

OutputsCopied CopiedWorkdir::copy_back(const std::vector<std::string>& outputs, int job_dir_fd,
                                       const std::string& job_dir, CopyOwner owner) const {
    OutputsCopied result;
    UniqueFd destination(::openat(job_dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!destination) {
        result.error = sys_error("open the job directory `" + job_dir + "`").describe();
        return result;
    }
    CopyRules rules;
    rules.owner = owner;
    rules.links_must_stay_inside = true;
    rules.source_root = root_.get();
    rules.skipped = &result.skipped;
    std::vector<std::pair<std::string, std::string>> links;
    rules.links_made = &links;
    copy_outputs(root_.get(), outputs, destination.get(), rules, owner, result);
    // Whether the copy finished or stopped, no link it made may leave the job directory.
    const auto removed = remove_links_leaving(destination.get(), links, result.skipped);
    std::erase_if(result.copied, [&](const std::string& output) {
        std::string path;
        for (const auto& part : path_components(output)) path = joined(path, part);
        return std::find(removed.begin(), removed.end(), path) != removed.end();
    });
    return result;
}

}  // namespace corral::cli
