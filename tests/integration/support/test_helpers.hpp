#pragma once
// Small helpers shared by the integration suites.

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <string>

namespace corral::test_support {

/// "corral-test-<pid>-<n>": a cgroup or directory name no other test process uses.
inline std::string unique_name() {
    static std::atomic<int> counter{0};
    return "corral-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
}

/// Reads a file descriptor (a pipe) to EOF.
inline std::string drain(int fd) {
    std::string out;
    char buf[4096];
    for (;;) {
        ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        out.append(buf, static_cast<size_t>(n));
    }
    return out;
}

/// Whether anything exists at `path`.
inline bool exists(const std::string& path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0;
}

}  // namespace corral::test_support
