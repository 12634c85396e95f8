#include "supervisor/cli/report_target.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <vector>

#include "base/path_walk.hpp"

namespace corral::cli {
namespace {

const char* kind_of(mode_t mode) {
    if (S_ISLNK(mode)) return "a symbolic link";
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISSOCK(mode)) return "a socket";
    if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
    return "not a regular file";
}

Error not_regular(const std::string& path, mode_t mode) {
    return plain_error("--report `" + path + "` is " + kind_of(mode) +
                       ": the report is written only to a regular file (or `-` for stderr)");
}

}  // namespace

Result<ReportTarget> ReportTarget::open(const std::string& path) {
    ReportTarget target;
    target.path_ = path;
    if (path == "-") return target;
    std::vector<std::string> parts = path_components(path);
    if (parts.empty() || parts.back() == ".." || path.ends_with("/"))
        return plain_error("--report `" + path + "` names a directory, not a file");
    target.leaf_ = parts.back();
    parts.pop_back();
    // Issue 10 item 5 closed the last component; a link planted in a parent directory (an
    // earlier job's `ln -s /etc out`, then `--report out/report.json`) redirected the write
    // all the same, as root. The parent is reached without following links, and everything
    // after goes through its descriptor.
    std::string parent_path = path.starts_with("/") ? "/" : "";
    for (const auto& part : parts) parent_path += part + "/";
    auto parent = open_directory_no_symlinks(
        parent_path.empty() ? "." : parent_path, "--report `" + path + "`",
        ". The command may write in the directories on the way to the report and could have "
        "planted it, so corral follows no link on the way: give the report's path without links");
    if (!parent) return std::move(parent.error());
    target.parent_ = std::move(*parent);
    const int dir = target.parent_.get();
    const char* leaf = target.leaf_.c_str();
    // Look before opening, so a FIFO or device is never opened at all (opening one can block
    // or have side effects); the fstat below catches a swap between the two.
    struct stat before {};
    const bool existed = ::fstatat(dir, leaf, &before, AT_SYMLINK_NOFOLLOW) == 0;
    if (!existed && errno != ENOENT) return sys_error("--report `" + path + "`");
    if (existed && !S_ISREG(before.st_mode)) return not_regular(path, before.st_mode);
    // O_NONBLOCK: should a FIFO appear in the window anyway, open() does not wait for a reader.
    int fd = ::openat(dir, leaf,
                      O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0644);
    if (fd < 0) {
        if (errno == ELOOP) return not_regular(path, S_IFLNK);
        return sys_error("--report `" + path + "`");
    }
    target.fd_.reset(fd);
    struct stat opened {};
    if (::fstat(fd, &opened) != 0) return sys_error("--report `" + path + "`: fstat");
    if (!S_ISREG(opened.st_mode)) return not_regular(path, opened.st_mode);
    target.device_ = opened.st_dev;
    target.inode_ = opened.st_ino;
    return target;
}

Status ReportTarget::write(const std::string& text) const {
    if (!fd_) {
        std::fputs(text.c_str(), stderr);
        return {};
    }
    if (::ftruncate(fd_.get(), 0) != 0) return sys_error("write report `" + path_ + "`: truncate");
    size_t done = 0;
    while (done < text.size()) {
        ssize_t n =
            ::pwrite(fd_.get(), text.data() + done, text.size() - done, static_cast<off_t>(done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return sys_error("write report `" + path_ + "`");
        done += static_cast<size_t>(n);
    }
    struct stat now {};
    if (::fstatat(parent_.get(), leaf_.c_str(), &now, AT_SYMLINK_NOFOLLOW) != 0 ||
        now.st_dev != device_ || now.st_ino != inode_)
        std::fprintf(stderr,
                     "corral run: `%s` was replaced while the command ran; the report went to "
                     "the file opened before it started, not to what the path names now\n",
                     path_.c_str());
    return {};
}

}  // namespace corral::cli
