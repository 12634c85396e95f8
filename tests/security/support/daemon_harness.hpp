#pragma once
// A real corrald for the escape suite, where it would run in production: socket in
// /run/<token>/, state in /var/lib/<token>/, each instance with its own names. Stopped (SIGTERM,
// then SIGKILL after a bound) and both directories removed when destroyed.

#include <sys/types.h>

#include <string>
#include <vector>

namespace corral::security {

/// One corrald instance; ready() once its socket accepts connections.
class Daemon {
  public:
    /// `extra_env`: "NAME=value" entries added to the environment corrald inherits.
    explicit Daemon(const std::vector<std::string>& extra_env = {});
    ~Daemon();
    Daemon(const Daemon&) = delete;
    Daemon& operator=(const Daemon&) = delete;

    bool ready() const { return ready_; }
    pid_t pid() const { return pid_; }
    const std::string& socket_path() const { return socket_; }
    const std::string& state_dir() const { return state_dir_; }
    /// What corrald wrote to stdout and stderr.
    std::string log() const;

  private:
    std::string run_dir_, state_dir_, socket_;
    std::string instance_;  ///< its cgroup instance, removed at the end if corrald left it
    pid_t pid_ = -1;
    bool ready_ = false;
};

}  // namespace corral::security
