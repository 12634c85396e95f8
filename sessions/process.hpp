#pragma once
// One process the API started, with everything that watches it: its leaf cgroup (the process and
// all its descendants), stdout/stderr pipes read into bounded OutputBuffers on the event loop (the
// daemon keeps reading even when nobody listens, so the process never blocks on a full pipe — but
// while a live stream follows the output, reading pauses rather than drop bytes that stream has
// not sent yet: see OutputFollower), its stdin pipe, its pidfd (exit status through
// waitid(P_PIDFD)), and its command timeout.
//
// The record becomes final ("finished") when the main process has exited AND its output is
// complete: both pipes at EOF — or, when descendants that inherited the pipes outlive it (a
// `cmd &` in a shell), after a short settle window, so a `run` of such a command still returns.
// Output that arrives later is still kept. Internal to sessions/; the HTTP layer sees only
// ProcessInfo and the SessionManager API.

#include <sys/types.h>

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/asio.hpp"
#include "base/error.hpp"
#include "isolation/cgroup.hpp"
#include "isolation/confinement.hpp"
#include "isolation/exit_reason.hpp"
#include "isolation/launch_ahead.hpp"
#include "isolation/launcher.hpp"
#include "isolation/seccomp_listener.hpp"
#include "isolation/limits.hpp"
#include "isolation/pid_ref.hpp"
#include "isolation/setup_deadline.hpp"
#include "sessions/output_buffer.hpp"
#include "sessions/output_follower.hpp"
#include "sessions/session_types.hpp"

namespace corral {

class ChildReaper;

/// The note on the record of a process a previous run of the daemon started.
inline constexpr const char* kAdoptedNote =
    "started before the daemon restarted (daemon-restart): it is not this daemon's child, so "
    "its exit status cannot be known, and its output pipes ended with the old daemon";
/// The note on the record of a process a previous run started whose output pipes the session's
/// holder kept (isolation/descriptor_store.hpp).
inline constexpr const char* kResumedNote =
    "started before the daemon restarted (daemon-restart): it is not this daemon's child, so "
    "its exit status cannot be known; its output was kept by the session's holder and is read "
    "on (outputResumed): what the old daemon had read is gone, and offsets start at 0 again";
/// The note on the record of a process that ended while the daemon was down, whose output pipes
/// the session's holder kept.
inline constexpr const char* kEndedWhileDownResumedNote =
    "ended while the daemon was down (daemon-restart): its exit status is unknown; what it wrote "
    "that the old daemon had not read was kept by the session's holder and is here "
    "(outputResumed), from offset 0";
/// The note on the record of a process that ended while the daemon was down.
inline constexpr const char* kEndedWhileDownNote =
    "ended while the daemon was down (daemon-restart): its exit status and its output since the "
    "restart are unknown";

/// Everything needed to start one process, computed by the session.
struct ProcessSetup {
    std::string id;  ///< "p<N>", also the leaf cgroup's name
    std::vector<std::string> argv;
    std::string command;            ///< original shell command, for the record
    std::string cwd;                ///< as the process sees it
    std::vector<std::string> env;   ///< "KEY=VALUE"
    std::optional<Millis> timeout;  ///< nullopt: none
    Millis grace{5000};             ///< SIGTERM -> grace -> cgroup.kill
    size_t output_cap = 16u << 20;  ///< bytes kept per stream
    std::optional<std::string> stdin_data;
    bool stdin_open = false;
    int extra_fd = -1;  ///< becomes fd 3 of the process (a shell context's state pipe); -1: none
    const Cgroup* session_cgroup = nullptr;  ///< parent of the leaf
    /// The leaf, made ahead (a prepared session's first process: session_prepared.cpp); empty:
    /// made at start beneath session_cgroup.
    std::optional<Cgroup> leaf;
    /// A child already in that leaf and in the session's namespaces, waiting for its command
    /// (a prepared session's first process: launch_ahead.hpp); empty: launched as every process.
    std::shared_ptr<WaitingLaunch> waiting;
    std::vector<int> limit_join_fds;         ///< v1 `tasks` fds (hybrid limits)
    int holder_pidfd = -1;                   ///< namespaces to join, -1: none
    int namespace_flags = 0;
    const Confinement* confinement = nullptr;
    std::function<LimitEvents()> read_limit_events;  ///< session-wide counters; may be empty
    /// Posted when the leaf is removed. A watch on that leaf's cgroup.events may never fire: the
    /// kernel defers a notification that comes within 10 ms of the previous one, and removing
    /// the cgroup cancels the deferred one (a DELETE right after a spawn).
    std::function<void()> on_leaf_removed;
    /// A terminal process: its stdio is this pty's slave (closed here once launched); stdout
    /// reads the master, stdin writes it (issue 14). Null: pipes.
    std::shared_ptr<PtyPair> terminal;
    /// /proc starttime of the main process (pid_ref.hpp: with the pid it names the process for
    /// the journal); filled in at launch, or from the journal for an adopted process.
    uint64_t start_ticks = 0;
    /// The first of the session holder's slots that keep this process's output descriptors
    /// (stdout, stderr; a terminal's pty master alone), journalled so a restart takes them back.
    std::optional<int> held_slot;
};

/// The output descriptors of a process a previous run started, taken back from the session's
/// holder (isolation/descriptor_store.hpp): pipes' read ends, or a terminal's pty master.
struct ResumedOutput {
    UniqueFd stdout_fd;
    UniqueFd stderr_fd;
    UniqueFd pty_master;
    bool any() const { return stdout_fd.valid() || stderr_fd.valid() || pty_master.valid(); }
};

/// Ends a child started ahead that no launch took (launch_ahead.hpp): killed, and reaped here
/// once it is gone (within end_waiting_launch's moment), else handed to `reaper` (it is a child of
/// the launch worker's thread, which the orphan walk does not see). `waiting` is empty after.
void end_waiting_child(std::shared_ptr<WaitingLaunch>& waiting, ChildReaper& reaper);

/// A started process and its record.
class Process : public std::enable_shared_from_this<Process> {
  public:
    using FinishCallback = std::function<void(Process&)>;

