#pragma once
// Keeps the calling thread's stack out of the copies fork() makes of this process, for as long
// as the object lives (MADV_DONTFORK on the thread's stack and guard page).
//
// Why: where a launch may not share corrald's memory it forks (isolation/launcher.hpp), and a
// fork copies every private mapping with its page tables. With 1,000 isolated sessions corrald
// runs 2,000 threads (each session's NetnsThread and its nftables worker) whose stacks were 4,000
// mappings (stack and guard) and ~48 MB resident: every `default` launch's clone3 took ~32 ms,
// and the launch worker (and with it corrald's loop) waited for it (issue 18). A forked child
// runs on the forking thread's stack and, until execve, only makes system calls on data the
// launcher prepared (launcher.hpp): nothing of another thread's stack. So a thread that never
// forks and keeps nothing a child reads on its stack can leave its stack out.
//
// Restored (MADV_DOFORK) when the object dies, at the end of the thread's function: glibc gives
// a finished thread's stack to the next thread it starts, which may be one that forks. A child
// forked from a thread whose stack is left out would have no stack at all: never use this in a
// thread that forks, or that lends its stack's memory to a launch.

#include <cstddef>

namespace corral {

class StackOutsideForks {
  public:
    StackOutsideForks() noexcept;
    ~StackOutsideForks();
    StackOutsideForks(const StackOutsideForks&) = delete;
    StackOutsideForks& operator=(const StackOutsideForks&) = delete;

    /// Whether the stack is left out (false where the kernel or the C library refused: the stack
    /// is then copied as before, which costs time, never correctness).
    bool active() const { return start_ != nullptr; }
    void* start() const { return start_; }
    size_t size() const { return size_; }

  private:
    void* start_ = nullptr;
    size_t size_ = 0;
};

}  // namespace corral
