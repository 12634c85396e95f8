// Starting a process of a session and answering questions about it. The watching (exit, output,
// timeout) is in process_supervision.cpp; stdin in process_stdin.cpp.
#include "sessions/process.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>

#include "base/pipe.hpp"
#include "isolation/child_report.hpp"
#include "isolation/launch_worker.hpp"
#include "isolation/setup_deadline.hpp"
#include "sessions/child_reaper.hpp"

namespace corral {
namespace {

/// The capacity of a process's stdout pipe (Linux's default is 64 KiB).
constexpr int kOutputPipeBytes = 1 << 20;

Status set_nonblocking(int fd) {
    const int flags = ::fcntl(fd, F_GETFL);
    if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0)
        return sys_error("fcntl O_NONBLOCK");
    return {};
}

/// A session's launches go through corrald's launch worker, whose descriptor table is small:
/// a child copies its parent's table and closes it entry by entry, which with 1,000 sessions
/// (~12,000 descriptors) was a third of every launch (launch_worker.hpp).
Result<PendingLaunch> launch_from_small_table(const LaunchSpec& spec) {
    if (LaunchWorker* worker = LaunchWorker::shared()) return worker->launch_begin(spec);
    return launch_begin(spec);
}

/// What every process of a session is launched with, whatever its stdio: the command, its
/// leaf and limits, the session's namespaces and confinement, a session of its own.
LaunchSpec base_launch_spec(const ProcessSetup& setup, const Cgroup& leaf) {
    LaunchSpec spec;
    spec.argv = setup.argv;
    spec.env = setup.env;
    spec.cwd = setup.cwd;
    spec.cgroup_fd = leaf.dir_fd();
    spec.v1_join_fds = setup.limit_join_fds;
    spec.namespace_holder_pidfd = setup.holder_pidfd;
    spec.namespace_flags = setup.namespace_flags;
    spec.new_session = true;
    spec.confinement = setup.confinement;
    return spec;
}

}  // namespace

Process::Process(boost::asio::io_context& io, ChildReaper& reaper, ProcessSetup setup,
                 FinishCallback on_finish)
    : io_(io),
      reaper_(reaper),
      setup_(std::move(setup)),
      on_finish_(std::move(on_finish)),
      out_(io, setup_.output_cap),
      err_(io, setup_.output_cap),
      stdin_pipe_(io),
      exit_watch_(io),
      leaf_watch_(io),
      refusal_watch_(io),
      timeout_timer_(io),
      grace_timer_(io),
      settle_timer_(io),
      started_wall_(std::chrono::system_clock::now()),
      started_(std::chrono::steady_clock::now()),
      launch_watch_(io),
      launch_timer_(io) {}

Process::~Process() {
    shut_down();
}

Result<std::shared_ptr<Process>> Process::start(boost::asio::io_context& io, ChildReaper& reaper,
                                                ProcessSetup setup, FinishCallback on_finish) {
    if (setup.session_cgroup == nullptr) return plain_error("start process: no session cgroup");
    std::shared_ptr<Process> process(
        new Process(io, reaper, std::move(setup), std::move(on_finish)));
    if (process->setup_.leaf) {
        process->leaf_ = std::move(*process->setup_.leaf);
        process->setup_.leaf.reset();
    } else {
        auto leaf = process->setup_.session_cgroup->create_child(process->setup_.id);
        if (!leaf) return std::move(leaf.error().context("start process " + process->setup_.id));
        process->leaf_ = std::move(*leaf);
    }
    if (process->setup_.read_limit_events)
        process->events_at_start_ = process->setup_.read_limit_events();
    auto launched = process->launch_into_leaf();
    process->end_unused_waiting();  // a launch that failed before it could hand it over
    if (!launched) {
        process->record_setup_failure(launched.error());
        return process;
    }
    if (process->setup_.start_ticks == 0) {  // not read ahead (launch_ahead.hpp)
        if (auto ticks = process_start_ticks(process->main_.pid()))
            process->setup_.start_ticks = *ticks;
    }
    process->start_watching();
    process->watch_launch();
    return process;
}

