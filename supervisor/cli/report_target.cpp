#include "supervisor/cli/report_target.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

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
    // Look before opening, so a FIFO or device is never opened at all (opening one can block
    // or have side effects); the fstat below catches a swap between the two.
    struct stat before {};
    const bool existed = ::lstat(path.c_str(), &before) == 0;
    if (!existed && errno != ENOENT) return sys_error("--report `" + path + "`");
    if (existed && !S_ISREG(before.st_mode)) return not_regular(path, before.st_mode);
    // O_NONBLOCK: should a FIFO appear in the window anyway, open() does not wait for a reader.
    int fd = ::open(path.c_str(),
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
    if (::lstat(path_.c_str(), &now) != 0 || now.st_dev != device_ || now.st_ino != inode_)
        std::fprintf(stderr,
                     "corral run: `%s` was replaced while the command ran; the report went to "
                     "the file opened before it started, not to what the path names now\n",
                     path_.c_str());
    return {};
}

}  // namespace corral::cli