    /// Creates the leaf cgroup and pipes and launches, without waiting for the child to reach
    /// execve (process_launch.cpp; wait_launched() tells when it has). A setup failure gives a
    /// record with reason setup-failed: final at once when the clone itself failed, once the
    /// child has exited when a step in it failed. An Error means the daemon could not even try.
    static Result<std::shared_ptr<Process>> start(boost::asio::io_context& io, ChildReaper& reaper,
                                                  ProcessSetup setup, FinishCallback on_finish);

    /// How a record restored from the journal ended.
    struct RestoredEnd {
        ExitReason reason = ExitReason::unknown;
        std::optional<int> exit_code;
        std::optional<int> signal;
        uint64_t duration_ms = 0;
        std::string error;
        std::string note;
    };
    /// Takes over a process a previous run of the daemon started whose leaf `leaf` still holds
    /// processes (process_adoption.cpp). `main` is its verified main process, or empty when only
    /// descendants are left. It is not our child and its pipes died with the old daemon: the
    /// record becomes final when the leaf is empty (cgroup.events populated 0), with status
    /// unknown and no exit code, unless this run killed it or its timeout (counted from its
    /// original start) did. Its timeout is armed here. With `resumed` output (the session's
    /// holder kept its pipes), reading goes on from them and the record also waits for their
    /// end; without, its output after the restart is lost.
    static std::shared_ptr<Process> adopt(boost::asio::io_context& io, ChildReaper& reaper,
                                          ProcessSetup setup,
                                          std::chrono::system_clock::time_point started_at,
                                          PidRef main, Cgroup leaf, FinishCallback on_finish,
                                          ResumedOutput resumed = {});
    /// A final record of a process of a previous run (its exit from the journal, or unknown).
    /// `resumed`: the output descriptors the session's holder kept of one that ended while the
    /// daemon was down; what is left in them is read into the record at once.
    static std::shared_ptr<Process> restore(boost::asio::io_context& io, ChildReaper& reaper,
                                            ProcessSetup setup,
                                            std::chrono::system_clock::time_point started_at,
                                            pid_t pid, RestoredEnd end, ResumedOutput resumed = {});
    ~Process();