LaunchSpec Process::launch_spec() {
    LaunchSpec spec = base_launch_spec(setup_, leaf_);
    if (setup_.confinement != nullptr && !setup_.confinement->seccomp_filter.empty()) {
        refusals_ = std::make_unique<SeccompRefusals>(setup_.confinement->seccomp_marked);
        spec.refusals = refusals_.get();
    }
    return spec;
}

// Pipes, then launch, then the parent's copies of the child's ends are closed (when `child_*`
// goes out of scope), so EOF on stdout/stderr means every writer is gone.
Status Process::launch_into_leaf() {
    auto out_pipe = make_pipe();
    if (!out_pipe) return std::move(out_pipe.error());
    auto err_pipe = make_pipe();
    if (!err_pipe) return std::move(err_pipe.error());
    if (setup_.terminal) return launch_on_terminal();
    std::optional<Pipe> in_pipe;
    if (setup_.stdin_data || setup_.stdin_open) {
        auto created = make_pipe();
        if (!created) return std::move(created.error());
        in_pipe = std::move(*created);
    }

    LaunchSpec spec = launch_spec();
    spec.stdin_fd = in_pipe ? in_pipe->read_end.get() : -1;
    spec.stdout_fd = out_pipe->write_end.get();
    spec.stderr_fd = err_pipe->write_end.get();
    spec.extra_fd = setup_.extra_fd;
    started_wall_ = std::chrono::system_clock::now();
    started_ = std::chrono::steady_clock::now();
    auto pending = launch_child(spec);
    if (!pending) return std::move(pending.error());
    take_launch(std::move(*pending));

    CORRAL_TRY(set_nonblocking(out_pipe->read_end.get()), "stdout pipe");
    CORRAL_TRY(set_nonblocking(err_pipe->read_end.get()), "stderr pipe");
    // A larger pipe lets a fast writer run ahead of the daemon by more than 64 KiB, so each wake-up
    // moves more bytes (fewer context switches per MiB). The pages are allocated as written and
    // charged to the writer's memory cgroup; best effort (the kernel may refuse the size).
    // It is also what a writer may put ahead while the daemon is down (its holder keeps the pipe:
    // isolation/descriptor_store.hpp): then it blocks, and is never given SIGPIPE.
    (void)::fcntl(out_pipe->read_end.get(), F_SETPIPE_SZ, kOutputPipeBytes);
    (void)::fcntl(err_pipe->read_end.get(), F_SETPIPE_SZ, kOutputPipeBytes);
    out_.pipe.assign(out_pipe->read_end.release());
    out_.eof = false;
    err_.pipe.assign(err_pipe->read_end.release());
    err_.eof = false;
    if (in_pipe) {
        CORRAL_TRY(set_nonblocking(in_pipe->write_end.get()), "stdin pipe");
        stdin_pipe_.assign(in_pipe->write_end.release());
    }
    return {};
}

// The pty's slave is the child's stdin, stdout and stderr and its controlling terminal; the
// daemon's copy of the slave is closed right after the launch, so the master reads EIO (the
// stream's end) once every process holding the slave is gone. stdout and stdin are two
// duplicates of the master (asio owns and closes each); stderr stays empty (merged, as on a
// terminal).
Status Process::launch_on_terminal() {
    LaunchSpec spec = launch_spec();
    spec.stdin_fd = setup_.terminal->slave.get();
    spec.stdout_fd = setup_.terminal->slave.get();
    spec.stderr_fd = setup_.terminal->slave.get();
    spec.controlling_terminal = true;
    const int reading = ::fcntl(setup_.terminal->master.get(), F_DUPFD_CLOEXEC, 3);
    if (reading < 0) return sys_error("dup the pty master");
    UniqueFd read_end(reading);
    const int writing = ::fcntl(setup_.terminal->master.get(), F_DUPFD_CLOEXEC, 3);
    if (writing < 0) return sys_error("dup the pty master");
    UniqueFd write_end(writing);
    started_wall_ = std::chrono::system_clock::now();
    started_ = std::chrono::steady_clock::now();
    auto pending = launch_child(spec);
    setup_.terminal->slave.reset();
    if (!pending) return std::move(pending.error());
    take_launch(std::move(*pending));
    CORRAL_TRY(set_nonblocking(read_end.get()), "pty master");
    out_.pipe.assign(read_end.release());
    out_.eof = false;
    stdin_pipe_.assign(write_end.release());
    return {};
}

