#pragma once
// Small helpers shared by the integration suites.

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "base/file_io.hpp"
#include "tests/support/temp_dir.hpp"

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

/// /proc/<pid>/<file> as text; "" when it cannot be read (the process is gone, not even a
/// zombie, or the file is not there).
inline std::string proc_text(pid_t pid, const std::string& file) {
    auto text = read_file("/proc/" + std::to_string(pid) + "/" + file);
    return text ? *text : std::string();
}

/// A /proc/<pid>/status field's value, without its tab ("" when absent).
inline std::string status_field(pid_t pid, const std::string& field) {
    std::istringstream lines(proc_text(pid, "status"));
    for (std::string line; std::getline(lines, line);)
        if (line.rfind(field + ":\t", 0) == 0) return line.substr(field.size() + 2);
    return {};
}

/// Whether `needle` is anywhere in the writable memory of `pid` (heap, stacks, data: what was
/// written; root reads /proc/<pid>/mem). nullopt: the memory could not be read.
inline std::optional<bool> memory_holds(pid_t pid, const std::string& needle) {
    std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
    std::ifstream mem("/proc/" + std::to_string(pid) + "/mem", std::ios::binary);
    if (!maps || !mem) return std::nullopt;
    bool read_any = false;
    for (std::string line; std::getline(maps, line);) {
        unsigned long begin = 0, end = 0;
        char perms[5] = {};
        if (std::sscanf(line.c_str(), "%lx-%lx %4s", &begin, &end, perms) != 3) continue;
        if (perms[0] != 'r' || perms[1] != 'w') continue;
        std::string region(end - begin, '\0');
        mem.clear();
        mem.seekg(static_cast<std::streamoff>(begin));
        mem.read(region.data(), static_cast<std::streamsize>(region.size()));
        if (mem.gcount() <= 0) continue;
        read_any = true;
        region.resize(static_cast<size_t>(mem.gcount()));
        if (region.find(needle) != std::string::npos) return true;
    }
    if (!read_any) return std::nullopt;
    return false;
}

/// A child of ours that waits for a signal: a stand-in for a process someone else started.
/// Killed and reaped when this goes, unless it was reaped before (however the test ends).
class PausingChild {
  public:
    PausingChild() : pid_(::fork()) {
        if (pid_ == 0) {
            ::pause();
            ::_exit(0);
        }
    }
    ~PausingChild() {
        if (pid_ > 0 && ::waitpid(pid_, nullptr, WNOHANG) == 0) {  // still ours, still there
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, nullptr, 0);
        }
    }
    pid_t pid() const { return pid_; }
    PausingChild(const PausingChild&) = delete;
    PausingChild& operator=(const PausingChild&) = delete;

  private:
    pid_t pid_;
};

}  // namespace corral::test_support
