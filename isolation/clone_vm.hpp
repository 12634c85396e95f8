#pragma once
// clone3 with the child on a stack of its own, for children that share our address space
// (CLONE_VM | CLONE_VFORK: launcher.cpp's launches that need no copy of corrald's memory; CLONE_VM
// alone: namespaces.cpp's idmap helper, on a stack of its caller's frame, not thread_child_stack).
//
// glibc 2.36 exports no clone3 wrapper, and a raw syscall(SYS_clone3) with CLONE_VM but no new
// stack would have the child return into, and write over, the very stack frames the suspended
// parent returns to afterwards. The child instead starts in a few instructions of assembly that
// call fn(arg) on the stack given in clone_args and end the child with SYS_exit: it never
// returns through a frame of ours.
//
// x86_64 only; elsewhere clone_on_stack_available() is false and callers fork as before. Also
// false under AddressSanitizer: the child's instrumented frames would poison shadow memory for a
// stack ASan does not know, shadow shared with the parent, and _exit leaves it poisoned.

#include <linux/sched.h>
#include <sys/types.h>

#include <cstddef>

#include "base/error.hpp"

namespace corral {

/// Whether clone3_on_stack() exists on this architecture (compiled in: x86_64).
constexpr bool clone_on_stack_available() noexcept {
#if defined(__SANITIZE_ADDRESS__)
    return false;
#elif defined(__x86_64__)
    return true;
#else
    return false;
#endif
}

/// A stack for the children of the calling thread: mapped once per thread (kChildStackSize
/// bytes above a PROT_NONE guard page) and reused by every launch of that thread, which
/// CLONE_VFORK serializes (the thread is suspended until its child has exec'd or exited, so two
/// children of one thread never run on it at once). Unmapped when the thread exits.
struct ChildStack {
    void* base = nullptr;  ///< lowest usable address (the guard page is below it)
    size_t size = 0;       ///< usable bytes; base + size is 16-byte aligned
};
inline constexpr size_t kChildStackSize = 128 * 1024;
/// The calling thread's ChildStack, mapped on first use.
Result<ChildStack> thread_child_stack();

/// clone3(args, sizeof args) where the child runs fn(arg) on [args.stack, args.stack +
/// args.stack_size) and exits (SYS_exit, its thread group being itself) with fn's result. Returns
/// the child's pid in the parent, -1 with errno on failure; never returns in the child. The
/// caller fills args (flags, pidfd, cgroup, exit_signal, stack, stack_size). fn runs with the
/// parent's registers but nothing of its stack: whatever it needs comes through arg. Every signal
/// is blocked across the clone (a raw rt_sigprocmask, glibc's internal ones too) and the caller's
/// mask restored after it: the child starts with all of them blocked, and unblocks what it wants
/// once it has reset their dispositions.
pid_t clone3_on_stack(clone_args& args, int (*fn)(void*), void* arg) noexcept;

}  // namespace corral