Result<PendingLaunch> Process::launch_child(const LaunchSpec& spec) {
    if (setup_.waiting) {
        if (auto handed = launch_waiting(*setup_.waiting, spec)) {
            setup_.start_ticks = setup_.waiting->start_ticks;
            waiting_cpu_ns_ = setup_.waiting->cpu_ns;
            setup_.waiting.reset();
            return Result<PendingLaunch>(std::move(*handed));
        }
        // Gone, not in its session, or the spec too large for one message: another way, once it
        // is gone (it must not wait beside the client's command, nor count against the pids
        // limit the new clone is charged to).
        end_unused_waiting();
    }
    return launch_from_small_table(spec);
}

void end_waiting_child(std::shared_ptr<WaitingLaunch>& waiting, ChildReaper& reaper) {
    if (waiting && !end_waiting_launch(*waiting)) reaper.hand_over(std::move(waiting->child));
    waiting.reset();
}

void Process::end_unused_waiting() {
    end_waiting_child(setup_.waiting, reaper_);
}

void Process::take_launch(PendingLaunch launch) {
    main_ = std::move(launch.child);
    // A listener that came before the launch (its filter installed ahead): its calls are answered
    // once the record is watched (start_watching), as an adopted process's are.
    if (launch.listener && refusals_) refusals_->attach(std::move(launch.listener));
    pending_launch_ = std::move(launch);
    // Already exec'd (a launch that shared corrald's memory): nothing to watch (launching()).
    if (pending_launch_->exec_reached) pending_launch_->report.reset();
    launched_ = true;
    reaper_.add_owned(main_.pid());
}

std::vector<int> Process::output_descriptors() {
    if (setup_.terminal) {
        if (setup_.terminal->master.valid() && out_.pipe.is_open())
            return {setup_.terminal->master.get()};
        return {};
    }
    if (!out_.pipe.is_open() || !err_.pipe.is_open()) return {};
    return {out_.pipe.native_handle(), err_.pipe.native_handle()};
}

Status Process::resize_terminal(TerminalSize size) {
    if (!setup_.terminal) return sys_error(ENOTTY, "process " + setup_.id + " has no terminal");
    return set_terminal_size(setup_.terminal->master.get(), size);
}

void Process::record_setup_failure(const Error& error) {
    setup_error_ = error.describe();
    setup_exit_code_ = exec_failure_exit_code(error);
    ended_ = std::chrono::steady_clock::now();
    reason_ = ExitReason::setup_failed;
    finished_ = true;
    if (launched_) {
        // The launch worked but wiring the pipes did not: do not leave it running unobserved.
        // No blocking wait on the loop: the daemon's reaper collects it when its pidfd says it
        // ended, and the leaf goes once it is empty.
        (void)leaf_.kill_all();
        const pid_t pid = main_.pid();
        reaper_.hand_over(std::exchange(main_, PidRef(pid, UniqueFd())));
        if (leaf_populated()) {
            watch_lingering_leaf();
            return;
        }
    }
    (void)remove_leaf();
}

Process::StreamReader& Process::reader(OutputStream stream) {
    return stream == OutputStream::out ? out_ : err_;
}

const Process::StreamReader& Process::reader(OutputStream stream) const {
    return stream == OutputStream::out ? out_ : err_;
}

