#pragma once
// A pipe as two owned ends. Close-on-exec by default: a child that needs an end gets it through
// dup2() onto its stdio (which clears the flag on the copy), never by inheritance.

#include <fcntl.h>
#include <unistd.h>

#include "base/error.hpp"
#include "base/unique_fd.hpp"

namespace corral {

/// Both ends of one pipe.
struct Pipe {
    UniqueFd read_end;
    UniqueFd write_end;
};

/// pipe2(flags); O_CLOEXEC unless told otherwise.
inline Result<Pipe> make_pipe(int flags = O_CLOEXEC) {
    int fds[2];
    if (::pipe2(fds, flags) != 0) return sys_error("pipe2");
    return Pipe{UniqueFd(fds[0]), UniqueFd(fds[1])};
}

}  // namespace corral
