// corral_escape_probe: the attacker of the escape suite. It runs INSIDE a sandbox and really tries
// each escape, printing one line per attempt: "<label> ok" when the kernel let it through, or
// "<label> <ERRNO>" with the errno's name. The tests assert on those lines, so a working escape
// prints "ok" and fails its test. Attempts that could harm the host if they succeeded are made
// harmless by construction (open for write without writing, write back the value already there,
// signal 0 instead of a real signal) and are commented where they are.
//
//   escape_probe exe-write                    CVE-2019-5736: open every visible /proc/*/exe for
//   write escape_probe tiocsti TEXT                 CVE-2017-5226: push TEXT into the terminal on
//   stdin escape_probe unshare-user native|i386|x32 regain capabilities through a new user
//   namespace escape_probe keyctl native|i386|x32       a syscall the default filter denies, per
//   syscall ABI escape_probe clone-user | clone3          the clone flavours of the same
//   escape_probe syscall NAME                 keyctl add_key bpf perf_event_open userfaultfd
//                                             io_uring_setup open_by_handle_at
//   escape_probe umount-then-list PATH        umount2(PATH, MNT_DETACH), then list PATH
//   escape_probe open-write PATH...           open(O_WRONLY) and close again, nothing written
//   escape_probe create PATH...               open(O_WRONLY | O_CREAT | O_EXCL)
//   escape_probe list PATH                    the names in a directory, or the errno
//   escape_probe open-fds PID                 open every /proc/PID/fd/N for reading
//   escape_probe cgroup-escape TOKEN          move itself to the cgroup roots, then leave a daemon
//   escape_probe host-pid PID                 kill(PID, SIGKILL), ptrace, pidfd_open, /proc/PID
//   escape_probe holder-reach                 PID 1's descriptors and memory: pidfd_getfd of
//                                             fds 0..63, ptrace, /proc/1/mem, process_vm_readv
//   escape_probe read-pipes                   how many of its own fds are a pipe's read end
//   escape_probe kill-all                     kill(-1, 0): is any process outside reachable?
//   escape_probe raw-sockets                  AF_INET SOCK_RAW and AF_PACKET
//   escape_probe connect-tcp HOST PORT        HOST 127.0.0.1 or ::1
//   escape_probe connect-unix PATH | connect-abstract NAME
//   escape_probe ids                          ruid euid CapEff NoNewPrivs
//   escape_probe fork-bomb MAX                fork until refused (at most MAX), then exit
//   escape_probe sleep-as TOKEN               double-fork a setsid'd `sleep` named TOKEN

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/io_uring.h>
#include <linux/keyctl.h>
#include <linux/perf_event.h>
#include <linux/sched.h>
#include <linux/userfaultfd.h>
#include <net/ethernet.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

