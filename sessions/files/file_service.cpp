#include "sessions/files/file_service.hpp"
#include "base/openat2.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/fsuid.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>

namespace corral {
namespace {

/// The client's path, quoted for messages, with control bytes (NUL included) escaped.
std::string quote(std::string_view path) {
    std::string out = "`";
    for (unsigned char c : path) {
        if (c < 0x20 || c == 0x7f) {
            char hex[8];
            std::snprintf(hex, sizeof hex, "\\x%02x", c);
            out += hex;
        } else {
            out += static_cast<char>(c);
        }
    }
    return out + "`";
}

/// "<verb> `path`" with errno `code`.
Error path_error(int code, std::string_view verb, std::string_view path) {
    return sys_error(code, std::string(verb) + " " + quote(path));
}

/// Lexically splits a client path into components, dropping "", "." and resolving "..". A ".."
/// that would climb above the root is refused here (EXDEV), before the kernel sees anything: the
/// kernel's RESOLVE_IN_ROOT would silently clamp it, and a client that asks for ../../etc/passwd
/// should hear that it asked for something outside, not get <root>/etc/passwd.
Result<std::vector<std::string>> split_path(std::string_view path,
                                           std::string_view mount_point = {}) {
    if (path.empty()) return sys_error(EINVAL, "path is empty");
    if (path.find('\0') != std::string_view::npos) {
        return sys_error(EINVAL, "path " + quote(path) + " contains a NUL byte");
    }
    std::vector<std::string> parts;
    std::size_t pos = 0;
    while (pos <= path.size()) {
        std::size_t end = std::min(path.find('/', pos), path.size());
        std::string_view part = path.substr(pos, end - pos);
        pos = end + 1;
        if (part.empty() || part == ".") continue;
        if (part == "..") {
            if (parts.empty()) {
                return sys_error(EXDEV, "path " + quote(path) + " escapes the session root");
            }
            parts.pop_back();
            continue;
        }
        parts.emplace_back(part);
    }
    if (!mount_point.empty()) {
        if (path.front() != '/') {
            return sys_error(EINVAL, "path " + quote(path) + " is not absolute");
        }
        auto prefix = split_path(mount_point);
        if (!prefix) return std::move(prefix.error());
        if (parts.size() < prefix->size() ||
            !std::equal(prefix->begin(), prefix->end(), parts.begin())) {
            return sys_error(EXDEV,
                             "path " + quote(path) + " is not beneath " + quote(mount_point));
        }
        parts.erase(parts.begin(), parts.begin() + static_cast<std::ptrdiff_t>(prefix->size()));
    }
    return parts;
}

/// The unprivileged view of FileServiceOptions::act_as for the lifetime of the guard, on this
/// thread only. setfsuid() from 0 to non-zero also clears CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
/// and CAP_FOWNER from the effective set, and restoring 0 brings them back (capabilities(7)),
/// so permissions are checked as for that uid. glibc's setgroups() would change every thread
/// (setxid broadcast); the raw syscall changes only ours.
class ActAs {
  public:
    explicit ActAs(const std::optional<FileOwner>& who) {
        if (!who) return;
        active_ = true;
        groups_ = ::getgroups(static_cast<int>(saved_groups_.size()), saved_groups_.data());
        if (groups_ < 0) groups_ = 0;
        (void)::syscall(SYS_setgroups, 0, nullptr);
        old_gid_ = static_cast<gid_t>(::setfsgid(who->gid));
        old_uid_ = static_cast<uid_t>(::setfsuid(who->uid));
    }
    ~ActAs() {
        if (!active_) return;
        (void)::setfsuid(old_uid_);
        (void)::setfsgid(old_gid_);
        (void)::syscall(SYS_setgroups, static_cast<size_t>(groups_), saved_groups_.data());
    }
    ActAs(const ActAs&) = delete;
    ActAs& operator=(const ActAs&) = delete;

