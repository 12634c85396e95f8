// corral_syscall_probe: the escape suite's second attacker, run INSIDE sandboxes. Like
// escape_probe it prints one line per attempt, "<label> ok" when the kernel let it through or
// "<label> <ERRNO>", and the tests assert on those lines.
//
//   syscall_probe fork-window SECRET SECONDS STOPFILE EXE
//        Watches /proc for processes still named corrald/corral (a copy of the daemon or of
//        `corral run` between fork and execve) and tries to open their environ (looking for
//        SECRET, which only the victim's own environment holds), mem (O_RDWR, nothing written)
//        and exe (O_PATH to the binary EXE, CVE-2019-5736). Touches ./attacker-ready once it
//        watches; stops at STOPFILE or after SECONDS. Prints copies-seen, environ, mem, exe.
//   syscall_probe proc-read PID|self      open /proc/PID/environ (and read it), mem, exe
//   syscall_probe dumpable                prctl(PR_GET_DUMPABLE)
//   syscall_probe setid DIR               every way to make a setuid/setgid file in a new
//                                         directory in DIR; then setid-files N: how many such
//                                         files that directory holds
//   syscall_probe calls NAME...           harmless calls of the syscalls below; prints NAME
//   ok|ERRNO syscall_probe ptrace-child            gdb/strace's way: attach to a child, peek, read
//   its
//                                         memory with process_vm_readv, detach
//   syscall_probe ptrace-parent           LeakSanitizer's way: a child attaches to its parent
//   syscall_probe ptrace-pid PID          attach to PID (detached again at once), process_vm_readv
//   syscall_probe repeat N NAME...        each call N times; prints "NAME <ERRNO>" of the last
//                                         and "NAME-all-same yes|no" (every answer alike)
//   syscall_probe flood THREADS SECONDS NAME   THREADS threads call NAME for SECONDS; prints
//                                         "flood-calls N" and "flood-errno <ERRNO>"
//   syscall_probe own-listener            whether this process holds a seccomp listener
//                                         ("listener-fds N", "listener-ioctl-fds N": fds that
//                                         answer a listener ioctl), then tries to install a filter
//                                         with a listener of its own ("new-listener <ERRNO>")
//   syscall_probe nested-filter NAME      installs its own filter (getppid -> EXDEV, the rest
//                                         allowed), then prints "getppid", NAME and
//                                         "getpid" answers

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <sys/personality.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace {

int say(const std::string& label, long result) {
    const char* name = result >= 0 ? "ok" : strerrorname_np(errno);
    std::printf("%s %s\n", label.c_str(), name ? name : "error");
    std::fflush(stdout);
    return result >= 0 ? 0 : 1;
}

std::string read_fd(int fd) {
    std::string text;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
    return text;
}

std::string comm_of(const std::string& pid) {
    int fd = ::open(("/proc/" + pid + "/comm").c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return "";
    std::string comm = read_fd(fd);
    ::close(fd);
    while (!comm.empty() && comm.back() == '\n') comm.pop_back();
    return comm;
}

double now_seconds() {
    timespec ts{};
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

/// The errno of the last failed attempt per label, or "ok" once one succeeded.
struct Verdicts {
    std::map<std::string, std::string> last;
    void record(const std::string& label, bool ok) {
        if (last[label] == "ok") return;
        const char* name = strerrorname_np(errno);
        last[label] = ok ? "ok" : (name ? name : "error");
    }
};

/// One attempt on a process that still looks like a copy of corrald/corral.
void attack_copy(const std::string& pid, const std::string& secret, const std::string& exe,
                 Verdicts& v) {
    const std::string proc = "/proc/" + pid;
    int environ_fd = ::open((proc + "/environ").c_str(), O_RDONLY | O_CLOEXEC);
    bool leaked = false;
    if (environ_fd >= 0) {
        leaked = read_fd(environ_fd).find(secret) != std::string::npos;
        ::close(environ_fd);
        errno = EAGAIN;  // opened, but no secret in it: an exec'd program, not a copy
    }
    v.record("environ", leaked);
    // Harmless: opened for writing, nothing written.
    int mem_fd = ::open((proc + "/mem").c_str(), O_RDWR | O_CLOEXEC);
    if (mem_fd >= 0) ::close(mem_fd);
    if (mem_fd >= 0 && !leaked) errno = EAGAIN;  // only a copy's mem counts (see environ)
    v.record("mem", mem_fd >= 0 && leaked);
    int exe_fd = ::open((proc + "/exe").c_str(), O_PATH | O_CLOEXEC);
    bool exe_is_copy = false;  // the victim's binary itself, not some other corral on the host
    if (exe_fd >= 0) {
        char target[4096] = {};
        std::string link = "/proc/self/fd/" + std::to_string(exe_fd);
        ssize_t n = ::readlink(link.c_str(), target, sizeof target - 1);
        std::string path(target, n > 0 ? static_cast<size_t>(n) : 0);
        exe_is_copy = path == exe;
        ::close(exe_fd);
        if (!exe_is_copy) errno = EAGAIN;
    }
    v.record("exe", exe_is_copy);
}

int fork_window(const std::string& secret, double seconds, const std::string& stopfile,
                const std::string& exe) {
    const std::string self = std::to_string(::getpid());
    Verdicts v;
    std::set<std::string> seen;
    ::close(::open("attacker-ready", O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
    const double until = now_seconds() + seconds;
    while (now_seconds() < until && ::access(stopfile.c_str(), F_OK) != 0) {
        DIR* dir = ::opendir("/proc");
        if (dir == nullptr) return say("list /proc", -1);
        while (dirent* e = ::readdir(dir)) {
            if (e->d_name[0] < '0' || e->d_name[0] > '9' || self == e->d_name) continue;
            const std::string comm = comm_of(e->d_name);
            if (comm != "corrald" && comm != "corral") continue;
            seen.insert(e->d_name);
            attack_copy(e->d_name, secret, exe, v);
        }
        ::closedir(dir);
    }
    std::printf("copies-seen %zu\n", seen.size());
    for (const char* label : {"environ", "mem", "exe"}) {
        std::printf("%s %s\n", label, v.last.count(label) ? v.last[label].c_str() : "unseen");
    }
    return 0;
}

int proc_read(const std::string& pid) {
    const std::string proc = "/proc/" + pid;
    int fd = ::open((proc + "/environ").c_str(), O_RDONLY | O_CLOEXEC);
    long got = fd < 0 ? -1 : static_cast<long>(read_fd(fd).size());
    if (fd >= 0) ::close(fd);
    say(pid + "-environ", got);
    fd = ::open((proc + "/mem").c_str(), O_RDONLY | O_CLOEXEC);
    say(pid + "-mem", fd);
    if (fd >= 0) ::close(fd);
    fd = ::open((proc + "/exe").c_str(), O_PATH | O_CLOEXEC);
    say(pid + "-exe", fd);
    if (fd >= 0) ::close(fd);
    return 0;
}

/// A fresh file name in `dir`.
std::string fresh(const std::string& dir, const std::string& name) {
    std::string path = dir + "/" + name;
    ::unlink(path.c_str());
    return path;
}

/// Creates a plain 0755 file to change modes on.
std::string plain_file(const std::string& dir, const std::string& name) {
    std::string path = fresh(dir, name);
    ::close(::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0755));
    return path;
}

int setid(const std::string& parent) {
    // A directory of its own, so every file here is the caller's: a refusal can only come from
    // the filter, never from a file another uid left.
    std::string tmpl = parent + "/setid-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) return say("mkdtemp", -1);
    const std::string dir = tmpl;
    const std::string target = plain_file(dir, "target");
    int target_fd = ::open(target.c_str(), O_RDONLY | O_CLOEXEC);
    int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    say("chmod-u+s", ::chmod(target.c_str(), 04755));
    say("chmod-g+s", ::chmod(target.c_str(), 02755));
    // The kernel truncates the mode to 16 bits: bits above must not hide S_ISUID from the filter.
    say("chmod-high-bits", ::syscall(SYS_chmod, target.c_str(), 0x100000000UL | 04755));
    say("fchmod", ::fchmod(target_fd, 04755));
    say("fchmodat", ::syscall(SYS_fchmodat, dir_fd, "target", 06755));
    say("fchmodat2", ::syscall(452 /* fchmodat2 */, dir_fd, "target", 04755, 0));
    say("open-creat", ::open(fresh(dir, "open").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 04755));
    say("openat-creat",
        ::openat(dir_fd, fresh(dir, "openat").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 02755));
    say("creat", ::creat(fresh(dir, "creat").c_str(), 04755));
    say("tmpfile", ::open(dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 04755));
    say("mknod", ::mknod(fresh(dir, "mknod").c_str(), S_IFREG | 04755, 0));
    say("mknodat", ::mknodat(dir_fd, fresh(dir, "mknodat").c_str(), S_IFREG | 02755, 0));
    open_how how{};
    how.flags = O_WRONLY | O_CREAT | O_CLOEXEC;
    how.mode = 04755;
    say("openat2", ::syscall(SYS_openat2, dir_fd, fresh(dir, "openat2").c_str(), &how, sizeof how));
    // What must keep working: ordinary modes.
    say("chmod-plain", ::chmod(target.c_str(), 0755));
    say("open-plain", ::open(fresh(dir, "plain").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
    say("mknod-fifo", ::mknod(fresh(dir, "fifo").c_str(), S_IFIFO | 0644, 0));
    size_t setid_files = 0;
    if (DIR* d = ::opendir(dir.c_str())) {
        while (dirent* e = ::readdir(d)) {
            struct stat st {};
            if (::fstatat(dir_fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                (st.st_mode & (S_ISUID | S_ISGID)) != 0)
                ++setid_files;
        }
        ::closedir(d);
    }
    std::printf("setid-files %zu\n", setid_files);
    return 0;
}

/// One harmless call per name: arguments the kernel rejects (or accepts without effect), so the
/// answer tells whether the filter let the call through.
long call(const std::string& name) {
    if (name == "io_setup") return ::syscall(SYS_io_setup, 0, nullptr);  // EINVAL when allowed
    if (name == "futex_waitv") return ::syscall(449, nullptr, 0, 0, nullptr, 0);
    if (name == "cachestat") return ::syscall(451, -1, nullptr, nullptr, 0);
    if (name == "statmount") return ::syscall(457, nullptr, nullptr, 0, 0);
    if (name == "listmount") return ::syscall(458, nullptr, nullptr, 0, 0);
    if (name == "mseal") return ::syscall(462, 1, 0, 0);  // unaligned: EINVAL
    if (name == "setxattrat") return ::syscall(463, -1, nullptr, 0, nullptr, nullptr, 0);
    if (name == "getxattrat") return ::syscall(464, -1, nullptr, 0, nullptr, nullptr, 0);
    if (name == "lsm_set_self_attr") return ::syscall(460, 0, nullptr, 0, 0);
    if (name == "open_tree_attr") return ::syscall(467, -1, nullptr, 0, nullptr, 0);
    if (name == "mbind") return ::syscall(SYS_mbind, 1, 4096, 0, nullptr, 0, 0);
    if (name == "set_mempolicy") return ::syscall(SYS_set_mempolicy, 12345, nullptr, 0);
    if (name == "migrate_pages")
        return ::syscall(SYS_migrate_pages, 0x3fffffff, 0, nullptr, nullptr);
    if (name == "move_pages")
        return ::syscall(SYS_move_pages, 0x3fffffff, 0, nullptr, nullptr, nullptr, 0);
    if (name == "io_uring_setup") return ::syscall(SYS_io_uring_setup, 0, nullptr);
    if (name == "mount") return ::syscall(SYS_mount, "none", "/", "tmpfs", 0, nullptr);
    if (name == "unassigned-470") return ::syscall(470, 0, 0, 0);
    if (name == "unassigned-400") return ::syscall(400, 0, 0, 0);
    if (name == "personality-query") return ::personality(0xffffffff);
    if (name == "personality-linux") return ::personality(PER_LINUX);
    if (name == "personality-norandom") return ::personality(ADDR_NO_RANDOMIZE);
    if (name == "personality-high-bits")  // low half 0: allowed, as the kernel sees PER_LINUX
        return ::syscall(SYS_personality, 0x100000000UL);
    if (name == "socket-vsock") return ::socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (name == "socket-alg") return ::socket(AF_ALG, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (name == "socket-alg-high-bits")
        return ::syscall(SYS_socket, 0x100000000UL | AF_ALG, SOCK_SEQPACKET, 0);
    if (name == "socket-unix") return ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (name == "ptrace") return ::syscall(SYS_ptrace, PTRACE_PEEKDATA, 0, nullptr, nullptr);
    if (name == "keyctl") return ::syscall(SYS_keyctl, 0x7fff, 0, 0, 0, 0);  // EOPNOTSUPP
    if (name == "acct") return ::syscall(SYS_acct, "/nonexistent/acct");
    if (name == "getpid") return ::syscall(SYS_getpid);
    errno = EDOM;
    return -1;
}

long marker = 0x636f7272616c;  // what the tracer reads back

/// Attaches to `pid`, reads `marker` there with PTRACE_PEEKDATA and process_vm_readv, detaches.
/// Prints "<label>-attach", "<label>-peek", "<label>-vm-read".
void trace(pid_t pid, const std::string& label) {
    if (say(label + "-attach", ::ptrace(PTRACE_ATTACH, pid, nullptr, nullptr)) != 0) return;
    int status = 0;
    ::waitpid(pid, &status, __WALL);
    errno = 0;
    long word = ::ptrace(PTRACE_PEEKDATA, pid, &marker, nullptr);
    if (errno == 0 && word != marker) errno = EIO;
    say(label + "-peek", errno == 0 ? 0 : -1);
    long copy = 0;
    iovec local{&copy, sizeof copy}, remote{&marker, sizeof marker};
    long got = ::syscall(SYS_process_vm_readv, pid, &local, 1, &remote, 1, 0);
    if (got == sizeof copy && copy != marker) errno = EIO;
    say(label + "-vm-read", got == sizeof copy && copy == marker ? 0 : -1);
    ::ptrace(PTRACE_DETACH, pid, nullptr, nullptr);
}

int ptrace_child() {
    pid_t child = ::fork();
    if (child == 0) {
        for (;;) ::pause();
    }
    trace(child, "child");
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
    return 0;
}

int ptrace_parent() {
    const pid_t parent = ::getpid();
    std::fflush(stdout);
    pid_t child = ::fork();
    if (child == 0) {
        trace(parent, "parent");
        std::fflush(stdout);
        ::_exit(0);
    }
    ::waitpid(child, nullptr, 0);
    return 0;
}

int ptrace_pid(pid_t pid) {
    const std::string label = std::to_string(pid);
    if (say(label + "-attach", ::ptrace(PTRACE_ATTACH, pid, nullptr, nullptr)) == 0)
        ::ptrace(PTRACE_DETACH, pid, nullptr, nullptr);
    char byte = 0;
    iovec local{&byte, 1}, remote{reinterpret_cast<void*>(0x400000), 1};
    say(label + "-vm-read", ::syscall(SYS_process_vm_readv, pid, &local, 1, &remote, 1, 0));
    return 0;
}

int repeat(int argc, char** argv) {
    const long times = std::atol(argv[2]);
    for (int i = 3; i < argc; ++i) {
        long result = 0;
        int first_errno = -1;
        bool all_same = true;
        for (long n = 0; n < times; ++n) {
            errno = 0;
            result = call(argv[i]);
            const int answer = result < 0 ? errno : 0;
            if (first_errno < 0) first_errno = answer;
            all_same = all_same && answer == first_errno;
        }
        say(argv[i], result);
        std::printf("%s-all-same %s\n", argv[i], all_same ? "yes" : "no");
    }
    return 0;
}

int flood(int threads, double seconds, const std::string& name) {
    std::atomic<long> calls{0};
    std::atomic<int> last_errno{0};
    const double until = now_seconds() + seconds;
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
        workers.emplace_back([&] {
            while (now_seconds() < until) {
                if (call(name) < 0) last_errno = errno;
                ++calls;
            }
        });
    }
    for (auto& worker : workers) worker.join();
    std::printf("flood-calls %ld\n", calls.load());
    errno = last_errno.load();
    return say("flood-errno", errno == 0 ? 0 : -1);
}

int own_listener() {
    size_t listeners = 0;
    if (DIR* d = ::opendir("/proc/self/fd")) {
        while (dirent* e = ::readdir(d)) {
            char target[256] = {};
            const std::string link = std::string("/proc/self/fd/") + e->d_name;
            if (::readlink(link.c_str(), target, sizeof target - 1) > 0 &&
                std::strstr(target, "seccomp") != nullptr)
                ++listeners;
        }
        ::closedir(d);
    }
    std::printf("listener-fds %zu\n", listeners);
    // Any descriptor that answers a listener's ioctl would let the job touch someone's counts.
    size_t answering = 0;
    for (int fd = 0; fd < 1024; ++fd) {
        uint64_t id = 0;
        if (::ioctl(fd, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0 || (errno != EBADF && errno != ENOTTY && errno != EINVAL))
            ++answering;
    }
    std::printf("listener-ioctl-fds %zu\n", answering);
    sock_filter allow_all[] = {BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
    sock_fprog program{1, allow_all};
    ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    return say("new-listener", ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
                                         SECCOMP_FILTER_FLAG_NEW_LISTENER, &program));
}

int nested_filter(const std::string& name) {
    sock_filter rules[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_getppid, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EXDEV),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    sock_fprog program{4, rules};
    ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    if (say("install", ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &program)) != 0) return 1;
    say("getppid", ::syscall(SYS_getppid));
    say(name, call(name));
    say("getpid", call("getpid"));
    return 0;
}

int calls(int argc, char** argv) {
    for (int i = 2; i < argc; ++i) say(argv[i], call(argv[i]));
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) return 2;
    const std::string action = argv[1];
    if (action == "fork-window" && argc == 6)
        return fork_window(argv[2], std::atof(argv[3]), argv[4], argv[5]);
    if (action == "proc-read" && argc == 3) return proc_read(argv[2]);
    if (action == "dumpable") {
        std::printf("dumpable %d\n", ::prctl(PR_GET_DUMPABLE, 0, 0, 0, 0));
        return 0;
    }
    if (action == "setid" && argc == 3) return setid(argv[2]);
    if (action == "calls") return calls(argc, argv);
    if (action == "ptrace-child") return ptrace_child();
    if (action == "ptrace-parent") return ptrace_parent();
    if (action == "ptrace-pid" && argc == 3) return ptrace_pid(std::atoi(argv[2]));
    if (action == "repeat" && argc >= 4) return repeat(argc, argv);
    if (action == "flood" && argc == 5) return flood(std::atoi(argv[2]), std::atof(argv[3]), argv[4]);
    if (action == "own-listener") return own_listener();
    if (action == "nested-filter" && argc == 3) return nested_filter(argv[2]);
    return 2;
}