namespace {

/// Prints "<label> ok" for a non-negative result, else "<label> <ERRNO>" from errno.
int say(const std::string& label, long result) {
    const char* name = result >= 0 ? "ok" : strerrorname_np(errno);
    std::printf("%s %s\n", label.c_str(), name ? name : "error");
    std::fflush(stdout);
    return result >= 0 ? 0 : 1;
}

/// Same for a raw syscall return value that carries -errno itself (int 0x80).
int say_raw(const std::string& label, long result) {
    if (result < 0) errno = static_cast<int>(-result);
    return say(label, result);
}

std::vector<std::string> numeric_entries(const char* path) {
    std::vector<std::string> names;
    if (DIR* dir = opendir(path)) {
        while (dirent* e = readdir(dir)) {
            std::string name = e->d_name;
            if (!name.empty() && name.find_first_not_of("0123456789") == std::string::npos)
                names.push_back(name);
        }
        closedir(dir);
    }
    return names;
}

// --- i386 and x32 entry points -------------------------------------------------------------------
// A seccomp filter that checks syscall numbers but not the architecture (or not the x32 bit) lets
// the same kernel function through under another number: `int 0x80` enters the i386 table from a
// 64-bit process, and the x32 bit (0x40000000) selects the x32 table.

constexpr long kX32Bit = 0x40000000;
constexpr long kI386Unshare = 310;
constexpr long kI386Keyctl = 288;

long int80(long nr, long a, long b, long c) {
    long ret;
    asm volatile("int $0x80" : "=a"(ret) : "a"(nr), "b"(a), "c"(b), "d"(c) : "memory");
    return ret;
}

int unshare_user(const std::string& abi) {
    if (abi == "native") return say("unshare-user", syscall(SYS_unshare, CLONE_NEWUSER));
    if (abi == "i386") return say_raw("unshare-user", int80(kI386Unshare, CLONE_NEWUSER, 0, 0));
    if (abi == "x32") return say("unshare-user", syscall(kX32Bit | SYS_unshare, CLONE_NEWUSER));
    return 2;
}

int keyctl_abi(const std::string& abi) {
    const long op = KEYCTL_GET_KEYRING_ID, ring = KEY_SPEC_PROCESS_KEYRING, create = 1;
    if (abi == "native") return say("keyctl", syscall(SYS_keyctl, op, ring, create));
    if (abi == "i386") return say_raw("keyctl", int80(kI386Keyctl, op, ring, create));
    if (abi == "x32") return say("keyctl", syscall(kX32Bit | SYS_keyctl, op, ring, create));
    return 2;
}

int clone_user() {
    long pid = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
    if (pid == 0) _exit(0);
    if (pid > 0) waitpid(static_cast<pid_t>(pid), nullptr, 0);
    return say("clone-user", pid);
}

int clone3_user() {
    clone_args args{};
    args.flags = CLONE_NEWUSER;
    args.exit_signal = SIGCHLD;
    long pid = syscall(SYS_clone3, &args, sizeof args);
    if (pid == 0) _exit(0);
    if (pid > 0) waitpid(static_cast<pid_t>(pid), nullptr, 0);
    return say("clone3", pid);
}

// --- syscalls the default filter denies (Docker's profile denies the same) ----------------------

long try_bpf() {
    // The smallest valid socket filter: r0 = 0; exit.
    bpf_insn insns[2] = {};
    insns[0].code = BPF_ALU64 | BPF_MOV | BPF_K;
    insns[1].code = BPF_JMP | BPF_EXIT;
    bpf_attr attr{};
    attr.prog_type = BPF_PROG_TYPE_SOCKET_FILTER;
    attr.insn_cnt = 2;
    attr.insns = reinterpret_cast<uint64_t>(insns);
    attr.license = reinterpret_cast<uint64_t>("GPL");
    return syscall(SYS_bpf, BPF_PROG_LOAD, &attr, sizeof attr);
}

long try_perf_event_open() {
    perf_event_attr attr{};
    attr.type = PERF_TYPE_SOFTWARE;
    attr.size = sizeof attr;
    attr.config = PERF_COUNT_SW_TASK_CLOCK;
    attr.exclude_kernel = 1;
    attr.exclude_hv = 1;
    return syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0);
}

long try_open_by_handle_at() {
    // The "shocker" escape (2014): open_by_handle_at needs no path, so a handle for an inode
    // outside the container (the filesystem root) opens it. name_to_handle_at gives a valid handle
    // to try.
    struct {
        file_handle handle;
        unsigned char bytes[MAX_HANDLE_SZ];
    } h{};
    h.handle.handle_bytes = MAX_HANDLE_SZ;
    int mount_id = 0;
    if (name_to_handle_at(AT_FDCWD, "/", &h.handle, &mount_id, 0) < 0) return -1;
    int root = open("/", O_RDONLY | O_DIRECTORY);
    return open_by_handle_at(root, &h.handle, O_RDONLY);
}

int denied_syscall(const std::string& name) {
    long r = -1;
    errno = EINVAL;
    if (name == "keyctl") {
        r = syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_PROCESS_KEYRING, 1);
    } else if (name == "add_key") {
        r = syscall(SYS_add_key, "user", "corral-escape", "x", 1, KEY_SPEC_PROCESS_KEYRING);
    } else if (name == "bpf") {
        r = try_bpf();
    } else if (name == "perf_event_open") {
        r = try_perf_event_open();
    } else if (name == "userfaultfd") {
        r = syscall(SYS_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY);
    } else if (name == "io_uring_setup") {
        io_uring_params params{};
        r = syscall(SYS_io_uring_setup, 4, &params);
    } else if (name == "open_by_handle_at") {
        r = try_open_by_handle_at();
    } else {
        return 2;
    }
    return say(name, r);
}

// --- filesystem --------------------------------------------------------------------------------

int list(const char* path) {
    DIR* dir = opendir(path);
    if (!dir) return say(std::string("list ") + path, -1);
    while (dirent* e = readdir(dir)) {
        std::string name = e->d_name;
        if (name != "." && name != "..") std::printf("entry %s\n", name.c_str());
    }
    closedir(dir);
    std::printf("list %s ok\n", path);
    return 0;
}

