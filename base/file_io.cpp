#include "base/file_io.hpp"

#include <fcntl.h>
#include <unistd.h>

#include "base/unique_fd.hpp"

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

}  // namespace corral
