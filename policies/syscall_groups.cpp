#include "policies/syscall_groups.hpp"

#include <algorithm>
#include <set>

namespace corral {
namespace {

// The group table. Rules for editing it:
//  - keep it sorted by name (a unit test checks; lookup is a binary search);
//  - list only syscall names that exist on x86_64, the architecture corral builds for and filters
//    (seccomp filters are native-arch only). The unit test resolves every name (libseccomp, then
//    policies/syscall_numbers for calls newer than libseccomp 2.5), so a typo or a name from
//    another architecture (vm86, pciconfig_read, ...) fails the build's tests;
//  - "@group" entries include another group; includes are resolved recursively by expand_syscalls.
//
// Namespace creation cannot be expressed by names alone: clone(2) takes CLONE_NEW* in its flags
// argument and clone3(2) passes its flags in memory that seccomp cannot read. @namespaces therefore
// lists only unshare and setns; isolation/seccomp adds the argument-level clone rule and answers
// clone3 with ENOSYS (so libc falls back to clone) wherever namespace creation is denied.
constexpr SyscallGroup kGroups[] = {
    {"@aio", "Asynchronous I/O, including io_uring",
     "io_cancel io_destroy io_getevents io_pgetevents io_setup io_submit io_uring_enter "
     "io_uring_register io_uring_setup"},
    {"@basic-io", "Read, write and close already-open file descriptors",
     "close close_range dup dup2 dup3 lseek pread64 preadv preadv2 pwrite64 pwritev pwritev2 read "
     "readv write writev"},
    {"@chown", "Change file ownership", "chown fchown fchownat lchown"},
    {"@clock", "Set the system clock", "adjtimex clock_adjtime clock_settime settimeofday"},
    {"@cpu-emulation", "Emulate other CPU modes (LDT changes)", "modify_ldt"},
    {"@debug",
     "Inspect or modify other processes: tracing, profiling, cross-process memory and fds",
     "kcmp lookup_dcookie perf_event_open pidfd_getfd process_madvise process_vm_readv "
     "process_vm_writev ptrace"},
    {"@default", "What every program needs: memory, threads, time, identity queries, exit",
     "arch_prctl brk clock_getres clock_gettime clock_nanosleep exit exit_group futex futex_waitv "
     "get_robust_list get_thread_area getegid geteuid getgid getgroups getpgid getpgrp getpid "
     "getppid getrandom getresgid getresuid getrlimit getsid gettid gettimeofday getuid membarrier "
     "mmap mprotect munmap nanosleep pause prlimit64 restart_syscall rseq rt_sigreturn "
     "sched_getaffinity sched_yield set_robust_list set_thread_area set_tid_address time"},
    {"@file-system", "Open, create, inspect, rename and remove files and directories",
     "access chdir chmod creat faccessat faccessat2 fallocate fchdir fchmod fchmodat fchmodat2 "
     "fcntl "
     "fgetxattr flistxattr fremovexattr fsetxattr fstat fstatfs ftruncate futimesat getcwd "
     "getdents "
     "getdents64 getxattr inotify_add_watch inotify_init inotify_init1 inotify_rm_watch lgetxattr "
     "link linkat listxattr llistxattr lremovexattr lsetxattr lstat mkdir mkdirat mknod mknodat "
     "newfstatat open openat openat2 readlink readlinkat removexattr rename renameat renameat2 "
     "rmdir "
     "setxattr stat statfs statx symlink symlinkat truncate unlink unlinkat utime utimensat "
     "utimes"},
    {"@io-event", "Wait for events on file descriptors",
     "epoll_create epoll_create1 epoll_ctl epoll_pwait epoll_pwait2 epoll_wait eventfd eventfd2 "
     "poll "
     "ppoll pselect6 select"},
    {"@ipc", "Pipes, SysV and POSIX message queues, semaphores and shared memory",
     "memfd_create mq_getsetattr mq_notify mq_open mq_timedreceive mq_timedsend mq_unlink msgctl "
     "msgget msgrcv msgsnd pipe pipe2 semctl semget semop semtimedop shmat shmctl shmdt shmget"},
    {"@keyring", "The kernel keyring", "add_key keyctl request_key"},
    {"@memlock", "Lock memory into RAM", "mlock mlock2 mlockall munlock munlockall"},
    {"@module", "Load and unload kernel modules", "delete_module finit_module init_module"},
    {"@mount", "Mount, unmount and change the root directory",
     "chroot fsconfig fsmount fsopen fspick mount mount_setattr move_mount open_tree "
     "open_tree_attr pivot_root umount2"},
    {"@namespaces", "Create or join namespaces (clone/clone3 flags are handled separately)",
     "setns unshare"},
    {"@network-io", "Sockets",
     "accept accept4 bind connect getpeername getsockname getsockopt listen recvfrom recvmmsg "
     "recvmsg sendmmsg sendmsg sendto setsockopt shutdown socket socketpair"},
    {"@obsolete", "Syscalls no current program should need",
     "_sysctl afs_syscall create_module epoll_ctl_old epoll_wait_old get_kernel_syms getpmsg "
     "nfsservctl putpmsg query_module security sysfs tuxcall uselib ustat vserver"},
    {"@privileged", "Calls that need a capability to do anything useful",
     "@chown @clock @module @raw-io @reboot @swap _sysctl acct bpf capset chroot fanotify_init "
     "nfsservctl open_by_handle_at pivot_root quotactl quotactl_fd setdomainname setfsuid setgid "
     "setgroups sethostname setresgid setresuid setreuid setuid syslog vhangup"},
    {"@process", "Create, run, signal and wait for processes and threads",
     "capget clone clone3 execve execveat fork getrusage kill pidfd_open pidfd_send_signal prctl "
     "rt_sigqueueinfo rt_tgsigqueueinfo tgkill times tkill vfork wait4 waitid"},
    {"@raw-io", "Direct hardware port access", "ioperm iopl"},
    {"@reboot", "Reboot or load a new kernel", "kexec_file_load kexec_load reboot"},
    {"@resources", "Change scheduling, memory placement and resource limits",
     "ioprio_set mbind migrate_pages move_pages sched_setaffinity sched_setattr sched_setparam "
     "sched_setscheduler set_mempolicy set_mempolicy_home_node setpriority setrlimit"},
    {"@sandbox", "Sandbox oneself further (seccomp, Landlock)",
     "landlock_add_rule landlock_create_ruleset landlock_restrict_self seccomp"},
    {"@setuid", "Change user and group ids",
     "setfsgid setfsuid setgid setgroups setregid setresgid setresuid setreuid setuid"},
    {"@signal", "Handle and wait for signals",
     "rt_sigaction rt_sigpending rt_sigprocmask rt_sigsuspend rt_sigtimedwait sigaltstack signalfd "
     "signalfd4"},
    {"@swap", "Enable and disable swap", "swapoff swapon"},
    {"@sync", "Flush file data to storage", "fdatasync fsync msync sync sync_file_range syncfs"},
    {"@system-service", "What ordinary services, shells, coreutils and interpreters use",
     "@basic-io @chown @default @file-system @io-event @ipc @memlock @network-io @process "
     "@resources @sandbox @setuid @signal @sync @timer capset copy_file_range fadvise64 flock "
     "get_mempolicy getcpu getpriority ioctl ioprio_get madvise mincore mremap name_to_handle_at "
     "personality pkey_alloc pkey_free pkey_mprotect readahead remap_file_pages "
     "sched_get_priority_max sched_get_priority_min sched_getattr sched_getparam "
     "sched_getscheduler sched_rr_get_interval sendfile setpgid setsid splice sysinfo tee umask "
     "uname vmsplice"},
    {"@timer", "Timers and alarms",
     "alarm getitimer setitimer timer_create timer_delete timer_getoverrun timer_gettime "
     "timer_settime timerfd_create timerfd_gettime timerfd_settime"},
};

// Splits a space-separated list into its words.
std::vector<std::string_view> split_words(std::string_view text) {
    std::vector<std::string_view> words;
    size_t pos = 0;
    while (pos < text.size()) {
        size_t start = text.find_first_not_of(' ', pos);
        if (start == std::string_view::npos) break;
        size_t end = text.find(' ', start);
        if (end == std::string_view::npos) end = text.size();
        words.push_back(text.substr(start, end - start));
        pos = end;
    }
    return words;
}

// Adds `name` (a syscall or a group) to `out`. `visiting` holds the groups on the current
// include path (a cycle is skipped, not followed forever); `done` the groups already expanded.
Status expand_one(std::string_view name, std::set<std::string, std::less<>>& visiting,
                  std::set<std::string, std::less<>>& done, std::set<std::string>& out) {
    if (name.empty() || name[0] != '@') {
        out.emplace(name);
        return {};
    }
    if (visiting.count(name) != 0 || done.count(name) != 0) return {};
    const SyscallGroup* group = find_syscall_group(name);
    if (group == nullptr) return plain_error("unknown syscall group `" + std::string(name) + "`");
    visiting.emplace(name);
    for (std::string_view word : split_words(group->syscalls)) {
        CORRAL_TRY(expand_one(word, visiting, done, out), "in `" + std::string(name) + "`");
    }
    visiting.erase(std::string(name));
    done.emplace(name);
    return {};
}

}  // namespace

std::span<const SyscallGroup> syscall_groups() {
    return kGroups;
}

const SyscallGroup* find_syscall_group(std::string_view name) {
    auto groups = syscall_groups();
    auto it =
        std::lower_bound(groups.begin(), groups.end(), name,
                         [](const SyscallGroup& g, std::string_view n) { return g.name < n; });
    if (it == groups.end() || it->name != name) return nullptr;
    return &*it;
}

Result<std::vector<std::string>> expand_syscalls(const std::vector<std::string>& names) {
    std::set<std::string, std::less<>> visiting;
    std::set<std::string, std::less<>> done;
    std::set<std::string> out;
    for (const std::string& name : names) {
        auto status = expand_one(name, visiting, done, out);
        if (!status) return std::move(status.error());
    }
    return std::vector<std::string>(out.begin(), out.end());
}

}  // namespace corral