/// CVE-2019-5736 (runc): the container's process opened the runtime's own binary through
/// /proc/<pid>/exe and overwrote it, so the host's next `runc` ran the attacker's code. Here every
/// process the sandbox can see is tried, PID 1 (corral's namespace holder) first of all. A
/// successful open appends a marker to the file, which the test detects in its copy of corral.
int exe_write() {
    std::vector<std::string> pids = numeric_entries("/proc");
    pids.push_back("self");
    for (const auto& pid : pids) {
        std::string exe = "/proc/" + pid + "/exe";
        int fd = open(exe.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
        if (fd >= 0) {
            (void)!write(fd, "CORRAL-ESCAPED", 14);
            close(fd);
        }
        say("exe " + pid, fd);
        // runc's exploit held an O_PATH handle and reopened it through /proc/self/fd once the
        // binary stopped running (no ETXTBSY): the handle alone must already be refused.
        int path_fd = open(exe.c_str(), O_PATH | O_CLOEXEC);
        if (path_fd >= 0 && pid != "self") {
            std::string again = "/proc/self/fd/" + std::to_string(path_fd);
            int wfd = open(again.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
            if (wfd >= 0) {
                (void)!write(wfd, "CORRAL-ESCAPED", 14);
                close(wfd);
            }
            say("reopen " + pid, wfd);
        } else if (pid != "self") {
            say("opath " + pid, path_fd);
        }
        if (path_fd >= 0) close(path_fd);
    }
    return 0;
}

int open_write(int argc, char** argv) {
    // Opening for write is the permission check; nothing is written, so a hole found here (say
    // /proc/sysrq-trigger or core_pattern) does no harm to the host running the suite.
    for (int i = 2; i < argc; ++i) {
        int fd = open(argv[i], O_WRONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        say(argv[i], fd);
        if (fd >= 0) close(fd);
    }
    return 0;
}

int create(int argc, char** argv) {
    for (int i = 2; i < argc; ++i) {
        int fd = open(argv[i], O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        say(argv[i], fd);
        if (fd >= 0) close(fd);
    }
    return 0;
}

/// The open files of another process are a way out of the filesystem view: a directory fd of the
/// host (runc's CVE-2024-21626 leaked one) reopens the host's tree. Listing the numbers is allowed
/// by the directory's mode; following them needs ptrace access, which must be refused.
int open_fds(const std::string& pid) {
    const std::string dir = "/proc/" + pid + "/fd";
    std::vector<std::string> fds = numeric_entries(dir.c_str());
    if (fds.empty()) return say("list " + dir, opendir(dir.c_str()) ? 0 : -1);
    for (const auto& fd : fds) {
        int opened = open((dir + "/" + fd).c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        say("fd " + fd, opened);
        if (opened >= 0) close(opened);
    }
    return 0;
}

// --- processes and cgroups ----------------------------------------------------------------------

/// Double-forks a setsid'd `sleep 1000` whose argv[0] is TOKEN, so the host can find it by its
/// command line if it outlives the session.
void leave_daemon(const char* token) {
    pid_t child = fork();
    if (child == 0) {
        setsid();
        if (fork() == 0) {
            int null = open("/dev/null", O_RDWR);
            dup2(null, 0);
            dup2(null, 1);
            dup2(null, 2);
            execl("/bin/sleep", token, "1000", static_cast<char*>(nullptr));
            _exit(127);
        }
        _exit(0);
    }
    waitpid(child, nullptr, 0);
}

/// Cgroup escape: a process that moves itself out of the session's cgroup is no longer tracked,
/// measured or killed with it (the "release_agent" and cgroup-move escapes, CVE-2022-0492). The v2
/// hierarchy is the one corral tracks with, so it is really attacked; v1 hierarchies belong to
/// the machine, so for them only the write permission is probed, nothing is moved.
int cgroup_escape(const char* token) {
    std::ifstream mountinfo("/proc/self/mountinfo");
    for (std::string line; std::getline(mountinfo, line);) {
        std::string fields = line.substr(line.find(" - ") + 3);
        const bool v2 = fields.rfind("cgroup2 ", 0) == 0;
        const bool v1 = fields.rfind("cgroup ", 0) == 0;
        if (!v1 && !v2) continue;
        char mount_point[4096];
        if (std::sscanf(line.c_str(), "%*s %*s %*s %*s %4095s", mount_point) != 1) continue;
        std::string procs = std::string(mount_point) + "/cgroup.procs";
        int fd = open(procs.c_str(), O_WRONLY | O_CLOEXEC);
        if (v2 && fd >= 0 && write(fd, "0\n", 2) < 0) {
            close(fd);
            fd = -1;
        }
        say(procs, fd);
        if (fd >= 0) close(fd);
        // v1's per-thread file: corral's own join writes "0" there (limits_hybrid_v1.cpp); a
        // thread that could do the same in a root cgroup would fork past the session's limits.
        if (v1) {
            std::string tasks = std::string(mount_point) + "/tasks";
            int tfd = open(tasks.c_str(), O_WRONLY | O_CLOEXEC);
            say(tasks, tfd);
            if (tfd >= 0) close(tfd);
        }
        std::string release = std::string(mount_point) + "/release_agent";
        if (v1 && access(release.c_str(), F_OK) == 0) {
            int rfd = open(release.c_str(), O_WRONLY | O_CLOEXEC);
            say(release, rfd);
            if (rfd >= 0) close(rfd);
        }
    }
    // The fixed places, in case mountinfo hides them.
    for (const char* procs :
         {"/sys/fs/cgroup/cgroup.procs", "/sys/fs/cgroup/unified/cgroup.procs"}) {
        int fd = open(procs, O_WRONLY | O_CLOEXEC);
        if (fd >= 0 && write(fd, "0\n", 2) < 0) {
            close(fd);
            fd = -1;
        }
        say(procs, fd);
        if (fd >= 0) close(fd);
    }
    leave_daemon(token);
    return 0;
}

/// A process of the host, by its host pid: can the sandbox reach it at all?
int host_pid(pid_t pid) {
    // A real SIGKILL: the only process with this pid on the host is the test's own target.
    say("kill", kill(pid, SIGKILL));
    say("ptrace", ptrace(PTRACE_ATTACH, pid, nullptr, nullptr));
    say("pidfd", syscall(SYS_pidfd_open, pid, 0));
    struct stat st;
    say("proc", stat(("/proc/" + std::to_string(pid)).c_str(), &st));
    return 0;
}

/// The session's holder (PID 1) keeps the output pipes' read ends of every process and its
/// descriptor store's channel (isolation/descriptor_store.hpp): none of it may be reachable.
/// "getfd ok" if any descriptor could be taken, else the last errno.
int holder_reach() {
    const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, 1, 0));
    say("pidfd-open", pidfd);
    long taken = -1;
    int error = 0;
    for (int fd = 0; fd < 64 && pidfd >= 0; ++fd) {
        const long got = syscall(SYS_pidfd_getfd, pidfd, fd, 0);
        if (got >= 0) {
            taken = got;
            close(static_cast<int>(got));
            break;
        }
        if (errno != EBADF || error == 0) error = errno;
    }
    if (taken < 0) errno = error == 0 ? EBADF : error;
    say("getfd", taken);
    say("ptrace", ptrace(PTRACE_SEIZE, 1, nullptr, nullptr));
    say("mem", open("/proc/1/mem", O_RDONLY | O_CLOEXEC));
    // Any address: without permission the answer is EPERM, with it (but unmapped) EFAULT.
    char byte = 0;
    iovec local{&byte, 1};
    iovec remote{reinterpret_cast<void*>(0x10000), 1};
    say("vm-readv", syscall(SYS_process_vm_readv, 1, &local, 1, &remote, 1, 0));
    return 0;
}

/// Counts the descriptors of this process that are a pipe opened for reading (stdin aside).
int read_pipes() {
    int count = 0;
    for (const auto& name : numeric_entries("/proc/self/fd")) {
        const int fd = std::atoi(name.c_str());
        struct stat st;
        if (fd == 0 || fstat(fd, &st) != 0 || !S_ISFIFO(st.st_mode)) continue;
        const int flags = fcntl(fd, F_GETFL);
        if (flags >= 0 && (flags & O_ACCMODE) == O_RDONLY) ++count;
    }
    std::printf("read-pipes %d\n", count);
    std::fflush(stdout);
    return 0;
}

/// kill(-1, 0) reaches every process the caller may signal except itself and its namespace's init.
/// Signal 0 so that a broken PID namespace cannot turn the test into a host-wide SIGKILL.
int kill_all() {
    return say("kill-all", kill(-1, 0));
}

/// Forks children that wait forever until fork fails or MAX is reached, then exits: the session
/// end must kill every child. Bounded so that a missing pids limit fails the test, not the host.
int fork_bomb(long max) {
    long forked = 0;
    int error = 0;
    while (forked < max) {
        pid_t pid = fork();
        if (pid == 0) {
            for (;;) pause();
        }
        if (pid < 0) {
            error = errno;
            break;
        }
        ++forked;
    }
    const char* name = error ? strerrorname_np(error) : "none";
    std::printf("forked %ld %s\n", forked, name ? name : "error");
    return 0;
}

// --- network -----------------------------------------------------------------------------------

int raw_sockets() {
    int inet = socket(AF_INET, SOCK_RAW, IPPROTO_ICMP);
    say("raw-inet", inet);
    int packet = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
    say("raw-packet", packet);
    return 0;
}

int connect_tcp(const std::string& host, int port) {
    if (host.find(':') != std::string::npos) {
        sockaddr_in6 a{};
        a.sin6_family = AF_INET6;
        a.sin6_port = htons(static_cast<uint16_t>(port));
        inet_pton(AF_INET6, host.c_str(), &a.sin6_addr);
        int fd = socket(AF_INET6, SOCK_STREAM, 0);
        return say("connect", connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a));
    }
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET, host.c_str(), &a.sin_addr);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    return say("connect", connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a));
}

