#include "supervisor/cli/run_watchdog.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstring>
#include <new>
#include <utility>

namespace corral::cli {
namespace {

constexpr size_t kStackSize = 64 * 1024;
constexpr int kEmptyWaitSteps = 1000;  // x 10 ms: the job's processes die in microseconds
constexpr long kEmptyWaitStepNs = 10'000'000;

/// What the guard needs, at the bottom of its own mapping (it outlives corral run's heap: the
/// mapping is freed only after the guard is reaped).
struct Guarded {
    int corral_pidfd = -1;  ///< corral run, whose end the guard waits for
    int kill_fd = -1;       ///< the run cgroup's cgroup.kill; -1 before 5.14
    int events_fd = -1;     ///< its cgroup.events ("populated 0" once empty)
    int instance_fd = -1;   ///< the run cgroup's directory (its leaves are removed from it)
    int parent_fd = -1;     ///< the directory it is in
    char name[256] = {};    ///< its name there
    dev_t instance_dev = 0;  ///< what the name must still be when it is removed: a new run that
    ino_t instance_ino = 0;  ///< got our pid may have made a cgroup of the same name meanwhile
    /// v1 limit cgroups (full paths), written by corral run after the start: the count last.
    char v1_directories[4][512] = {};
    dev_t v1_dev[4] = {};
    ino_t v1_ino[4] = {};
    std::atomic<int> v1_count{0};
    /// Set by corral run once it has ended the job itself: its exit is then no reason to act.
    std::atomic<bool> disarmed{false};
};

/// The leaves create_run_cgroup's tree may hold (one_shot_session.cpp, set_up).
constexpr std::array<const char*, 2> kLeaves = {"main", "holder"};

long sys(long number, long a = 0, long b = 0, long c = 0, long d = 0) {
    return ::syscall(number, a, b, c, d);
}

/// Closes every descriptor but the guard's own: corral run's stdout and stderr among them, so a
/// CI step reading them to their end is not held open by the guard.
void close_all_but(const Guarded& g) {
    int keep[5] = {g.corral_pidfd, g.kill_fd, g.events_fd, g.instance_fd, g.parent_fd};
    for (int i = 1; i < 5; ++i)  // ascending (an insertion sort: no library code in the guard)
        for (int j = i; j > 0 && keep[j - 1] > keep[j]; --j) std::swap(keep[j - 1], keep[j]);
    unsigned int from = 0;
    for (int fd : keep) {
        if (fd < 0) continue;
        if (static_cast<unsigned int>(fd) > from) sys(SYS_close_range, from, fd - 1, 0);
        from = static_cast<unsigned int>(fd) + 1;
    }
    sys(SYS_close_range, from, ~0U, 0);
}

bool tree_empty(const Guarded& g) {
    char buffer[512];
    const long n = sys(SYS_pread64, g.events_fd, reinterpret_cast<long>(buffer),
                       sizeof buffer - 1, 0);
    if (n <= 0) return true;  // the cgroup is gone already
    buffer[n] = '\0';
    return std::strstr(buffer, "populated 0") != nullptr;
}

/// The guard: system calls only (it shares corral run's memory, libc's locks and errno with it).
int guard(void* argument) {
    const Guarded& g = *static_cast<const Guarded*>(argument);
    sys(SYS_setsid);
    close_all_but(g);
    pollfd corral{g.corral_pidfd, POLLIN, 0};
    while (sys(SYS_poll, reinterpret_cast<long>(&corral), 1, -1) <= 0) {
    }
    if (g.disarmed.load(std::memory_order_acquire)) sys(SYS_exit, 0);
    if (g.kill_fd >= 0) sys(SYS_write, g.kill_fd, reinterpret_cast<long>("1"), 1);
    for (int step = 0; step < kEmptyWaitSteps && !tree_empty(g); ++step) {
        timespec pause{0, kEmptyWaitStepNs};
        sys(SYS_nanosleep, reinterpret_cast<long>(&pause), 0);
    }
    for (const char* leaf : kLeaves)
        sys(SYS_unlinkat, g.instance_fd, reinterpret_cast<long>(leaf), AT_REMOVEDIR);
    struct stat now {};
    if (sys(SYS_newfstatat, g.parent_fd, reinterpret_cast<long>(g.name),
            reinterpret_cast<long>(&now), AT_SYMLINK_NOFOLLOW) == 0 &&
        now.st_dev == g.instance_dev && now.st_ino == g.instance_ino)
        sys(SYS_unlinkat, g.parent_fd, reinterpret_cast<long>(g.name), AT_REMOVEDIR);
    const int v1 = g.v1_count.load(std::memory_order_acquire);
    for (int i = 0; i < v1; ++i) {
        if (sys(SYS_newfstatat, AT_FDCWD, reinterpret_cast<long>(g.v1_directories[i]),
                reinterpret_cast<long>(&now), AT_SYMLINK_NOFOLLOW) == 0 &&
            now.st_dev == g.v1_dev[i] && now.st_ino == g.v1_ino[i])
            sys(SYS_rmdir, reinterpret_cast<long>(g.v1_directories[i]));
    }
    sys(SYS_exit, 0);
    return 0;
}

void close_guarded(const Guarded& g) {
    for (int fd : {g.corral_pidfd, g.kill_fd, g.events_fd, g.instance_fd, g.parent_fd})
        if (fd >= 0) ::close(fd);
}

}  // namespace

Result<RunWatchdog> RunWatchdog::start(const Cgroup& instance, const std::string& parent,
                                       const std::string& name) {
    if (name.size() >= sizeof(Guarded::name))
        return sys_error(ENAMETOOLONG, "run cgroup name " + name);
    void* stack = ::mmap(nullptr, kStackSize, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (stack == MAP_FAILED) return sys_error(errno, "mmap the run watchdog's stack");
    RunWatchdog watchdog;
    watchdog.stack_ = stack;  // unmapped by the destructor from here on
    auto* g = new (stack) Guarded;
    g->corral_pidfd = static_cast<int>(::syscall(SYS_pidfd_open, ::getpid(), 0));
    g->kill_fd = ::openat(instance.dir_fd(), "cgroup.kill", O_WRONLY | O_CLOEXEC);
    g->events_fd = ::openat(instance.dir_fd(), "cgroup.events", O_RDONLY | O_CLOEXEC);
    g->instance_fd = ::openat(instance.dir_fd(), ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    g->parent_fd = ::open(parent.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    std::memcpy(g->name, name.c_str(), name.size() + 1);
    struct stat instance_stat {};
    if (g->instance_fd >= 0 && ::fstat(g->instance_fd, &instance_stat) == 0) {
        g->instance_dev = instance_stat.st_dev;
        g->instance_ino = instance_stat.st_ino;
    }
    if (g->corral_pidfd < 0 || g->events_fd < 0 || g->instance_fd < 0 || g->parent_fd < 0 ||
        g->instance_ino == 0) {
        const int code = errno;
        close_guarded(*g);
        return sys_error(code, "open what the run watchdog guards (" + parent + "/" + name + ")");
    }
    // The stack grows down from the top of the mapping, away from Guarded at its bottom.
    char* top = static_cast<char*>(stack) + kStackSize;
    // Signalled and waited for by pidfd: should the guard die early and be reaped by the run's
    // orphan reaping, its pid could be another process's by the end (review of stop 44).
    int pidfd = -1;
    const int pid = ::clone(guard, top, CLONE_VM | CLONE_PIDFD | SIGCHLD, g, &pidfd);
    const int code = errno;
    if (pid > 0) watchdog.pidfd_.reset(pidfd);
    // The guard has its copies; corral run keeps none of them (the command must not inherit
    // them, and they are O_CLOEXEC only against execve).
    close_guarded(*g);
    if (pid < 0) return sys_error(code, "clone the run watchdog");
    watchdog.pid_ = pid;
    return watchdog;
}

Status RunWatchdog::also_remove(const std::string& v1_directory) {
    if (!stack_) return sys_error(ESRCH, "the run watchdog is not running");
    auto* g = static_cast<Guarded*>(stack_);
    const int count = g->v1_count.load(std::memory_order_relaxed);
    if (count >= static_cast<int>(std::size(g->v1_directories)) ||
        v1_directory.size() >= sizeof g->v1_directories[0])
        return sys_error(E2BIG, "the run watchdog cannot also remove " + v1_directory);
    struct stat st {};
    if (::stat(v1_directory.c_str(), &st) != 0)
        return sys_error("stat the run's v1 cgroup `" + v1_directory + "`");
    std::memcpy(g->v1_directories[count], v1_directory.c_str(), v1_directory.size() + 1);
    g->v1_dev[count] = st.st_dev;
    g->v1_ino[count] = st.st_ino;
    g->v1_count.store(count + 1, std::memory_order_release);
    return {};
}

RunWatchdog::RunWatchdog(RunWatchdog&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      pidfd_(std::move(other.pidfd_)),
      standing_down_(std::exchange(other.standing_down_, false)),
      stack_(std::exchange(other.stack_, nullptr)) {}

RunWatchdog& RunWatchdog::operator=(RunWatchdog&& other) noexcept {
    if (this != &other) {
        stop();
        pid_ = std::exchange(other.pid_, -1);
        pidfd_ = std::move(other.pidfd_);
        standing_down_ = std::exchange(other.standing_down_, false);
        stack_ = std::exchange(other.stack_, nullptr);
    }
    return *this;
}

RunWatchdog::~RunWatchdog() { stop(); }

void RunWatchdog::stand_down() {
    if (pid_ <= 0 || standing_down_) return;
    static_cast<Guarded*>(stack_)->disarmed.store(true, std::memory_order_release);
    (void)::syscall(SYS_pidfd_send_signal, pidfd_.get(), SIGKILL, nullptr, 0);
    standing_down_ = true;
}

void RunWatchdog::stop() {
    if (pid_ > 0) {
        stand_down();
        // Reaped here (or already by corral run's orphan reaping: ECHILD), never left a zombie
        // for a PID 1 that may not reap (a container's shell). Only then is its stack free.
        siginfo_t info{};
        while (::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd_.get()), &info,
                        WEXITED) < 0 &&
               errno == EINTR) {
        }
    }
    pid_ = -1;
    pidfd_.reset();
    standing_down_ = false;
    if (stack_) ::munmap(stack_, kStackSize);
    stack_ = nullptr;
}

}  // namespace corral::cli