ProcessInfo Process::info(bool read_usage) const {
    ProcessInfo info;
    info.id = setup_.id;
    info.terminal = setup_.terminal != nullptr;
    info.pid = launched_ ? main_.pid() : restored_pid_;
    info.argv = setup_.argv;
    info.command = setup_.command;
    info.cwd = setup_.cwd;
    info.running = !finished_;
    info.reason = reason_;
    if (main_status_ && reason_ != ExitReason::setup_failed) {
        if (main_status_->exited) {
            info.exit_code = main_status_->code;
        } else {
            info.signal = main_status_->code;
        }
    }
    if (reason_ == ExitReason::setup_failed) info.exit_code = setup_exit_code_;
    info.error = setup_error_;
    info.started_at = started_wall_;
    const auto end = ended_.value_or(std::chrono::steady_clock::now());
    info.duration_ms = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(end - started_).count());
    info.timeout = setup_.timeout;
    if (finished_ || !leaf_.valid()) {
        info.usage = final_usage_;
    } else if (!read_usage) {
        // left zero: the caller said it does not answer with it
    } else if (auto usage = leaf_.usage()) {
        info.usage = *usage;
    }
    if (adopted_) {
        info.output_lost = !output_resumed_;
        info.output_resumed = output_resumed_;
        info.note = output_resumed_ ? kResumedNote : kAdoptedNote;
    }
    if (restored_) {
        info.reason = restored_->reason;
        info.exit_code = restored_->exit_code;
        info.signal = restored_->signal;
        info.error = restored_->error;
        info.note = restored_->note;
        info.duration_ms = restored_->duration_ms;
        info.output_lost = !output_resumed_;
        info.output_resumed = output_resumed_;
    }
    for (auto [stats, stream] :
         {std::pair{&info.stdout_stats, &out_}, std::pair{&info.stderr_stats, &err_}}) {
        stats->total_bytes = stream->buffer.total_written();
        stats->dropped_bytes = stream->buffer.dropped();
        stats->truncated = stream->buffer.truncated();
        stats->eof = stream->eof;
    }
    info.stdin_open = stdin_pipe_.is_open() && !stdin_eof_requested_;
    if (refusals_) info.seccomp = refusals_->counts();
    return info;
}

Status Process::signal(int signal) {
    if (adopted_ && !finished_ && !main_.valid()) {
        return sys_error(ESRCH, "the main process of " + setup_.id +
                                    " ended while the daemon was down (its descendants run on)");
    }
    if (finished_ || !main_running()) {
        return sys_error(ESRCH, "process " + setup_.id + " has already exited");
    }
    killed_by_request_ = true;  // if it dies of this signal, the API killed it
    CORRAL_TRY(main_.send_signal(signal), "signal process " + setup_.id);
    return {};
}

Result<size_t> Process::kill() {
    if (!leaf_.valid()) return size_t{0};
    if (main_running()) killed_by_request_ = true;
    // As on the timeout path: the whole leaf is dying, so finish() removes it rather than
    // watching it linger (its last descendants may still be exiting when the main one is reaped).
    leaf_killed_ = true;
    auto killed = leaf_.kill_all();
    if (!killed) return std::move(killed.error().context("kill process " + setup_.id));
    return *killed;
}

Result<size_t> Process::stop(bool force) {
    if (force) return kill();
    if (!leaf_.valid()) return size_t{0};
    if (main_running()) killed_by_request_ = true;
    return begin_graceful_end();
}

Result<size_t> Process::signal_tree(int signal) {
    if (!leaf_populated()) return sys_error(ESRCH, "process " + setup_.id + " has no process left");
    if (main_running()) killed_by_request_ = true;
    auto signalled = leaf_.signal_all(signal);
    if (!signalled) return std::move(signalled.error().context("signal process " + setup_.id));
    return *signalled;
}

size_t Process::terminate() {
    // The session is ending: no stream may hold its output back any more, or a stalled client
    // would keep the record (and the session's end) waiting for pipes nobody reads.
    followers_.clear();
    resume_reading();
    if (!leaf_.valid()) return 0;
    if (main_running()) killed_by_request_ = true;
    return terminate_leaf();
}

