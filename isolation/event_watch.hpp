#pragma once
// One descriptor for the limit backends' event sources: it becomes readable (POLLIN) when any of
// them fired. Sources are kernfs files (memory.events, pids.events: the kernel raises POLLPRI on
// each change) and plain descriptors (the v1 OOM eventfd). It is an epoll instance, not inotify:
// closing an inotify instance waits for an SRCU grace period (up to ~20 ms here), which every
// session or `corral run` with a limit used to pay at its end.

#include <string>
#include <vector>

#include "base/error.hpp"
#include "base/unique_fd.hpp"

namespace corral {

class EventWatch {
  public:
    /// Watches `name` in `dir_fd` (a kernfs file) for changes. A missing file is not an error
    /// (false): that hierarchy has no such events. A file that cannot be polled (a regular file,
    /// as in a test's fake cgroup tree) is an error.
    Result<bool> watch_file(int dir_fd, const std::string& name, const std::string& shown_dir);
    /// Watches a descriptor that becomes readable itself (the caller drains it).
    Status watch_readable(int fd);
    /// The epoll descriptor; -1 while nothing is watched.
    int fd() const { return watched_ > 0 ? epoll_.get() : -1; }
    /// Reads every watched file again, so its change is consumed until the next one.
    void rearm() const;

  private:
    Status ensure_epoll();
    UniqueFd epoll_;
    std::vector<UniqueFd> files_;
    size_t watched_ = 0;
};

}  // namespace corral
