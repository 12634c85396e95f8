#include "sessions/network/netns_runner.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <future>
#include <mutex>
#include <thread>
#include <utility>

#include "base/thread_without_signals.hpp"
#include "sessions/network/netns_visit.hpp"

namespace corral {

struct NetnsRunner::Namespace {
    UniqueFd fd;
    std::atomic<bool> stopped{false};
    /// Held while one of its jobs runs: stop() takes it to wait for that job.
    std::mutex running;
};

Result<UniqueFd> open_network_namespace(pid_t pid, int pidfd) {
    std::string path = "/proc/" + std::to_string(pid) + "/ns/net";
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) return sys_error("open `" + path + "`");
    // The pid could have been recycled between the holder's death and open(): only a pidfd that
    // still accepts signal 0 proves the namespace we opened is the holder's.
    if (pidfd >= 0 && ::syscall(SYS_pidfd_send_signal, pidfd, 0, nullptr, 0) != 0)
        return sys_error("namespace holder " + std::to_string(pid) + " is gone");
    return fd;
}

Result<UniqueFd> make_tcp_socket(int family) {
    UniqueFd fd(::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd) return sys_error("socket");
    return fd;
}

Result<UniqueFd> make_tcp_listener(const SocketAddress& address) {
    auto kernel_address = to_kernel_address(address);
    if (!kernel_address) return std::move(kernel_address.error());
    auto fd = make_tcp_socket(address.family);
    if (!fd) return std::move(fd.error());
    int one = 1;
    ::setsockopt(fd->get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd->get(), kernel_address->get(), kernel_address->length) != 0)
        return sys_error("bind " + describe(address));
    if (::listen(fd->get(), SOMAXCONN) != 0) return sys_error("listen " + describe(address));
    return std::move(*fd);
}

namespace {

/// Whether the calling thread is the namespace thread (set there once).
thread_local bool on_namespace_thread = false;

/// Aborts corrald when a namespace job calls `call` (the header forbids it), in every build, not
/// through an assert() that release builds drop: the misuse would otherwise hang the namespace
/// thread, and with it every session's network set-up, with nothing in the log.
void abort_if_called_by_a_job(const char* call) {
    if (!on_namespace_thread) return;
    std::fprintf(stderr, "corral: NetnsRunner::%s called by a namespace job; aborting\n", call);
    std::abort();
}

/// corrald's namespace thread: runs every runner's jobs, one at a time, each inside its
/// namespace. Started at the first job; stopped and joined when the process exits.
class NamespaceThread {
  public:
    static NamespaceThread& instance() {
        static NamespaceThread thread;
        return thread;
    }
    ~NamespaceThread() {
        {
            std::lock_guard lock(mutex_);
            stopping_ = true;
        }
        wake_.notify_all();
        if (thread_.joinable()) thread_.join();
    }
    NamespaceThread(const NamespaceThread&) = delete;
    NamespaceThread& operator=(const NamespaceThread&) = delete;

    Result<UniqueFd> run(std::shared_ptr<NetnsRunner::Namespace> netns,
                         std::function<Result<UniqueFd>()> work) {
        auto job = std::make_shared<Job>();
        job->netns = std::move(netns);
        job->work = std::move(work);
        auto result = job->done.get_future();
        {
            std::lock_guard lock(mutex_);
            if (stopping_) return sys_error(ESHUTDOWN, "network namespace thread stopped");
            jobs_.push_back(job);
        }
        wake_.notify_one();
        return result.get();
    }

  private:
    struct Job {
        std::shared_ptr<NetnsRunner::Namespace> netns;
        std::function<Result<UniqueFd>()> work;
        std::promise<Result<UniqueFd>> done;
    };

    NamespaceThread() : thread_(start_thread_without_signals([this] { serve(); })) {}

    void serve() {
        on_namespace_thread = true;
        // Where the thread returns after each job, so that no session's namespace is kept
        // alive by this thread after its runner is gone.
        home_ = UniqueFd(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
        std::unique_lock lock(mutex_);
        for (;;) {
            wake_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
            if (stopping_) break;
            auto job = std::move(jobs_.front());
            jobs_.pop_front();
            lock.unlock();
            job->done.set_value(run_inside(*job->netns, job->work));
            lock.lock();
        }
        for (auto& job : jobs_)
            job->done.set_value(sys_error(ESHUTDOWN, "network namespace thread stopped"));
        jobs_.clear();
    }

    /// The job, only after entering its namespace: a failed setns() leaves this thread where
    /// it was (corrald's namespace), so the job must not run at all. The visit ends, and the
    /// thread is home, before the runner's lock is released.
    Result<UniqueFd> run_inside(NetnsRunner::Namespace& netns,
                                const std::function<Result<UniqueFd>()>& work) {
        std::lock_guard running(netns.running);
        if (netns.stopped) return sys_error(ESHUTDOWN, "network namespace runner stopped");
        auto visit = NetnsVisit::enter(netns.fd.get(), home_.get());
        if (!visit) return std::move(visit.error());
        return work();
    }

    std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<std::shared_ptr<Job>> jobs_;
    bool stopping_ = false;
    UniqueFd home_;        // the thread's own
    std::thread thread_;  // last: started once everything it uses exists
};

}  // namespace

Result<std::shared_ptr<NetnsRunner>> NetnsRunner::start(UniqueFd netns_fd) {
    auto netns = std::make_shared<Namespace>();
    netns->fd = std::move(netns_fd);
    auto runner = std::make_shared<NetnsRunner>(std::move(netns));
    // Entered once now, so a namespace the thread cannot enter fails here, not at a first job.
    auto entered = runner->run([] { return Result<UniqueFd>(UniqueFd()); });
    if (!entered) return std::move(entered.error());
    return runner;
}

NetnsRunner::~NetnsRunner() {
    stop();
}

Result<UniqueFd> NetnsRunner::run(std::function<Result<UniqueFd>()> work) {
    // One thread runs every runner's jobs: a job calling run() (of any runner) would queue a job
    // behind itself and wait for it forever.
    abort_if_called_by_a_job("run()");
    if (netns_->stopped) return sys_error(ESHUTDOWN, "network namespace runner stopped");
    return NamespaceThread::instance().run(netns_, std::move(work));
}

Result<UniqueFd> NetnsRunner::tcp_socket(int family) {
    return run([family] { return make_tcp_socket(family); });
}

Result<UniqueFd> NetnsRunner::tcp_listener(const SocketAddress& address) {
    return run([address] { return make_tcp_listener(address); });
}

void NetnsRunner::stop() {
    // A job stopping its own runner would wait for itself on `running` forever.
    abort_if_called_by_a_job("stop()");
    netns_->stopped = true;
    std::lock_guard running(netns_->running);
    netns_->fd.reset();
}

}  // namespace corral
