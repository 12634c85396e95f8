// A thread's stack left out of fork()'s copies (base/stack_outside_forks.hpp): what a forked
// child lacks, and what the thread's end gives back. No privileges needed.
#include "base/stack_outside_forks.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <fstream>
#include <future>
#include <sstream>
#include <string>
#include <thread>

namespace corral {
namespace {

struct Mapping {
    bool found = false;
    bool left_out_of_forks = false;  ///< "dc" in VmFlags: VM_DONTCOPY
};

/// The mapping of /proc/self/smaps that holds `address`.
Mapping mapping_at(uintptr_t address) {
    std::ifstream smaps("/proc/self/smaps");
    Mapping out;
    bool inside = false;
    for (std::string line; std::getline(smaps, line);) {
        uintptr_t from = 0, to = 0;
        char dash = 0;
        std::istringstream range(line);
        if (range >> std::hex >> from >> dash >> to && dash == '-' && line.find(' ') != 0) {
            inside = from <= address && address < to;
            if (inside) out.found = true;
            continue;
        }
        if (inside && line.rfind("VmFlags:", 0) == 0)
            out.left_out_of_forks = (line + " ").find(" dc ") != std::string::npos;
    }
    return out;
}

/// Forks as corrald's launcher does (a raw clone: glibc's fork() would walk every thread's
/// descriptor in the child, on stacks that are not there); the child answers 0 if nothing is
/// mapped at `address` in its copy, 1 if something is, with nothing but system calls.
int child_sees_mapping_at(uintptr_t address) {
    void* page = reinterpret_cast<void*>(address & ~static_cast<uintptr_t>(::getpagesize() - 1));
    const pid_t pid = static_cast<pid_t>(::syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0));
    if (pid == 0) {
        if (::madvise(page, 1, MADV_NORMAL) == 0) ::_exit(1);
        ::_exit(errno == ENOMEM ? 0 : 2);
    }
    int status = 0;
    if (pid < 0 || ::waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
    return WEXITSTATUS(status);
}

// Issue 18: a fork of corrald with 1,000 isolated sessions copied 2,000 thread stacks (4,000
// mappings) and took ~32 ms a launch. The stacks of threads that never fork stay out of the copy.
TEST(StackOutsideForks, AForkedChildHasNoCopyOfTheStackWhileTheGuardLives) {
    std::promise<uintptr_t> marked_at;
    std::promise<void> forked;
    bool active = false, marked = false;
    std::thread thread([&] {
        const StackOutsideForks guard;
        int local = 0;
        active = guard.active();
        marked = mapping_at(reinterpret_cast<uintptr_t>(&local)).left_out_of_forks;
        marked_at.set_value(reinterpret_cast<uintptr_t>(&local));
        forked.get_future().wait();  // alive, guard and all, while the test thread forks
    });
    const uintptr_t on_stack = marked_at.get_future().get();
    // Forked from this thread, as corrald's launches fork from theirs.
    const int child_saw = child_sees_mapping_at(on_stack);
    const bool parent_sees = mapping_at(on_stack).found;
    forked.set_value();
    thread.join();
    ASSERT_TRUE(active) << "pthread_getattr_np or madvise(MADV_DONTFORK) refused";
    EXPECT_TRUE(marked) << "VmFlags of the thread's stack lack `dc`";
    EXPECT_TRUE(parent_sees);
    EXPECT_EQ(child_saw, 0) << "1: the child has a copy of the left-out stack; -1, 2: it failed";
}

// glibc hands a finished thread's stack to the next thread it starts, which may fork: the mark
// must be gone once the guard is.
TEST(StackOutsideForks, TheMarkIsGoneWhenTheGuardIs) {
    uintptr_t on_stack = 0;
    bool marked_inside = false, marked_after = true;
    std::thread thread([&] {
        {
            const StackOutsideForks guard;
            int local = 0;
            on_stack = reinterpret_cast<uintptr_t>(&local);
            marked_inside = mapping_at(on_stack).left_out_of_forks;
        }
        marked_after = mapping_at(on_stack).left_out_of_forks;
    });
    thread.join();
    EXPECT_TRUE(marked_inside);
    EXPECT_FALSE(marked_after);
}

}  // namespace
}  // namespace corral