  private:
    bool active_ = false;
    uid_t old_uid_ = 0;
    gid_t old_gid_ = 0;
    int groups_ = 0;
    std::array<gid_t, 256> saved_groups_{};
};

/// parts[0..count) joined with '/', or "." for none (the root).
std::string join(const std::vector<std::string>& parts, std::size_t count) {
    if (count == 0) return ".";
    std::string out = parts[0];
    for (std::size_t i = 1; i < count; ++i) out += "/" + parts[i];
    return out;
}

/// openat2 with its open_how spelt out (base/openat2.hpp retries the kernel's EAGAIN).
int openat2_retry(int dirfd, const std::string& path, uint64_t flags, uint64_t mode,
                  uint64_t resolve) {
    open_how how{};
    how.flags = flags;
    how.mode = mode;
    how.resolve = resolve;
    return openat2_retrying(dirfd, path.c_str(), how);
}

/// Names and d_types in the directory `dirfd` (which may be an O_PATH fd), without "." and "..".
Result<std::vector<std::pair<std::string, unsigned char>>> read_dir(int dirfd) {
    int fd = ::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return sys_error("open directory");
    DIR* dir = ::fdopendir(fd);
    if (!dir) {
        Error e = sys_error("fdopendir");
        ::close(fd);
        return e;
    }
    std::vector<std::pair<std::string, unsigned char>> names;
    errno = 0;
    while (dirent* entry = ::readdir(dir)) {
        std::string_view name = entry->d_name;
        if (name != "." && name != "..") names.emplace_back(std::string(name), entry->d_type);
        errno = 0;
    }
    int read_errno = errno;
    ::closedir(dir);
    if (read_errno != 0) return sys_error(read_errno, "read directory");
    return names;
}

FileType type_of(mode_t mode) {
    if (S_ISREG(mode)) return FileType::file;
    if (S_ISDIR(mode)) return FileType::dir;
    if (S_ISLNK(mode)) return FileType::symlink;
    return FileType::other;
}

/// A FileInfo from lstat data; reads a symlink's target text (never follows it).
FileInfo info_from(std::string name, const struct stat& st, int dirfd, const char* entry) {
    FileInfo info;
    info.name = std::move(name);
    info.type = type_of(st.st_mode);
    info.size = static_cast<uint64_t>(st.st_size);
    info.mode = st.st_mode & 07777;
    info.mtime_ns = int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec;
    if (info.type == FileType::symlink) {
        char target[4096];
        ssize_t n = ::readlinkat(dirfd, entry, target, sizeof target);
        if (n > 0) info.link_target.assign(target, static_cast<std::size_t>(n));
    }
    return info;
}

/// A unique hidden name for an upload's temp file (O_EXCL catches the rare clash).
std::string temp_name_for_upload() {
    static std::atomic<uint64_t> counter{0};
    return ".corral-upload-" + std::to_string(::getpid()) + "-" + std::to_string(++counter);
}

/// One directory being emptied by remove_tree().
struct TreeFrame {
    UniqueFd fd;
    std::string name;                  // name in the parent frame's directory
    std::vector<std::string> subdirs;  // found by the scan, still to empty and remove
    bool scanned = false;
};

}  // namespace

// ---- error classification ------------------------------------------------------------------

FileErrorKind classify(const Error& error) {
    switch (error.code) {
        case ENOENT:
            return FileErrorKind::not_found;
        case EXDEV:
        case ELOOP:
            return FileErrorKind::escapes_root;
        case EEXIST:
            return FileErrorKind::exists;
        case ENOTEMPTY:
            return FileErrorKind::not_empty;
        case ENOTDIR:
            return FileErrorKind::not_a_directory;
        case EISDIR:
            return FileErrorKind::is_a_directory;
        case EACCES:
        case EPERM:
        case EROFS:
            return FileErrorKind::denied;
        case 0:
        case EINVAL:
        case ENAMETOOLONG:
        case EBUSY:
            return FileErrorKind::invalid;
        default:
            return FileErrorKind::io;
    }
}

const char* kind_name(FileErrorKind kind) {
    switch (kind) {
        case FileErrorKind::not_found:
            return "not_found";
        case FileErrorKind::escapes_root:
            return "escapes_root";
        case FileErrorKind::exists:
            return "exists";
        case FileErrorKind::not_empty:
            return "not_empty";
        case FileErrorKind::not_a_directory:
            return "not_a_directory";
        case FileErrorKind::is_a_directory:
            return "is_a_directory";
        case FileErrorKind::denied:
            return "denied";
        case FileErrorKind::invalid:
            return "invalid";
        case FileErrorKind::io:
            return "io";
    }
    return "io";
}

const char* type_name(FileType type) {
    switch (type) {
        case FileType::file:
            return "file";
        case FileType::dir:
            return "dir";
        case FileType::symlink:
            return "symlink";
        case FileType::other:
            return "other";
    }
    return "other";
}

// ---- WriteTransaction ----------------------------------------------------------------------

WriteTransaction::WriteTransaction(UniqueFd parent, UniqueFd file, std::string temp_name,
                                   std::string name, std::string client_path,
                                   std::optional<FileOwner> act_as)
    : parent_(std::move(parent)),
      file_(std::move(file)),
      temp_name_(std::move(temp_name)),
      name_(std::move(name)),
      client_path_(std::move(client_path)),
      act_as_(std::move(act_as)) {}

WriteTransaction::WriteTransaction(WriteTransaction&& other) noexcept
    : parent_(std::move(other.parent_)),
      file_(std::move(other.file_)),
      temp_name_(std::move(other.temp_name_)),
      name_(std::move(other.name_)),
      client_path_(std::move(other.client_path_)),
      act_as_(std::move(other.act_as_)),
      done_(std::exchange(other.done_, true)) {}

WriteTransaction& WriteTransaction::operator=(WriteTransaction&& other) noexcept {
    if (this != &other) {
        abort();
        parent_ = std::move(other.parent_);
        file_ = std::move(other.file_);
        temp_name_ = std::move(other.temp_name_);
        name_ = std::move(other.name_);
        client_path_ = std::move(other.client_path_);
        act_as_ = std::move(other.act_as_);
        done_ = std::exchange(other.done_, true);
    }
    return *this;
}

WriteTransaction::~WriteTransaction() {
    abort();
}

Status WriteTransaction::write_all(std::string_view bytes) {
    if (done_) return sys_error(EBADF, "write " + quote(client_path_) + ": upload already ended");
    while (!bytes.empty()) {
        ssize_t n = ::write(file_.get(), bytes.data(), bytes.size());
        if (n < 0) {
            if (errno == EINTR) continue;
            return path_error(errno, "write", client_path_);
        }
        bytes.remove_prefix(static_cast<std::size_t>(n));
    }
    return {};
}

Status WriteTransaction::commit() {
    if (done_) return sys_error(EBADF, "commit " + quote(client_path_) + ": upload already ended");
    // Close first so a write-back error (NFS, quota) surfaces here rather than after the rename.
    if (::close(file_.release()) != 0 && errno != EINTR) {
        Error e = path_error(errno, "write", client_path_);
        abort();
        return e;
    }
    ActAs view(act_as_);
    if (::renameat(parent_.get(), temp_name_.c_str(), parent_.get(), name_.c_str()) != 0) {
        Error e = path_error(errno, "write", client_path_);
        abort();
        return e;
    }
    done_ = true;
    return {};
}

void WriteTransaction::abort() {
    if (done_) return;
    done_ = true;
    file_.reset();
    ActAs view(act_as_);
    if (parent_) ::unlinkat(parent_.get(), temp_name_.c_str(), 0);
}

// ---- FileService ---------------------------------------------------------------------------

namespace {

/// Everything the service needs to resolve a path; kept out of the class to keep the header small.
struct Resolver {
    int root;
    const FileServiceOptions& options;

