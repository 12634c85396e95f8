#pragma once
// File operations confined to one session's root directory (the file API: get, put, delete, mkdir,
// move, list, stat).
//
// Why openat2 and not path strings: joining "root + '/' + client path" and checking the result is
// racy and wrong — `..`, an absolute symlink, or a directory swapped for a symlink between the
// check and the open all lead outside (CVE-2018-15664, `docker cp` symlink-exchange race;
// CVE-2019-14271). Instead we hold an O_PATH fd of the root and let the kernel resolve every path
// relative to it with RESOLVE_IN_ROOT (the root acts as "/" for `..` and absolute symlinks,
// atomically against concurrent renames) and RESOLVE_NO_MAGICLINKS (no /proc/<pid>/root or
// /proc/<pid>/fd jumps).
//
// Path rules (paths are exactly what the client sent):
//   - empty, or containing a NUL byte -> EINVAL.
//   - a leading '/' means the session root; "a//b" and "./a" are "a/b" and "a".
//   - `..` that would climb above the root lexically ("../../etc/passwd") -> EXDEV,
//     "path `../../etc/passwd` escapes the session root". Symlinks are not refused: they resolve
//     with the root as "/", so a link to /etc/passwd means <root>/etc/passwd.
//   - Operations that act on an entry itself (remove, stat, move, the rename at the end of a
//     write) resolve the PARENT with openat2 and touch the final name with *at() calls that never
//     follow it: stat of a symlink reports a symlink; remove deletes the link, not its target.
//   - open_read and list follow a final symlink, but only inside the root.
//
// Every error carries errno and names the path as the client gave it. classify() maps an error to
// a kind that supervisor/ turns into an HTTP status.
//
// Thread-safe: all operations are const and hold no state beyond the root fd.

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.hpp"
#include "base/unique_fd.hpp"

namespace corral {

/// What kind of failure a file-service Error is (for mapping to HTTP statuses).
enum class FileErrorKind {
    not_found,        ///< ENOENT (404)
    escapes_root,     ///< EXDEV, ELOOP: `..` above the root, magic link, swapped mount (403/400)
    exists,           ///< EEXIST (409)
    not_empty,        ///< ENOTEMPTY: non-recursive delete of a non-empty directory (409)
    not_a_directory,  ///< ENOTDIR (400/409)
    is_a_directory,   ///< EISDIR: read/write of a directory (400/409)
    denied,           ///< EACCES, EPERM, EROFS (403)
    invalid,          ///< EINVAL, ENAMETOOLONG, EBUSY (root itself), errors without errno (400)
    io,               ///< anything else: ENOSPC, EIO, EMFILE... (500/507)
};

/// Maps an Error from FileService to its kind (by errno).
FileErrorKind classify(const Error& error);
/// "not_found", "escapes_root", ... (stable names for API error codes).
const char* kind_name(FileErrorKind kind);

/// Type of a directory entry. Never followed: a symlink is reported as a symlink.
enum class FileType { file, dir, symlink, other };
/// "file", "dir", "symlink", "other".
const char* type_name(FileType type);

/// One entry of list() or the result of stat().
struct FileInfo {
    std::string name;  ///< final component ("/" for the root itself)
    FileType type = FileType::other;
    uint64_t size = 0;        ///< st_size (for a symlink: the length of its target)
    uint32_t mode = 0;        ///< permission bits (st_mode & 07777)
    int64_t mtime_ns = 0;     ///< modification time, nanoseconds since the Unix epoch
    std::string link_target;  ///< the symlink's target text (not resolved); empty otherwise
};

/// An open regular file for streaming a GET.
struct ReadHandle {
    UniqueFd fd;        ///< opened O_RDONLY|O_CLOEXEC, blocking
    uint64_t size = 0;  ///< size at open time
};

/// Owner given to files and directories the service creates (the session's uid/gid), so the
/// session's processes can modify what a client uploaded. Unset: the daemon's own ids.
struct FileOwner {
    uid_t uid = 0;
    gid_t gid = 0;
};

/// Knobs of a FileService.
struct FileServiceOptions {
    std::optional<FileOwner> owner;  ///< chown created entries to this uid/gid
    /// Also refuse paths that cross a mount point below the root (RESOLVE_NO_XDEV). Off by default
    /// because a session root may legitimately contain mounts (e.g. a tmpfs workspace).
    bool same_mount_only = false;
    /// Where the root is in the paths clients give (the workspace's path inside the sandbox, e.g.
    /// "/workspace"): absolute paths must lie beneath it (else EXDEV) and it is stripped. "": the
    /// root is "/" (and relative paths are beneath it).
    std::string mount_point;
    /// Run every operation with this filesystem uid/gid and no supplementary groups (per thread:
    /// setfsuid/setfsgid/setgroups as raw syscalls), so the daemon reads and writes what an
    /// unprivileged process of the session could, never more (a confused deputy would read the
    /// host's /etc/shadow through a sandbox that binds /etc read-only).
    std::optional<FileOwner> act_as;
};

/// An upload in progress: bytes go into a hidden temp file next to the target; commit() renames it
/// over the target atomically. Destroyed without commit() (failed or aborted upload), it removes
/// the temp file, so a failed PUT never leaves a half-written file behind.
class WriteTransaction {
  public:
    WriteTransaction(WriteTransaction&& other) noexcept;
    WriteTransaction& operator=(WriteTransaction&& other) noexcept;
    WriteTransaction(const WriteTransaction&) = delete;
    WriteTransaction& operator=(const WriteTransaction&) = delete;
    ~WriteTransaction();