int connect_unix(const std::string& name, bool abstract) {
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    size_t offset = abstract ? 1 : 0;
    std::memcpy(a.sun_path + offset, name.data(), std::min(name.size(), sizeof a.sun_path - 2));
    socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + offset + name.size());
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    return say("connect", connect(fd, reinterpret_cast<sockaddr*>(&a), len));
}

// --- identity and terminal ---------------------------------------------------------------------

int ids() {
    std::printf("ruid %d\neuid %d\n", getuid(), geteuid());
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);)
        if (line.rfind("CapEff:", 0) == 0 || line.rfind("NoNewPrivs:", 0) == 0)
            std::printf("%s\n", line.c_str());
    return 0;
}

/// CVE-2017-5226 (bubblewrap): a sandboxed process that shares the caller's controlling terminal
/// pushes characters into its input queue with TIOCSTI; the caller's shell then runs them after
/// the sandbox exits. Without a controlling terminal (setsid) the kernel refuses TIOCSTI.
int tiocsti(const char* text) {
    long result = 0;
    for (const char* c = text; *c && result == 0; ++c) result = ioctl(0, TIOCSTI, c);
    say("tiocsti", result);
    say("devtty", open("/dev/tty", O_RDWR | O_CLOEXEC));
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) return 2;
    const std::string action = argv[1];
    const std::string arg = argc > 2 ? argv[2] : "";
    if (action == "exe-write") return exe_write();
    if (action == "tiocsti" && argc == 3) return tiocsti(argv[2]);
    if (action == "unshare-user" && argc == 3) return unshare_user(arg);
    if (action == "keyctl" && argc == 3) return keyctl_abi(arg);
    if (action == "clone-user") return clone_user();
    if (action == "clone3") return clone3_user();
    if (action == "syscall" && argc == 3) return denied_syscall(arg);
    if (action == "umount-then-list" && argc == 3) {
        say("umount", umount2(argv[2], MNT_DETACH));
        return list(argv[2]);
    }
    if (action == "list" && argc == 3) return list(argv[2]);
    if (action == "open-fds" && argc == 3) return open_fds(arg);
    if (action == "open-write") return open_write(argc, argv);
    if (action == "create") return create(argc, argv);
    if (action == "cgroup-escape" && argc == 3) return cgroup_escape(argv[2]);
    if (action == "host-pid" && argc == 3) return host_pid(std::atoi(argv[2]));
    if (action == "kill-all") return kill_all();
    if (action == "holder-reach") return holder_reach();
    if (action == "read-pipes") return read_pipes();
    if (action == "fork-bomb" && argc >= 3) return fork_bomb(std::atol(argv[2]));
    if (action == "sleep-as" && argc == 3) {
        leave_daemon(argv[2]);
        return 0;
    }
    if (action == "raw-sockets") return raw_sockets();
    if (action == "connect-tcp" && argc == 4) return connect_tcp(argv[2], std::atoi(argv[3]));
    if (action == "connect-unix" && argc == 3) return connect_unix(arg, false);
    if (action == "connect-abstract" && argc == 3) return connect_unix(arg, true);
    if (action == "ids") return ids();
    return 2;
}