    uint64_t resolve_flags() const {
        uint64_t flags = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
        if (options.same_mount_only) flags |= RESOLVE_NO_XDEV;
        return flags;
    }

    /// Opens parts[0..count) under the root; errors name the client's path.
    Result<UniqueFd> open(const std::vector<std::string>& parts, std::size_t count, int flags,
                          std::string_view verb, std::string_view client_path) const {
        int fd = openat2_retry(root, join(parts, count), flags | O_CLOEXEC, 0, resolve_flags());
        if (fd < 0) return resolution_error(errno, verb, client_path);
        return UniqueFd(fd);
    }

    /// The directory that holds parts.back(), as an O_PATH fd.
    Result<UniqueFd> parent_of(const std::vector<std::string>& parts, std::string_view verb,
                               std::string_view client_path) const {
        return open(parts, parts.size() - 1, O_PATH | O_DIRECTORY, verb, client_path);
    }

    Error resolution_error(int code, std::string_view verb, std::string_view client_path) const {
        if (code == ELOOP) {
            return sys_error(code, std::string(verb) + " " + quote(client_path) +
                                       ": refused: goes through a /proc magic link or too many "
                                       "symbolic links");
        }
        if (code == EXDEV) {
            return sys_error(code, std::string(verb) + " " + quote(client_path) +
                                       ": refused: crosses a mount point");
        }
        return path_error(code, verb, client_path);
    }

    void chown_new(int dirfd, const char* name) const {
        // Best effort: a daemon not running as root cannot chown, and the entry is still usable.
        if (options.owner) {
            (void)::fchownat(dirfd, name, options.owner->uid, options.owner->gid,
                             AT_SYMLINK_NOFOLLOW);
        }
    }