// Reading cgroup.procs and signalling is not atomic against forks: a `sh -c` that forks its
// command just as the SIGTERM comes (a DELETE a millisecond after the spawn) dies and leaves the
// child running, unsignalled, for the whole grace period. So when the main process exits while
// terminating, the leaf's newcomers get their SIGTERM too (on_main_exit).
size_t Process::terminate_leaf() {
    terminating_ = true;
    if (!leaf_.valid()) return 0;
    auto pids = leaf_.pids();
    if (!pids) return 0;
    size_t count = 0;
    for (pid_t pid : *pids) {
        if (pid <= 0 || std::find(terminated_.begin(), terminated_.end(), pid) != terminated_.end())
            continue;
        if (::kill(pid, SIGTERM) == 0) ++count;
        terminated_.push_back(pid);
    }
    return count;
}

bool Process::leaf_populated() const {
    if (!leaf_.valid()) return false;
    auto populated = leaf_.populated();
    return populated ? *populated : false;
}

Status Process::remove_leaf() {
    if (!leaf_.valid()) return {};
    if (leaf_populated()) {
        return sys_error(EBUSY, "leaf cgroup of process " + setup_.id + " still holds processes");
    }
    Status removed = leaf_.remove(std::chrono::milliseconds(0));
    if (!removed) leaf_.leave();  // a process moved in meanwhile: left for start-up clean-up
    forget_leaf();
    return removed;
}

// Most leaves are empty when their record finishes: one rmdir, which the kernel refuses while
// a process (or a child cgroup) is left, instead of reading cgroup.events twice and walking to
// the parent first.
bool Process::remove_empty_leaf() {
    if (!leaf_.valid()) return false;
    auto gone = leaf_.remove_if_empty();
    if (!gone || !*gone) return false;
    forget_leaf();
    return true;
}

void Process::forget_leaf() {
    boost::system::error_code ignored;
    leaf_watch_.close(ignored);
    leaf_ = Cgroup{};
    if (setup_.on_leaf_removed) boost::asio::post(io_, setup_.on_leaf_removed);
}

void Process::leave_leaf() {
    boost::system::error_code ignored;
    leaf_watch_.close(ignored);
    leaf_.leave();
    leaf_ = Cgroup{};
}

void Process::shut_down() {
    boost::system::error_code ignored;
    timeout_timer_.cancel();
    grace_timer_.cancel();
    settle_timer_.cancel();
    launch_timer_.cancel();
    launch_watch_.close(ignored);
    exit_watch_.close(ignored);
    leaf_watch_.close(ignored);
    refusal_watch_.close(ignored);
    out_.pipe.close(ignored);
    err_.pipe.close(ignored);
    stdin_pipe_.close(ignored);
    for (auto& waiter : exit_waiters_) {
        if (waiter->timer) waiter->timer->cancel();
    }
}

OutputView Process::view(OutputStream stream, uint64_t offset, size_t max) const {
    const StreamReader& source = reader(stream);
    const OutputBuffer::View bytes = source.buffer.view(offset, max);
    OutputView view;
    view.offset = bytes.offset;
    view.skipped = bytes.skipped;
    view.parts[0] = bytes.parts[0];
    view.parts[1] = bytes.parts[1];
    view.next_offset = view.offset + view.size();
    view.eof = source.eof && view.next_offset >= source.buffer.end_offset();
    return view;
}

OutputChunk Process::read(OutputStream stream, uint64_t offset, size_t max) const {
    const StreamReader& source = reader(stream);
    OutputBuffer::Slice slice = source.buffer.read(offset, max);
    OutputChunk chunk;
    chunk.offset = slice.offset;
    chunk.skipped = slice.skipped;
    chunk.data = std::move(slice.bytes);
    chunk.next_offset = chunk.offset + chunk.data.size();
    chunk.eof = source.eof && chunk.next_offset >= source.buffer.end_offset();
    return chunk;
}

}  // namespace corral
