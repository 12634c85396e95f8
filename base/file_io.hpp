#pragma once
// Small whole-file helpers for kernel interface files (cgroupfs, procfs). Each returns an Error
// naming the path, so callers only add their own context.

#include <string>

#include "base/error.hpp"

namespace corral {

/// Reads the whole file at `path` (relative to `dirfd`, or absolute when dirfd is AT_FDCWD).
Result<std::string> read_file(int dirfd, const std::string& path);
/// Reads the whole file at an absolute or cwd-relative path.
Result<std::string> read_file(const std::string& path);
/// Writes `content` to an existing file with one write(2) (cgroupfs wants one write per value).
Status write_file(int dirfd, const std::string& path, const std::string& content);
/// Same, for an absolute or cwd-relative path.
Status write_file(const std::string& path, const std::string& content);

}  // namespace corral
