// Records of processes a previous run of the daemon started (DESIGN.md "Surviving the daemon"):
// ones that still run are taken over through their leaf cgroup, ones that ended are restored as
// final records.
//
// Why the leaf and not the pidfd: a pidfd of a process that is not our child becomes readable
// when it exits, but waitid() refuses it (ECHILD) and the status went to whoever it was
// reparented to. The leaf holds the process and every descendant, and "populated 0" in its
// cgroup.events is the one end signal that covers all of them.
#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "sessions/child_reaper.hpp"
#include "sessions/process.hpp"

namespace corral {
namespace {

/// The steady-clock instant that corresponds to the wall-clock `started_at` (a previous run's).
std::chrono::steady_clock::time_point steady_from_wall(std::chrono::system_clock::time_point at) {
    const auto age = std::chrono::system_clock::now() - at;
    return std::chrono::steady_clock::now() -
           std::chrono::duration_cast<std::chrono::steady_clock::duration>(
               std::max(age, std::chrono::system_clock::duration::zero()));
}

}  // namespace

std::shared_ptr<Process> Process::adopt(boost::asio::io_context& io, ChildReaper& reaper,
                                        ProcessSetup setup,
                                        std::chrono::system_clock::time_point started_at,
                                        PidRef main, Cgroup leaf, FinishCallback on_finish,
                                        ResumedOutput resumed) {
    std::optional<Millis> timeout = setup.timeout;
    std::shared_ptr<Process> process(
        new Process(io, reaper, std::move(setup), std::move(on_finish)));
    process->adopted_ = true;
    process->launched_ = true;
    process->started_wall_ = started_at;
    process->started_ = steady_from_wall(started_at);
    process->main_ = std::move(main);
    process->leaf_ = std::move(leaf);
    // Without pipes out_/err_ stay at EOF (their default until a pipe is attached).
    process->attach_resumed_output(std::move(resumed));
    process->watch_adopted_leaf();
    if (timeout && timeout->count() > 0 && !process->finished_) {
        // The timeout counts from the original start: what is left of it, or nothing.
        const auto elapsed = std::chrono::duration_cast<Millis>(std::chrono::steady_clock::now() -
                                                                process->started_);
        process->setup_.timeout = std::max(Millis(1), *timeout - elapsed);
        process->arm_timeout();
        process->setup_.timeout = timeout;  // the record shows the one it was started with
    }
    return process;
}

// Descriptors taken back from the session's holder share their open file with the old daemon's
// (O_NONBLOCK is already set there; set again in case). A terminal's master is read through one
// duplicate and written (stdin) through another, as at launch.
void Process::attach_resumed_output(ResumedOutput resumed) {
    if (!resumed.any()) return;
    auto nonblocking = [](int fd) {
        const int flags = ::fcntl(fd, F_GETFL);
        return flags >= 0 && ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0;
    };
    if (resumed.pty_master.valid()) {
        const int reading = ::fcntl(resumed.pty_master.get(), F_DUPFD_CLOEXEC, 3);
        const int writing = ::fcntl(resumed.pty_master.get(), F_DUPFD_CLOEXEC, 3);
        UniqueFd read_end(reading), write_end(writing);
        if (!read_end || !write_end || !nonblocking(read_end.get())) return;
        out_.pipe.assign(read_end.release());
        out_.eof = false;
        stdin_pipe_.assign(write_end.release());
        setup_.terminal = std::make_shared<PtyPair>();
        setup_.terminal->master = std::move(resumed.pty_master);
    } else {
        if (!resumed.stdout_fd || !resumed.stderr_fd || !nonblocking(resumed.stdout_fd.get()) ||
            !nonblocking(resumed.stderr_fd.get()))
            return;
        out_.pipe.assign(resumed.stdout_fd.release());
        out_.eof = false;
        err_.pipe.assign(resumed.stderr_fd.release());
        err_.eof = false;
    }
    output_resumed_ = true;
    for (OutputStream stream : {OutputStream::out, OutputStream::err})
        boost::asio::post(io_, [self = shared_from_this(), stream] { self->read_more(stream); });
}

std::shared_ptr<Process> Process::restore(boost::asio::io_context& io, ChildReaper& reaper,
                                          ProcessSetup setup,
                                          std::chrono::system_clock::time_point started_at,
                                          pid_t pid, RestoredEnd end, ResumedOutput resumed) {
    std::shared_ptr<Process> process(new Process(io, reaper, std::move(setup), nullptr));
    process->drain_resumed_output(std::move(resumed));
    process->started_wall_ = started_at;
    process->started_ = steady_from_wall(started_at);
    process->ended_ = process->started_ + std::chrono::milliseconds(end.duration_ms);
    process->reason_ = end.reason;
    process->restored_pid_ = pid;
    process->restored_ = std::move(end);
    process->finished_ = true;
    return process;
}

// A process that ended while the daemon was down left what it wrote since the old daemon's last
// read in the pipes the holder kept. This runs on start-up, before the API listens, so it reads
// only what the pipe holds now (FIONREAD; at most a pipe's 1 MiB when that cannot be asked): a
// process of the same session can still hold a write end (it opened /proc/<pid>/fd/1, or it is
// a descendant outside the leaf) and keep writing, and "until EOF" would never end (review of
// issue 12's held output). What it writes later is not this record's.
void Process::drain_resumed_output(ResumedOutput resumed) {
    if (!resumed.any()) return;
    auto drain = [](int fd, OutputBuffer& buffer) {
        const int flags = ::fcntl(fd, F_GETFL);
        if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) return;
        int pending = 0;
        size_t left = ::ioctl(fd, FIONREAD, &pending) == 0 && pending >= 0
                          ? static_cast<size_t>(pending)
                          : size_t{1} << 20;
        char chunk[64 * 1024];
        while (left > 0) {
            const ssize_t n = ::read(fd, chunk, std::min(sizeof chunk, left));
            if (n > 0) {
                buffer.append(std::string_view(chunk, static_cast<size_t>(n)));
                left -= static_cast<size_t>(n);
            } else if (n < 0 && errno == EINTR) {
                continue;
            } else {
                return;  // EOF, EAGAIN, or EIO (a pty whose slave is closed)
            }
        }
    };
    if (resumed.pty_master.valid()) drain(resumed.pty_master.get(), out_.buffer);
    if (resumed.stdout_fd.valid()) drain(resumed.stdout_fd.get(), out_.buffer);
    if (resumed.stderr_fd.valid()) drain(resumed.stderr_fd.get(), err_.buffer);
    output_resumed_ = true;
}

// Like watch_lingering_leaf, but the leaf's emptying is the process's end: then the record
// becomes final (on_main_exit with no status: "lost", classified unknown/killed/timeout).
void Process::watch_adopted_leaf() {
    if (finished_) return;
    if (leaf_.valid() && !leaf_watch_.is_open()) {
        if (auto fd = leaf_.watch_events()) {
            boost::system::error_code error;
            leaf_watch_.assign(fd->get(), error);
            if (!error) (void)fd->release();
        }
    }
    if (leaf_watch_.is_open()) {
        leaf_watch_.async_wait(boost::asio::posix::descriptor_base::wait_error,
                               [self = shared_from_this()](const boost::system::error_code& error) {
                                   if (error) return;  // closed: removed or shut down
                                   self->watch_adopted_leaf();
                               });
    }
    // Checked after arming (an emptying between the two still wakes the wait).
    if (!leaf_populated()) {
        boost::system::error_code ignored;
        leaf_watch_.close(ignored);
        on_main_exit(std::nullopt);
    }
}

}  // namespace corral
