#include "isolation/namespaces.hpp"

#include <fcntl.h>
#include <linux/sched.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <csignal>
#include <cstddef>
#include <string>

#include "base/file_io.hpp"
#include "base/pipe.hpp"
#include "isolation/child_report.hpp"
#include "isolation/clone_vm.hpp"
#include "isolation/pid_ref.hpp"

namespace corral {

int namespace_clone_flags(const NamespaceSpec& spec) {
    int flags = 0;
    if (spec.pid) flags |= CLONE_NEWPID;
    if (spec.mount) flags |= CLONE_NEWNS;
    if (spec.ipc) flags |= CLONE_NEWIPC;
    if (spec.uts) flags |= CLONE_NEWUTS;
    if (spec.user) flags |= CLONE_NEWUSER;
    if (spec.network == NetworkMode::isolated) flags |= CLONE_NEWNET;
    return flags;
}

namespace {

std::string map_line(IdMapping m) {
    return std::to_string(m.inside) + " " + std::to_string(m.outside) + " " +
           std::to_string(m.count) + "\n";
}

}  // namespace

Status write_id_maps(pid_t child, IdMapping uid, IdMapping gid, bool deny_setgroups) {
    std::string proc = "/proc/" + std::to_string(child);
    if (deny_setgroups) CORRAL_TRY(write_file(proc + "/setgroups", "deny"), "user namespace");
    CORRAL_TRY(write_file(proc + "/uid_map", map_line(uid)), "user namespace: uid_map");
    CORRAL_TRY(write_file(proc + "/gid_map", map_line(gid)), "user namespace: gid_map");
    return {};
}

namespace {

/// The parent's half of a mapping helper: writes the maps of the helper `pid` (in its new user
/// namespace) and opens that namespace. The caller then ends the helper.
Result<UniqueFd> map_and_open(pid_t pid, IdMapping uid, IdMapping gid) {
    CORRAL_TRY(write_id_maps(pid, uid, gid, false), "");
    std::string path = "/proc/" + std::to_string(pid) + "/ns/user";
    UniqueFd ns(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!ns) return sys_error("open `" + path + "`");
    return ns;
}

/// A helper forked with a copy of our memory: it waits for EOF on a pipe, then exits.
Result<UniqueFd> make_mapping_namespace_forked(IdMapping uid, IdMapping gid) {
    auto hold = make_pipe();
    if (!hold) return std::move(hold.error());
    int pidfd = -1;
    pid_t pid = clone3_fork(CLONE_NEWUSER | CLONE_PIDFD, -1, &pidfd);
    if (pid < 0) return sys_error("clone a user namespace for an idmapped mount");
    if (pid == 0) {
        // Only waits until the parent has what it needs (EOF on the pipe), then exits.
        char byte;
        hold->write_end.reset();
        while (::read(hold->read_end.get(), &byte, 1) < 0 && errno == EINTR) {
        }
        ::_exit(0);
    }
    PidRef helper(pid, UniqueFd(pidfd));
    hold->read_end.reset();
    Result<UniqueFd> out = map_and_open(pid, uid, gid);
    hold->write_end.reset();  // the helper exits; its namespace lives on through our fd
    (void)helper.wait();
    return out;
}

#if defined(__x86_64__)
/// The two ends of the pipe a helper sharing our memory holds on to.
struct HoldPipe {
    int read_end = -1;
    int write_end = -1;
};

long raw_syscall3(long number, long a, long b, long c) noexcept {
    long ret = number;
    asm volatile("syscall" : "+a"(ret) : "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
    return ret;
}

/// The whole life of a helper that shares our memory: close its copy of the pipe's write end,
/// wait for end of file (we close ours when done, or die), exit. Raw system calls and no libc:
/// it runs beside us with our thread pointer, so errno, and anything else of glibc's it touched,
/// would be ours. Its descriptor table is its own copy (no CLONE_FILES).
int wait_for_end_of_file(void* arg) noexcept {
    const HoldPipe* hold = static_cast<const HoldPipe*>(arg);
    raw_syscall3(SYS_close, hold->write_end, 0, 0);
    char byte;
    while (raw_syscall3(SYS_read, hold->read_end, reinterpret_cast<long>(&byte), 1) == -EINTR) {
    }
    return 0;
}

/// A helper cloned into a new user namespace sharing our memory (CLONE_VM, on a small stack in
/// this frame): no copy of our page tables, and none of the copy-on-write faults a fork leaves us
/// with for every page we write afterwards (issue 18: the forked helper cost a `default` run
/// from a directory the sandbox's user does not own 0.16 ms). It executes nothing of ours but
/// wait_for_end_of_file, and shares a non-dumpable memory (main() makes corral and corrald
/// non-dumpable; creating the namespace at clone time and writing its maps commit no new
/// credentials, which is what would make the kernel set it again), so only a host process that
/// may already ptrace us may look into it, as into the forked helper's copy (reviewed by
/// helper 31). No fallback to the forked helper: it clones with clone3 too, so where this clone
/// fails (ENOSYS before Linux 5.3) that one would fail alike.
Result<UniqueFd> make_mapping_namespace_sharing_memory(IdMapping uid, IdMapping gid) {
    auto pipe = make_pipe();
    if (!pipe) return std::move(pipe.error());
    const HoldPipe hold{pipe->read_end.get(), pipe->write_end.get()};
    // The helper's stack: it calls nothing but raw system calls and takes no signal (all
    // blocked), so a few KiB are plenty. It is gone (reaped below) before this frame is.
    alignas(64) std::array<std::byte, 16384> stack;
    int pidfd = -1;
    clone_args args{};
    args.flags = CLONE_VM | CLONE_NEWUSER | CLONE_PIDFD;
    args.pidfd = reinterpret_cast<uintptr_t>(&pidfd);
    args.exit_signal = SIGCHLD;
    args.stack = reinterpret_cast<uintptr_t>(stack.data());
    args.stack_size = stack.size();
    // The helper starts with every signal blocked (clone3_on_stack) and never unblocks one: no
    // handler of ours ever runs on its stack.
    const pid_t pid = clone3_on_stack(args, wait_for_end_of_file, const_cast<HoldPipe*>(&hold));
    const int clone_errno = errno;
    if (pid < 0) return sys_error(clone_errno, "clone a user namespace for an idmapped mount");
    // Gone before this frame (its stack) is, on every way out, an exception's included: SIGKILL
    // (another process cloned meanwhile may hold a copy of the write end, so end of file alone
    // might never come), then reaped. End of file is for our own death: it ends the helper then.
    struct KilledAndReaped {
        PidRef helper;
        ~KilledAndReaped() {
            (void)helper.send_signal(SIGKILL);
            (void)helper.wait();
        }
    } ending{PidRef(pid, UniqueFd(pidfd))};
    return map_and_open(pid, uid, gid);
}
#endif

}  // namespace

Result<UniqueFd> make_mapping_namespace(IdMapping uid, IdMapping gid) {
#if defined(__x86_64__)
    if (clone_on_stack_available()) return make_mapping_namespace_sharing_memory(uid, gid);
#endif
    return make_mapping_namespace_forked(uid, gid);
}

bool become_namespace_root(bool drop_supplementary_groups) noexcept {
    if (drop_supplementary_groups && ::syscall(SYS_setgroups, 0, nullptr) != 0) return false;
    return ::syscall(SYS_setresgid, 0, 0, 0) == 0 && ::syscall(SYS_setresuid, 0, 0, 0) == 0;
}

bool bring_loopback_up() noexcept {
    int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    ifreq request{};
    const char name[] = "lo";
    for (size_t i = 0; i < sizeof name; ++i) request.ifr_name[i] = name[i];
    bool ok = ::ioctl(fd, SIOCGIFFLAGS, &request) == 0;
    if (ok) {
        request.ifr_flags |= IFF_UP;
        ok = ::ioctl(fd, SIOCSIFFLAGS, &request) == 0;
    }
    int saved = errno;
    ::close(fd);
    errno = saved;
    return ok;
}

bool set_hostname(const char* name, size_t length) noexcept {
    return ::sethostname(name, length) == 0;
}

}  // namespace corral
