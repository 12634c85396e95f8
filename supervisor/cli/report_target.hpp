#pragma once
// Where `corral run --report FILE` writes, opened before the command starts.
//
// The command may run in the very directory that holds FILE (the cwd is bound writable), so by
// the time it ends FILE may be a symlink it planted (`ln -sf /etc/shadow report.json`: issue 10,
// item 5) or a FIFO that would block us. So the file is opened once, in corral's own view of
// the path and before the sandbox exists: no component is followed if it is a symlink (the
// parents are walked with O_NOFOLLOW, one by one, so a link planted in a parent directory the
// command can write cannot redirect the report either; the last component is O_NOFOLLOW),
// only a regular file is accepted (a FIFO, device, socket or directory is refused without being
// written), and at the end the report goes through that descriptor, never through the path.

#include <string>

#include "base/error.hpp"
#include "base/unique_fd.hpp"

namespace corral::cli {

/// An open --report destination: stderr ("-") or a regular file.
class ReportTarget {
  public:
    /// Opens (creating with mode 0644 when missing) `path`; "-" means stderr. Refuses a
    /// symlink as any component and anything but a regular file, naming the path given.
    static Result<ReportTarget> open(const std::string& path);

    /// Replaces the file's content with `text` (through the descriptor opened by open()).
    /// Warns on stderr when the path no longer names that file: the command replaced it.
    Status write(const std::string& text) const;

  private:
    std::string path_;
    UniqueFd parent_;   ///< O_PATH of the directory holding the report (empty for stderr)
    std::string leaf_;  ///< the report's name in it
    UniqueFd fd_;       ///< empty for stderr
    dev_t device_ = 0;
    ino_t inode_ = 0;
};

}  // namespace corral::cli
