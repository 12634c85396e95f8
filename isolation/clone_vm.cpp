#include "isolation/clone_vm.hpp"

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdint>

namespace corral {
namespace {

constexpr size_t kGuardSize = 4096;

/// The thread's mapping: [guard page | stack], unmapped at thread exit. A launching thread
/// never exits while a child runs on it (CLONE_VFORK holds it until the child has exec'd).
class ThreadStackMapping {
  public:
    ThreadStackMapping() = default;
    ThreadStackMapping(const ThreadStackMapping&) = delete;
    ThreadStackMapping& operator=(const ThreadStackMapping&) = delete;
    ~ThreadStackMapping() {
        if (mapping_ != nullptr) ::munmap(mapping_, kGuardSize + kChildStackSize);
    }

    Result<ChildStack> get() {
        if (mapping_ == nullptr) {
            void* mapped = ::mmap(nullptr, kGuardSize + kChildStackSize, PROT_READ | PROT_WRITE,
                                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK | MAP_NORESERVE, -1, 0);
            if (mapped == MAP_FAILED) return sys_error("map a stack for the launch child");
            // The stack grows down: an overflow faults on the guard page (and kills the child,
            // its signals being blocked: a blocked SIGSEGV is forced to its default) instead of
            // writing over whatever lies below.
            if (::mprotect(mapped, kGuardSize, PROT_NONE) != 0) {
                Error error = sys_error("protect the launch child's guard page");
                ::munmap(mapped, kGuardSize + kChildStackSize);
                return error;
            }
            mapping_ = mapped;
        }
        return ChildStack{static_cast<char*>(mapping_) + kGuardSize, kChildStackSize};
    }

  private:
    void* mapping_ = nullptr;
};

}  // namespace
}  // namespace corral

#if defined(__x86_64__)
static_assert(SYS_clone3 == 435 && SYS_exit == 60, "x86_64 system call numbers");

// long corral_clone3_on_stack_raw(clone_args* args, size_t size, int (*fn)(void*), void* arg)
// Returns what clone3 returns in the parent (pid, or -errno). In the child (rax 0) the kernel
// has set rsp to args->stack + args->stack_size; fn and arg were parked in r8 and r9, which the
// syscall instruction preserves (it clobbers only rax, rcx and r11) and the child inherits. The
// child calls fn(arg) with rsp 16-byte aligned before the call, as the ABI wants, and exits the
// thread with fn's result; there is no frame to return to (rbp 0, rip undefined for unwinders).
asm(R"(
    .pushsection .text
    .p2align 4
    .globl corral_clone3_on_stack_raw
    .hidden corral_clone3_on_stack_raw
    .type corral_clone3_on_stack_raw, @function
corral_clone3_on_stack_raw:
    .cfi_startproc
    endbr64
    movq %rdx, %r8
    movq %rcx, %r9
    movl $435, %eax
    syscall
    testq %rax, %rax
    jz 1f
    ret
1:
    .cfi_undefined %rip
    xorl %ebp, %ebp
    movq %r9, %rdi
    call *%r8
    movl %eax, %edi
    movl $60, %eax
    syscall
    ud2
    .cfi_endproc
    .size corral_clone3_on_stack_raw, .-corral_clone3_on_stack_raw
    .popsection
)");

extern "C" long corral_clone3_on_stack_raw(clone_args* args, size_t size, int (*fn)(void*),
                                           void* arg);
#endif

namespace corral {

Result<ChildStack> thread_child_stack() {
    static thread_local ThreadStackMapping mapping;
    return mapping.get();
}

pid_t clone3_on_stack(clone_args& args, int (*fn)(void*), void* arg) noexcept {
#if defined(__x86_64__)
    if (args.stack == 0 || args.stack_size == 0 || ((args.stack + args.stack_size) & 15) != 0) {
        errno = EINVAL;
        return -1;
    }
    // Every signal blocked across the clone, so the child starts with all of them blocked: no
    // handler of ours may run on its stack, in our memory, before fn has reset them. A raw call:
    // glibc's sigprocmask leaves its internal 32 and 33 open.
    uint64_t all = ~uint64_t{0}, ours = 0;
    ::syscall(SYS_rt_sigprocmask, SIG_SETMASK, &all, &ours, sizeof all);
    const long result = corral_clone3_on_stack_raw(&args, sizeof args, fn, arg);
    ::syscall(SYS_rt_sigprocmask, SIG_SETMASK, &ours, nullptr, sizeof ours);
    if (result < 0) {
        errno = static_cast<int>(-result);
        return -1;
    }
    return static_cast<pid_t>(result);
#else
    (void)args;
    (void)fn;
    (void)arg;
    errno = ENOSYS;
    return -1;
#endif
}

}  // namespace corral