    const std::string& id() const { return setup_.id; }
    /// The setup it was started with (the journal records it).
    const ProcessSetup& setup() const { return setup_; }
    /// The descriptors a session's holder should keep copies of: the stdout and stderr read
    /// ends, or a terminal's pty master. Empty once they are closed (or never opened).
    std::vector<int> output_descriptors();
    /// Records where the session's holder keeps them (nullopt: nowhere any more).
    void set_held_slot(std::optional<int> slot) { setup_.held_slot = slot; }
    /// True once the record is final (exit recorded, output complete or settled).
    bool finished() const { return finished_; }
    /// True while the main process has not exited.
    bool main_running() const { return launched_ && !main_status_ && !main_status_lost_; }
    /// Snapshot for the API. `read_usage` false leaves `usage` zero instead of reading the
    /// leaf's counters (a dozen files: what a `run` pays for nothing when only the id is used).
    ProcessInfo info(bool read_usage = true) const;

    /// Signals the main process (pidfd). ESRCH when the record is final.
    Status signal(int signal);
    /// cgroup.kill on the leaf: the process and its descendants. 0 when nothing is left.
    Result<size_t> kill();
    /// Stops the tree gracefully: SIGTERM to every process of the leaf, the grace period, then
    /// cgroup.kill (at once with `force`). Counts as killed by the API. Returns how many were
    /// signalled (0 when nothing is left).
    Result<size_t> stop(bool force);
    /// Sends `signal` to every process of the leaf. ESRCH when the leaf is empty.
    Result<size_t> signal_tree(int signal);
    /// Session end, first step: SIGTERM to the whole leaf; the ending counts as "killed".
    size_t terminate();
    /// Whether the leaf still holds processes (the main one or left-behind descendants).
    bool leaf_populated() const;
    /// The leaf cgroup (invalid once removed).
    const Cgroup& leaf() const { return leaf_; }
    /// Removes the leaf once it is empty (one rmdir, never a wait): EBUSY while it still holds
    /// processes.
    Status remove_leaf();
    /// The leaf removed if the kernel lets it be (nothing left in it): true when it is gone.
    bool remove_empty_leaf();
    /// Gives up the leaf without removing it (a session end whose kill bound passed with tasks
    /// stuck in the kernel): nothing waits for it later; start-up clean-up removes it.
    void leave_leaf();
    /// Daemon teardown (no event loop): reaps the main process, blocking, once it was killed, so
    /// a pid-namespace holder waiting for its namespace to be reaped can exit.
    void collect_exit_blocking();
    /// Cancels all I/O and timers (session teardown); pending waits fire as they stand.
    void shut_down();

    /// Up to `max` retained bytes of a stream from `offset`.
    OutputChunk read(OutputStream stream, uint64_t offset, size_t max) const;
    /// read() without copying: the bytes where the buffer keeps them (OutputView).
    OutputView view(OutputStream stream, uint64_t offset, size_t max) const;
    /// Bytes the record's output buffers hold allocated (stdout and stderr together).
    size_t output_memory() const {
        return reader(OutputStream::out).buffer.memory_used() +
               reader(OutputStream::err).buffer.memory_used();
    }
    /// A stream's first and last part (OutputBuffer::excerpt): what a `run` result carries.
    OutputBuffer::Excerpt excerpt(OutputStream stream) const {
        return reader(stream).buffer.excerpt();
    }
    /// Calls `handler` once when a stream grew past its offset or the record is final.
    std::shared_ptr<bool> wait_output(uint64_t stdout_offset, uint64_t stderr_offset,
                                      std::function<void()> handler);
    /// Calls `handler` once the launch has settled: the process has exec'd, or the record is
    /// final (a setup failure, or it died before execve). What a spawn answers with.
    std::shared_ptr<bool> wait_launched(std::function<void()> handler);
    /// True until the child has exec'd or the record is final.
    bool launching() const {
        return pending_launch_ && pending_launch_->report.valid() && !finished_;
    }
    /// Calls `handler(true)` when the record is final, `handler(false)` after `timeout`.
    std::shared_ptr<bool> wait_exit(std::optional<Millis> timeout,
                                    std::function<void(bool finished)> handler);
    /// Registers a live reader of the wanted streams, at the given offsets (see OutputFollower).
    std::shared_ptr<OutputFollower> follow(bool want_stdout, uint64_t stdout_offset,
                                           bool want_stderr, uint64_t stderr_offset);
    /// Sets the pty's window size (the foreground job gets SIGWINCH); ENOTTY for a non-terminal.
    Status resize_terminal(TerminalSize size);
    /// Queues bytes for stdin; closes it afterwards when `eof`.
    void write_stdin(std::string data, bool eof, std::function<void(Status)> handler);