    /// mkdir -p of parts[0..count); existing directories are fine.
    Status make_dirs(const std::vector<std::string>& parts, std::size_t count,
                     std::string_view client_path) const {
        for (std::size_t i = 0; i < count; ++i) {
            auto dir = open(parts, i, O_PATH | O_DIRECTORY, "mkdir", client_path);
            if (!dir) return std::move(dir.error());
            if (::mkdirat(dir->get(), parts[i].c_str(), 0755) == 0) {
                chown_new(dir->get(), parts[i].c_str());
            } else if (errno != EEXIST) {
                return path_error(errno, "mkdir", client_path);
            }
        }
        // An existing non-directory on the way shows up here (ENOTDIR).
        auto last = open(parts, count, O_PATH | O_DIRECTORY, "mkdir", client_path);
        if (!last) return std::move(last.error());
        return {};
    }
};

/// Empties and removes the directory `name` in `parent` without following symlinks or crossing
/// mounts. Iterative (an explicit stack of directory fds) so a hostile, very deep tree cannot
/// overflow the daemon's stack; it fails with EMFILE instead.
Status remove_tree(int parent, const std::string& name, std::string_view client_path) {
    const uint64_t resolve =
        RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;
    const uint64_t open_flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
    std::vector<TreeFrame> stack;
    int first = openat2_retry(parent, name, open_flags, 0, resolve);
    if (first < 0) return path_error(errno, "delete", client_path);
    stack.push_back(TreeFrame{UniqueFd(first), name, {}, false});

    while (!stack.empty()) {
        TreeFrame& top = stack.back();
        if (!top.scanned) {
            top.scanned = true;
            auto entries = read_dir(top.fd.get());
            if (!entries) return std::move(entries.error().context("delete " + quote(client_path)));
            for (auto& [entry, d_type] : *entries) {
                bool is_dir = d_type == DT_DIR;
                if (d_type == DT_UNKNOWN) {
                    struct stat st;
                    if (::fstatat(top.fd.get(), entry.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
                        continue;
                    is_dir = S_ISDIR(st.st_mode);
                }
                if (is_dir) {
                    top.subdirs.push_back(std::move(entry));
                } else if (::unlinkat(top.fd.get(), entry.c_str(), 0) != 0) {
                    if (errno == EISDIR)
                        top.subdirs.push_back(std::move(entry));
                    else if (errno != ENOENT)
                        return path_error(errno, "delete", client_path);
                }
            }
        }
        if (!top.subdirs.empty()) {
            std::string sub = std::move(top.subdirs.back());
            top.subdirs.pop_back();
            int fd = openat2_retry(top.fd.get(), sub, open_flags, 0, resolve);
            if (fd >= 0) {
                stack.push_back(TreeFrame{UniqueFd(fd), std::move(sub), {}, false});
                continue;  // `top` may dangle after push_back
            }
            if (errno == ELOOP || errno == ENOTDIR) {
                // Swapped for a symlink or file since the scan: remove the entry itself.
                if (::unlinkat(top.fd.get(), sub.c_str(), 0) != 0 && errno != ENOENT) {
                    return path_error(errno, "delete", client_path);
                }
            } else if (errno == EXDEV) {
                return sys_error(EXDEV, "delete " + quote(client_path) + ": refused: `" + sub +
                                            "` is a mount point");
            } else if (errno != ENOENT) {
                return path_error(errno, "delete", client_path);
            }
            continue;
        }
        std::string done_name = std::move(top.name);
        stack.pop_back();
        int holder = stack.empty() ? parent : stack.back().fd.get();
        if (::unlinkat(holder, done_name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
            return path_error(errno, "delete", client_path);
        }
    }
    return {};
}

}  // namespace

Result<FileService> FileService::open(const std::string& root_dir, FileServiceOptions options) {
    int fd = ::open(root_dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return sys_error("open session root `" + root_dir + "`");
    return FileService(UniqueFd(fd), std::move(options));
}

FileService::FileService(UniqueFd root, FileServiceOptions options)
    : root_(std::move(root)), options_(std::move(options)) {}

Result<ReadHandle> FileService::open_read(std::string_view path) const {
    ActAs view(options_.act_as);
    auto parts = split_path(path, options_.mount_point);
    if (!parts) return std::move(parts.error());
    Resolver resolver{root_.get(), options_};
    // O_PATH opens nothing: a FIFO, a device or a socket the session planted is only looked at,
    // never opened (which could block the daemon or have a device's side effects).
    auto entry = resolver.open(*parts, parts->size(), O_PATH, "read", path);
    if (!entry) return std::move(entry.error());
    struct stat st;
    if (::fstat(entry->get(), &st) != 0) return path_error(errno, "read", path);
    if (S_ISDIR(st.st_mode)) return path_error(EISDIR, "read", path);
    if (!S_ISREG(st.st_mode)) {
        return sys_error(EINVAL, "read " + quote(path) + ": not a regular file");
    }
    // Reopen that very inode for reading: the O_PATH fd pins it, so a swap of the name since
    // cannot redirect the open (the daemon's own /proc/self/fd entry, not a path of the session).
    const std::string self = "/proc/self/fd/" + std::to_string(entry->get());
    const int fd = ::open(self.c_str(), O_RDONLY | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) return path_error(errno, "read", path);
    return ReadHandle{UniqueFd(fd), static_cast<uint64_t>(st.st_size)};
}

Result<WriteTransaction> FileService::open_write(std::string_view path, bool create_parents) const {
    ActAs view(options_.act_as);
    auto parts = split_path(path, options_.mount_point);
    if (!parts) return std::move(parts.error());
    if (parts->empty()) return path_error(EISDIR, "write", path);
    Resolver resolver{root_.get(), options_};
    if (create_parents) CORRAL_TRY(resolver.make_dirs(*parts, parts->size() - 1, path), "");
    auto parent = resolver.parent_of(*parts, "write", path);
    if (!parent) return std::move(parent.error());
    const std::string& name = parts->back();

    struct stat existing;
    bool replaces_file = false;
    if (::fstatat(parent->get(), name.c_str(), &existing, AT_SYMLINK_NOFOLLOW) == 0) {
        if (S_ISDIR(existing.st_mode)) return path_error(EISDIR, "write", path);
        replaces_file = S_ISREG(existing.st_mode);
    }
    for (int attempt = 0; attempt < 16; ++attempt) {
        std::string temp = temp_name_for_upload();
        int fd = ::openat(parent->get(), temp.c_str(),
                          O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd < 0) {
            if (errno == EEXIST) continue;
            return path_error(errno, "write", path);
        }
        UniqueFd file(fd);
        // Keep the permissions of the file being replaced (an uploaded script stays executable).
        if (replaces_file) (void)::fchmod(file.get(), existing.st_mode & 07777);
        if (options_.owner) (void)::fchown(file.get(), options_.owner->uid, options_.owner->gid);
        return WriteTransaction(std::move(*parent), std::move(file), std::move(temp), name,
                                std::string(path), options_.act_as);
    }
    return path_error(EEXIST, "write", path);
}

Status FileService::remove(std::string_view path, bool recursive) const {
    ActAs view(options_.act_as);
    auto parts = split_path(path, options_.mount_point);
    if (!parts) return std::move(parts.error());
    if (parts->empty())
        return sys_error(EBUSY, "delete " + quote(path) + ": refused: it is the session root");
    Resolver resolver{root_.get(), options_};
    auto parent = resolver.parent_of(*parts, "delete", path);
    if (!parent) return std::move(parent.error());
    const char* name = parts->back().c_str();
    struct stat st;
    if (::fstatat(parent->get(), name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
        return path_error(errno, "delete", path);
    }
    if (!S_ISDIR(st.st_mode)) {
        if (::unlinkat(parent->get(), name, 0) != 0) return path_error(errno, "delete", path);
        return {};
    }
    if (recursive) return remove_tree(parent->get(), parts->back(), path);
    if (::unlinkat(parent->get(), name, AT_REMOVEDIR) != 0)
        return path_error(errno, "delete", path);
    return {};
}

Status FileService::mkdir(std::string_view path, bool recursive) const {
    ActAs view(options_.act_as);
    auto parts = split_path(path, options_.mount_point);
    if (!parts) return std::move(parts.error());
    Resolver resolver{root_.get(), options_};
    if (recursive) return resolver.make_dirs(*parts, parts->size(), path);
    if (parts->empty()) return path_error(EEXIST, "mkdir", path);
    auto parent = resolver.parent_of(*parts, "mkdir", path);
    if (!parent) return std::move(parent.error());
    if (::mkdirat(parent->get(), parts->back().c_str(), 0755) != 0) {
        return path_error(errno, "mkdir", path);
    }
    resolver.chown_new(parent->get(), parts->back().c_str());
    return {};
}

Status FileService::move(std::string_view from, std::string_view to, bool replace) const {
    ActAs view(options_.act_as);
    auto from_parts = split_path(from, options_.mount_point);
    if (!from_parts) return std::move(from_parts.error());
    auto to_parts = split_path(to, options_.mount_point);
    if (!to_parts) return std::move(to_parts.error());
    const std::string verb = "move " + quote(from) + " to";
    if (from_parts->empty() || to_parts->empty()) {
        return sys_error(EBUSY, verb + " " + quote(to) + ": refused: the session root cannot move");
    }
    Resolver resolver{root_.get(), options_};
    auto from_parent = resolver.parent_of(*from_parts, "move", from);
    if (!from_parent) return std::move(from_parent.error());
    auto to_parent = resolver.parent_of(*to_parts, verb, to);
    if (!to_parent) return std::move(to_parent.error());
    unsigned flags = replace ? 0 : RENAME_NOREPLACE;
    if (::renameat2(from_parent->get(), from_parts->back().c_str(), to_parent->get(),
                    to_parts->back().c_str(), flags) != 0) {
        return path_error(errno, verb, to);
    }
    return {};
}

Result<std::vector<FileInfo>> FileService::list(std::string_view path) const {
    ActAs view(options_.act_as);
    auto parts = split_path(path, options_.mount_point);
    if (!parts) return std::move(parts.error());
    Resolver resolver{root_.get(), options_};
    auto dir = resolver.open(*parts, parts->size(), O_PATH | O_DIRECTORY, "list", path);
    if (!dir) return std::move(dir.error());
    auto names = read_dir(dir->get());
    if (!names) return std::move(names.error().context("list " + quote(path)));
    std::vector<FileInfo> entries;
    entries.reserve(names->size());
    for (const auto& [name, d_type] : *names) {
        (void)d_type;
        struct stat st;
        // An entry removed since readdir is simply not listed.
        if (::fstatat(dir->get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
        entries.push_back(info_from(name, st, dir->get(), name.c_str()));
    }
    std::sort(entries.begin(), entries.end(),
              [](const FileInfo& a, const FileInfo& b) { return a.name < b.name; });
    return entries;
}

Result<FileInfo> FileService::stat(std::string_view path) const {
    ActAs view(options_.act_as);
    auto parts = split_path(path, options_.mount_point);
    if (!parts) return std::move(parts.error());
    struct stat st;
    if (parts->empty()) {
        if (::fstatat(root_.get(), "", &st, AT_EMPTY_PATH) != 0)
            return path_error(errno, "stat", path);
        return info_from("/", st, root_.get(), "");
    }
    Resolver resolver{root_.get(), options_};
    auto parent = resolver.parent_of(*parts, "stat", path);
    if (!parent) return std::move(parent.error());
    const char* name = parts->back().c_str();
    if (::fstatat(parent->get(), name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
        return path_error(errno, "stat", path);
    }
    return info_from(parts->back(), st, parent->get(), name);
}

Result<int> FileService::add_watch(int inotify_fd, std::string_view path, uint32_t mask,
                                   bool follow_final) const {
    ActAs view(options_.act_as);
    auto parts = split_path(path, options_.mount_point);
    if (!parts) return std::move(parts.error());
    Resolver resolver{root_.get(), options_};
    // The final component is followed only when asked (the watched directory itself, like list);
    // subdirectories found by a recursive watch never are, so a symlink cannot add a watch on
    // anything it points to.
    const int flags = O_PATH | O_DIRECTORY | (follow_final ? 0 : O_NOFOLLOW);
    auto dir = resolver.open(*parts, parts->size(), flags, "watch", path);
    if (!dir) return std::move(dir.error());
    struct stat st;
    if (::fstat(dir->get(), &st) != 0) return path_error(errno, "watch", path);
    if (!S_ISDIR(st.st_mode)) return path_error(ENOTDIR, "watch", path);
    // inotify_add_watch takes a path, never an fd: give it the fd's /proc/self/fd link, which
    // the kernel follows to exactly the inode openat2 resolved (no second lookup of the client's
    // path that a rename could redirect). It runs under the same unprivileged view, so watching
    // needs the read permission a process of the session would need.
    const std::string link = "/proc/self/fd/" + std::to_string(dir->get());
    const int wd = ::inotify_add_watch(inotify_fd, link.c_str(), mask | IN_ONLYDIR);
    if (wd < 0) return path_error(errno, "watch", path);
    return wd;
}

}  // namespace corral