    /// The temp file's descriptor (O_WRONLY|O_CLOEXEC, blocking); write the body into it.
    int fd() const { return file_.get(); }
    /// Writes all of `bytes` (retries short writes and EINTR).
    Status write_all(std::string_view bytes);
    /// Renames the temp file over the target (replacing a file or symlink, never a directory).
    Status commit();
    /// Removes the temp file now (also done by the destructor if not committed).
    void abort();

  private:
    friend class FileService;
    WriteTransaction(UniqueFd parent, UniqueFd file, std::string temp_name, std::string name,
                     std::string client_path, std::optional<FileOwner> act_as);

    UniqueFd parent_;          // O_PATH fd of the target's directory
    UniqueFd file_;            // the temp file
    std::string temp_name_;    // temp file's name in parent_
    std::string name_;         // target's name in parent_
    std::string client_path_;  // for messages
    std::optional<FileOwner> act_as_;  // the service's unprivileged view, for rename and unlink
    bool done_ = false;        // committed or aborted
};

/// File operations confined to a session root (see the file comment for the rules).
class FileService {
  public:
    /// Opens `root_dir` (an absolute host path) as the root of a new service.
    static Result<FileService> open(const std::string& root_dir, FileServiceOptions options = {});
    /// A service over an already-open directory fd (O_PATH is enough).
    FileService(UniqueFd root, FileServiceOptions options = {});

    /// Opens a regular file for reading. EISDIR for a directory, EINVAL for FIFOs, sockets and
    /// devices: those are never opened at all (opening could block or have side effects); the
    /// entry is resolved O_PATH, checked, and only a regular file is reopened for reading.
    Result<ReadHandle> open_read(std::string_view path) const;
    /// Starts an upload to `path`; with create_parents, missing parent directories are made first.
    /// EISDIR if `path` is an existing directory; EINVAL for the root itself.
    Result<WriteTransaction> open_write(std::string_view path, bool create_parents) const;
    /// Deletes a file, symlink (the link itself) or directory. A non-empty directory needs
    /// `recursive` (else ENOTEMPTY); recursion never follows symlinks and never crosses into
    /// another mount (EXDEV). The root itself is refused (EBUSY).
    Status remove(std::string_view path, bool recursive) const;
    /// Creates a directory (mode 0755 & ~umask). recursive: like `mkdir -p` (existing dirs are
    /// fine); otherwise EEXIST if it exists and ENOENT if the parent is missing.
    Status mkdir(std::string_view path, bool recursive) const;
    /// Renames `from` to `to` (both inside the root). EEXIST if `to` exists, unless `replace`.
    Status move(std::string_view from, std::string_view to, bool replace = false) const;
    /// Entries of a directory, sorted by name, without "." and "..".
    Result<std::vector<FileInfo>> list(std::string_view path) const;
    /// Information about one entry (a symlink is reported as a symlink, never followed).
    Result<FileInfo> stat(std::string_view path) const;

    /// Adds a watch on the directory `path` to the inotify instance `inotify_fd` and returns its
    /// watch descriptor. The directory is resolved like everything else here (openat2 beneath the
    /// root, as the service's identity), then handed to the kernel as /proc/self/fd/N of that
    /// resolved fd. `follow_final`: a final symlink is followed (inside the root); otherwise a
    /// final symlink is ENOTDIR. ENOTDIR for anything but a directory.
    Result<int> add_watch(int inotify_fd, std::string_view path, uint32_t mask,
                          bool follow_final) const;
    /// The root's O_PATH fd (for callers that need to resolve something else under it).
    int root_fd() const { return root_.get(); }

  private:
    UniqueFd root_;
    FileServiceOptions options_;
};

}  // namespace corral
