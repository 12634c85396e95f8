#include "base/file_io.hpp"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "base/unique_fd.hpp"
#include "base/openat2.hpp"

namespace corral {

Result<std::string> read_file(int dirfd, const std::string& path) {
    UniqueFd fd(::openat(dirfd, path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) return sys_error("open `" + path + "`");
    std::string out;
    char buf[4096];
    for (;;) {
        ssize_t n = ::read(fd.get(), buf, sizeof buf);
        if (n < 0) {
            if (errno == EINTR) continue;
            return sys_error("read `" + path + "`");
        }
        if (n == 0) break;
        out.append(buf, static_cast<size_t>(n));
    }
    return out;
}

Result<std::string> read_file(const std::string& path) { return read_file(AT_FDCWD, path); }

std::string file_kind(unsigned mode) {
    switch (mode & S_IFMT) {
        case S_IFREG:
            return "a regular file";
        case S_IFDIR:
            return "a directory";
        case S_IFIFO:
            return "a FIFO";
        case S_IFCHR:
            return "a character device";
        case S_IFBLK:
            return "a block device";
        case S_IFSOCK:
            return "a socket";
        case S_IFLNK:
            return "a symbolic link";
        default:
            return "not a regular file";
    }
}

namespace {

std::string size_text(size_t bytes) {
    if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
    if (bytes >= 1024 && bytes % 1024 == 0) return std::to_string(bytes >> 10) + " KiB";
    return std::to_string(bytes) + " bytes";
}

// O_PATH opens the name only: no FIFO rendezvous, no driver open(). Symlinks are followed as the
// scope allows (a caller's own path may be a link; `beneath` keeps every link inside dirfd).
Result<UniqueFd> open_path_handle(int dirfd, const std::string& path, PathScope scope) {
    if (path.find('\0') != std::string::npos)
        return sys_error(EINVAL, "`" + path + "` contains a NUL byte");
    if (scope == PathScope::anywhere) {
        UniqueFd fd(::openat(dirfd, path.c_str(), O_PATH | O_CLOEXEC));
        if (!fd) return sys_error("open `" + path + "`");
        return fd;
    }
    open_how how{};
    how.flags = O_PATH | O_CLOEXEC;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
    const int fd = openat2_retrying(dirfd, path.c_str(), how);
    if (fd < 0) {
        if (errno == EXDEV) return sys_error(EXDEV, "`" + path + "` leads outside its directory");
        return sys_error("open `" + path + "`");
    }
    return UniqueFd(fd);
}

}  // namespace

Result<std::string> read_regular_file(int dirfd, const std::string& path, size_t max_bytes,
                                      PathScope scope) {
    auto handle = open_path_handle(dirfd, path, scope);
    if (!handle) return std::move(handle.error());
    struct stat st {};
    if (::fstat(handle->get(), &st) != 0) return sys_error("stat `" + path + "`");
    if (S_ISDIR(st.st_mode)) return sys_error(EISDIR, "`" + path + "` is a directory");
    if (!S_ISREG(st.st_mode))
        return sys_error(EINVAL, "`" + path + "` is " + file_kind(st.st_mode) +
                                     ", not a regular file (refused: it could block or never end)");
    auto too_big = [&](const std::string& size) {
        return sys_error(EFBIG, "`" + path + "` is " + size + ", more than the limit of " +
                                    size_text(max_bytes));
    };
    if (static_cast<uint64_t>(st.st_size) > max_bytes)
        return too_big(std::to_string(st.st_size) + " bytes");
    // Reopen the inode the handle names (not the path again, which could have been swapped for
    // a FIFO meanwhile); O_NONBLOCK as a second guard.
    const std::string self = "/proc/self/fd/" + std::to_string(handle->get());
    UniqueFd fd(::open(self.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
    if (!fd) return sys_error("open `" + path + "`");
    std::string out;
    out.reserve(static_cast<size_t>(st.st_size));
    char buf[16384];
    for (;;) {
        const size_t want = std::min(sizeof buf, max_bytes + 1 - out.size());
        ssize_t n = ::read(fd.get(), buf, want);
        if (n < 0) {
            if (errno == EINTR) continue;
            return sys_error("read `" + path + "`");
        }
        if (n == 0) break;
        out.append(buf, static_cast<size_t>(n));
        if (out.size() > max_bytes) return too_big("more than that");  // it grew while read
    }
    return out;
}

Status write_file(int dirfd, const std::string& path, const std::string& content) {
    UniqueFd fd(::openat(dirfd, path.c_str(), O_WRONLY | O_CLOEXEC));
    if (!fd) return sys_error("open `" + path + "`");
    ssize_t n;
    do {
        n = ::write(fd.get(), content.data(), content.size());
    } while (n < 0 && errno == EINTR);
    if (n < 0) return sys_error("write `" + content + "` to `" + path + "`");
    if (static_cast<size_t>(n) != content.size())
        return plain_error("short write to `" + path + "`");
    return {};
}

Status write_file(const std::string& path, const std::string& content) {
    return write_file(AT_FDCWD, path, content);
}

std::string parent_of(const std::string& path) {
    const size_t slash = path.rfind('/');
    return slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
}

std::optional<std::string> real_path(const std::string& path) {
    std::unique_ptr<char, decltype(&std::free)> resolved(::realpath(path.c_str(), nullptr),
                                                         &std::free);
    if (!resolved) return std::nullopt;
    return std::string(resolved.get());
}

}  // namespace corral
