#pragma once
// The baseline issue 18 names for a daemon `run`: "a bare fork+exec of the same command over a
// kept-alive connection". A process of its own that accepts HTTP/1.1 requests on a Unix socket,
// one connection at a time, and for each POST runs the JSON body's `argv` the plainest way a
// server can: fork(), execvp() with stdout and stderr on pipes, read both to EOF, waitpid(), and
// answer {"exitCode": N, "stdout": ..., "stderr": ...}. No cgroup, no namespace, no journal, no
// confinement: everything corrald does beyond this is what the ratio against it measures. The
// same keep-alive client (daemon_client.hpp) talks to both, so the transport is in both figures.

#include <sys/types.h>

#include <string>

namespace corral::bench {

class ForkExecServer {
  public:
    /// Forks the server process, listening at a socket in a fresh temp directory. Call it before
    /// this process starts threads (the server is a fork of it). running() says whether it did.
    ForkExecServer();
    /// Kills the server (by its pid: it is our child) and removes its socket and directory.
    ~ForkExecServer();
    ForkExecServer(const ForkExecServer&) = delete;
    ForkExecServer& operator=(const ForkExecServer&) = delete;

    bool running() const { return pid_ > 0; }
    const std::string& socket_path() const { return socket_path_; }

  private:
    std::string directory_;
    std::string socket_path_;
    pid_t pid_ = -1;
};

}  // namespace corral::bench