  private:
    struct StreamReader {
        explicit StreamReader(boost::asio::io_context& io, size_t cap) : pipe(io), buffer(cap) {}
        boost::asio::posix::stream_descriptor pipe;
        OutputBuffer buffer;
        bool eof = true;      // until a pipe is attached
        bool paused = false;  // a follower has not had bytes the next read would drop
    };
    struct ExitWaiter {
        std::shared_ptr<bool> alive;
        std::function<void(bool)> handler;
        std::unique_ptr<boost::asio::steady_timer> timer;
        bool fired = false;
    };
    struct OutputWaiter {
        std::shared_ptr<bool> alive;
        uint64_t stdout_offset = 0;
        uint64_t stderr_offset = 0;
        std::function<void()> handler;
    };
    struct StdinWrite {
        std::string data;
        bool eof = false;
        std::function<void(Status)> handler;
    };

    Process(boost::asio::io_context& io, ChildReaper& reaper, ProcessSetup setup,
            FinishCallback on_finish);
    /// The spec every launch of this process starts from (launch_into_leaf, launch_on_terminal).
    LaunchSpec launch_spec();
    Status launch_into_leaf();
    Status launch_on_terminal();
    /// Launches `spec`: hands it to setup_.waiting's child when there is one, else (and when
    /// that child cannot take it, which is then ended first) from the launch worker.
    Result<PendingLaunch> launch_child(const LaunchSpec& spec);
    /// end_waiting_child() of setup_.waiting, when no launch took it.
    void end_unused_waiting();
    /// Makes a started launch this process's: its child is main_ (owned by the reaper), its
    /// report channel watched unless the child already exec'd (either launch_* above).
    void take_launch(PendingLaunch launch);
    void record_setup_failure(const Error& error);
    /// The leaf is gone or given up: stops watching it, drops the handle and posts
    /// on_leaf_removed (remove_leaf, remove_empty_leaf).
    void forget_leaf();

    // process_launch.cpp: the child's way to execve, watched on the loop (issue 12 item 1)
    void watch_launch();
    void on_launch_report();
    /// Reads what the report channel holds once the child has exited (it never waits then).
    void settle_launch_at_exit();
    void arm_launch_deadline();
    void arm_launch_timer();
    void launch_failed(const Error& error);
    void launch_settled();
    StreamReader& reader(OutputStream stream);
    const StreamReader& reader(OutputStream stream) const;

    // process_supervision.cpp
    void start_watching();
    void read_more(OutputStream stream);
    void watch_exit();
    void watch_lingering_leaf();
    /// Answers and counts the seccomp filter's refusals (isolation/seccomp_listener.hpp).
    void watch_refusals();
    void serve_refusals();
    // process_adoption.cpp
    void watch_adopted_leaf();
    void attach_resumed_output(ResumedOutput resumed);
    void drain_resumed_output(ResumedOutput resumed);
    void on_main_exit(std::optional<WaitStatus> status);
    void arm_settle();
    void arm_timeout();
    void on_timeout();
    void maybe_finish();
    void finish();
    /// SIGTERM to every process of the leaf that has not had it from us yet; returns how many.
    size_t terminate_leaf();
    size_t begin_graceful_end();
    void attribute_limit_events();
    ExitReason classify() const;
    void notify_output();
    void notify_exit();

