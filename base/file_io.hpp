#pragma once
// Small whole-file helpers for kernel interface files (cgroupfs, procfs). Each returns an Error
// naming the path, so callers only add their own context.

#include <cstddef>
#include <optional>
#include <string>

#include "base/error.hpp"

namespace corral {

/// How read_regular_file() resolves its path against the directory fd.
enum class PathScope {
    anywhere,  ///< as openat(2) does: absolute paths, `..` and symlinks are followed
    beneath,   ///< openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS): nothing may leave dirfd
};

/// Reads a whole regular file of at most `max_bytes` bytes, for files that a caller names and
/// that may therefore be anything: a FIFO (whose open or read would block forever), a device
/// (/dev/zero never ends; opening a tape or watchdog has side effects), a socket, or a file that
/// grows while it is read. The path is first opened O_PATH (which opens nothing: no FIFO open, no
/// device driver call), checked with fstat, and only a regular file is then reopened for reading
/// through that very handle, O_NONBLOCK; at most max_bytes + 1 bytes are ever read. Errors:
/// EINVAL "is a FIFO/character device/... not a regular file", EISDIR, EFBIG "is N bytes, more
/// than the limit", EXDEV for a `beneath` path that leaves dirfd, and the open's own errno. Every
/// message names `path` as given (never the file's content).
Result<std::string> read_regular_file(int dirfd, const std::string& path, size_t max_bytes,
                                      PathScope scope = PathScope::anywhere);
/// What kind of file `mode` (st_mode) is, in words: "a FIFO", "a character device", ...
std::string file_kind(unsigned mode);

/// Reads the whole file at `path` (relative to `dirfd`, or absolute when dirfd is AT_FDCWD).
Result<std::string> read_file(int dirfd, const std::string& path);
/// Reads the whole file at an absolute or cwd-relative path.
Result<std::string> read_file(const std::string& path);
/// Writes `content` to an existing file with one write(2) (cgroupfs wants one write per value).
Status write_file(int dirfd, const std::string& path, const std::string& content);
/// Same, for an absolute or cwd-relative path.
Status write_file(const std::string& path, const std::string& content);

/// The directory part of an absolute path: "/a/b" -> "/a", "/a" -> "/" (and "/" for a name
/// without a slash).
std::string parent_of(const std::string& path);

/// `path` with every symbolic link and `.`/`..` resolved (realpath(3)); nothing when some part of
/// it does not exist or cannot be searched.
std::optional<std::string> real_path(const std::string& path);

}  // namespace corral