    // output_follower.cpp
    friend class OutputFollower;
    /// How many bytes of `stream` may be read now without dropping any a follower has not had;
    /// SIZE_MAX when nobody follows it.
    size_t room_to_read(OutputStream stream);
    /// Reads again from streams paused for a follower that now has room.
    void resume_reading();
    bool reading_paused() const { return out_.paused || err_.paused; }
    void post(std::shared_ptr<bool> alive, std::function<void()> fn);

    // process_stdin.cpp
    void write_next_stdin();
    void close_stdin();

    boost::asio::io_context& io_;
    ChildReaper& reaper_;
    ProcessSetup setup_;
    FinishCallback on_finish_;

    Cgroup leaf_;
    PidRef main_;
    bool launched_ = false;
    StreamReader out_;
    StreamReader err_;
    boost::asio::posix::stream_descriptor stdin_pipe_;
    std::deque<StdinWrite> stdin_queue_;
    bool stdin_writing_ = false;
    bool stdin_eof_requested_ = false;
    std::vector<std::weak_ptr<OutputFollower>> followers_;
    boost::asio::posix::stream_descriptor exit_watch_;
    boost::asio::posix::stream_descriptor leaf_watch_;  ///< cgroup.events of a lingering leaf
    /// Counts the filter's refusals while any process of the tree runs; null without a filter.
    std::unique_ptr<SeccompRefusals> refusals_;
    boost::asio::posix::stream_descriptor refusal_watch_;  ///< a duplicate of its listener
    boost::asio::steady_timer timeout_timer_;
    boost::asio::steady_timer grace_timer_;
    boost::asio::steady_timer settle_timer_;

    std::optional<WaitStatus> main_status_;
    bool main_status_lost_ = false;  // someone else reaped it (should not happen)
    bool finished_ = false;
    bool timed_out_ = false;
    bool leaf_killed_ = false;  ///< cgroup.kill sent to the whole leaf: nothing in it survives
    bool killed_by_request_ = false;
    bool terminating_ = false;          ///< SIGTERM sent to the leaf (session end, timeout)
    std::vector<pid_t> terminated_;     ///< who got it, so a second round skips them
    std::optional<ExitReason> reason_;
    std::string setup_error_;
    std::optional<int> setup_exit_code_;  ///< 127/126 when execve failed, as a shell reports it
    LimitEvents events_at_start_;
    ResourceUsage final_usage_;
    std::chrono::system_clock::time_point started_wall_;
    std::chrono::steady_clock::time_point started_;
    std::optional<std::chrono::steady_clock::time_point> ended_;

    bool adopted_ = false;  ///< started by a previous run of the daemon (process_adoption.cpp)
    bool output_resumed_ = false;  ///< adopted with the pipes the session's holder kept
    std::optional<RestoredEnd> restored_;
    pid_t restored_pid_ = -1;

    /// The launch until the child has exec'd (or failed): its report channel, watched through
    /// a duplicate, and the deadline of a child that makes no progress towards execve.
    std::optional<PendingLaunch> pending_launch_;
    boost::asio::posix::stream_descriptor launch_watch_;
    boost::asio::steady_timer launch_timer_;
    SetupDeadline launch_deadline_;
    /// The CPU time of the child started ahead that this launch took (launch_ahead.hpp), read
    /// while it waited: its setup deadline starts from it.
    std::optional<uint64_t> waiting_cpu_ns_;
    std::vector<std::pair<std::shared_ptr<bool>, std::function<void()>>> launch_waiters_;

    std::vector<std::shared_ptr<ExitWaiter>> exit_waiters_;
    std::vector<OutputWaiter> output_waiters_;
};

}  // namespace corral
