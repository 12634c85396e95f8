#pragma once
// The session manager of corrald: the registry of sessions and everything a session is (policy,
// cgroups, namespaces, processes, output, ports, files, tokens) — with no HTTP in it.
//
// Threading: one boost::asio::io_context thread. Every method must be called on that thread, and
// every completion handler runs on it, always posted (never invoked inline from the call that
// registered it), so a caller may register a handler while holding its own state.
//
// Errors: Error::code carries an errno the HTTP layer can map:
//   ENOENT  unknown session / process / port     EINVAL  bad request (policy diagnostics, argv...)
//   EEXIST  session id taken                     ESHUTDOWN  session is ending or ended
//   EACCES  token invalid or lacks rights        EBUSY   resource exhausted (ports, sessions)
//   ESRCH   process already finished             EIDRM   process record dropped (cap)
//   other   system failure (5xx)
//
// Cgroup layout (DESIGN.md): <v2_own>/<instance>/sessions/<sid>/holder (namespace holder) and
// <v2_own>/<instance>/sessions/<sid>/p<N> (one leaf per process: killing it ends the process and
// all its descendants, reparented ones included).

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/asio.hpp"
#include "base/error.hpp"
#include "isolation/cgroup.hpp"
#include "sessions/contexts/code_context_types.hpp"
#include "sessions/output_buffer.hpp"
#include "sessions/output_follower.hpp"
#include "sessions/recovery/journal.hpp"
#include "sessions/recovery/journal_records.hpp"
#include "sessions/recovery/recovery.hpp"
#include "sessions/session_types.hpp"

namespace corral {

class FileService;
class SessionDirectoryStock;
struct FileTarget;
class LimitBackend;
class Process;
class Session;
class PortPool;
class ChildReaper;
class SessionJournal;
struct SessionContext;
class TreeRemover;

/// Daemon-wide settings of the manager.
struct SessionManagerConfig {
    std::string state_dir = "/var/lib/corral";  ///< sessions live in <state_dir>/sessions/<sid>
    std::string policy_dir;                     ///< named policies: <policy_dir>/<name>.yaml
    std::string instance_name = "corral";       ///< cgroup <v2_own>/<instance_name>
    uint16_t port_first = 40000;                ///< leased loopback port range, inclusive
    uint16_t port_last = 40999;
    std::string port_host = "127.0.0.1";               ///< host part of endpoint URLs
    size_t max_sessions = 1024;                        ///< creation beyond this fails with EBUSY
    std::chrono::milliseconds ended_retention{60000};  ///< ended sessions stay readable this long
    size_t max_tombstones = 4096;               ///< ended-session records kept for "already ended"
    /// Finished process records each session keeps (oldest dropped first; their ids then
    /// answer EIDRM, HTTP 410): a long-lived session's memory and GET stay bounded.
    size_t max_finished_processes = 256;
    bool move_self_to_supervisor_leaf = false;  ///< corrald: move into <instance>/supervisor
    bool set_child_subreaper = true;            ///< PR_SET_CHILD_SUBREAPER + orphan reaping
    /// Host paths no session with a mount namespace may see, besides state_dir (which is always
    /// hidden): corrald puts its socket's directory here.
    std::vector<std::string> hidden_from_sessions;
    /// Host directories beneath which a session may work in an existing directory
    /// (POST /v1/sessions {workdir}; corrald --allow-workdir). Empty: none may.
    std::vector<std::string> workdir_roots;
    /// The egress proxies' hosts override (--egress-hosts-file) and where refusals are logged.
    EgressEnvironment egress;
    /// Keep the journal <state_dir>/journal (recovery/session_journal.hpp), so a restart can
    /// re-adopt.
    bool journal = false;
    /// On start, re-adopt journalled sessions whose cgroup still holds processes (false: end
    /// everything a previous run left, `corrald --recover=reap`).
    bool adopt_sessions = true;
    /// Sessions' holders keep their processes' output pipes (and ptys), so output written while
    /// the daemon is down is read after its restart (isolation/descriptor_store.hpp; needs the
    /// journal). Costs a keeper process per session without namespaces (corrald --keep-output).
    bool keep_output = false;
    JournalSync journal_sync = JournalSync::none;
    uint64_t journal_compact_at = 1u << 20;  ///< compact once the file is this large (and 2x)
    /// Where journal failures and recovery notes go (corrald: its log); may be empty.
    std::function<void(const std::string&)> log;
    /// corrald --prepare POLICY=N (issue 18): sessions of each named policy (a preset or a file
    /// of the policy dir) kept prepared, for creations that ask for nothing else
    /// (session_manager_prepared.cpp). Empty: none.
    std::map<std::string, size_t> prepared;
};

/// One policy's prepared sessions (GET /v1/health).
struct PreparedPoolInfo {
    size_t target = 0;     ///< --prepare POLICY=N
    size_t ready = 0;      ///< prepared and waiting for a claim
    size_t preparing = 0;  ///< being prepared now
};

/// What start-up took over from a previous run (session_manager_recovery.cpp).
struct AdoptionReport {
    std::vector<std::string> adopted;   ///< sessions re-adopted, with their processes
    size_t running_processes = 0;       ///< processes of those that still run
    std::vector<std::string> refused;   ///< "sid: why" for journalled sessions not taken
    std::vector<std::string> notes;     ///< what the journal and adoption ignored, and why
};

/// Cancels a pending wait when destroyed or reset (e.g. the HTTP client went away). Movable.
class WaitHandle {
  public:
    WaitHandle() = default;
    explicit WaitHandle(std::shared_ptr<bool> alive) : alive_(std::move(alive)) {}
    WaitHandle(WaitHandle&&) noexcept = default;
    WaitHandle& operator=(WaitHandle&& other) noexcept {
        reset();
        alive_ = std::move(other.alive_);
        return *this;
    }
    ~WaitHandle() { reset(); }
    /// Cancels: the handler will not be called.
    void reset() {
        if (alive_) *alive_ = false;
        alive_.reset();
    }

  private:
    std::shared_ptr<bool> alive_;
};

/// The registry of sessions. One per daemon.
class SessionManager {
  public:
    using CreateHandler = std::function<void(Result<CreatedSession>)>;
    using EndHandler = std::function<void(Result<EndSessionReport>)>;
    /// `finished` is false when the wait timed out while the process still runs.
    using WaitHandler = std::function<void(Result<ProcessInfo> info, bool finished)>;
    /// Called once when output beyond the given offsets exists, or the record is final (both
    /// streams at EOF and exit recorded), or with an error when the process is gone.
    using OutputHandler = std::function<void(Status)>;
    using StatusHandler = std::function<void(Status)>;

    /// Sets up the instance cgroup (<v2_own>/<instance>/sessions), the state dir, the port pool,
    /// the child subreaper and the SIGCHLD orphan reaper on `io`.
    static Result<std::unique_ptr<SessionManager>> create(boost::asio::io_context& io,
                                                          SessionManagerConfig config,
                                                          CgroupHost host);
    /// Hard-stops every remaining session (kill, wait bounded, remove) and the instance cgroup.
    ~SessionManager();
    SessionManager(const SessionManager&) = delete;
    SessionManager& operator=(const SessionManager&) = delete;

    // --- sessions ------------------------------------------------------------------------------

    /// Creates a session; synchronous: it waits for the namespace holder's setup with a blocking
    /// wait (up to the setup limit, setup_deadline.hpp), so it is for callers without an event
    /// loop to keep serving (tests, tools). Any failure rolls back what was created.
    Result<CreatedSession> create_session(const CreateSessionRequest& request);
    /// create_session for the event loop (issue 12 item 1): nothing waits for the holder's setup
    /// (Session::await_ready). Until it is ready the session is not listed nor reachable (ENOENT
    /// "still being created"), and its id is reserved (EEXIST). `handler` runs (posted) with the
    /// session once it is active and journalled, or with the error naming the failed step once
    /// everything the creation made is gone again. A shutdown fails the creations under way.
    void async_create_session(const CreateSessionRequest& request, CreateHandler handler);
    /// The client has the answer of its creation of `sid`: what a claimed prepared session left
    /// for after it (its marker's removal, Session::settle_claim) is done once clients pause,
    /// with the refill the claim asked for (session_manager_prepared.cpp).
    void creation_answered(const std::string& sid);
    /// Active and ending sessions (not ended ones); with `only`, that one session if it is
    /// among them (a session token's listing builds no other session's record: a record reads
    /// the session's cgroup and processes).
    std::vector<SessionInfo> list_sessions(const std::optional<std::string>& only = std::nullopt);
    /// How many sessions list_sessions() lists, without building their records (GET /v1/health:
    /// 25 ms beside 1,000 sessions when it listed them).
    size_t session_count() const;
    /// A client's request arrived (Api::handle): prepared sessions are refilled when requests
    /// have paused (session_manager_prepared.cpp), not while a client is being served.
    void note_client_request() { last_client_request_ = std::chrono::steady_clock::now(); }
    /// One session, including ended ones still remembered (state "ended").
    Result<SessionInfo> get_session(const std::string& sid);
    /// Whether `sid` names a live or recently ended session; a live one counts this as activity
    /// (idle timeout), like get_session, without building its record (which lists every process).
    bool knows_session(const std::string& sid);
    /// Whether `sid` names a session still being created (async_create_session): it is not known
    /// yet, and its id is taken.
    bool is_starting(const std::string& sid) const { return starting_.count(sid) != 0; }
    /// Sessions being created (async_create_session), which list_sessions() does not list yet.
    size_t starting_count() const { return starting_.size(); }
    /// Prepared sessions ready to be claimed, all pools together (never listed, never counted as
    /// sessions by the API).
    size_t prepared_count() const;
    /// Each --prepare policy's pool.
    std::map<std::string, PreparedPoolInfo> prepared_pools() const;
    /// SIGTERM to everything, grace (policy timeouts.grace, a timer), cgroup.kill, wait for
    /// populated 0 on the loop, stop the namespaces, release ports, remove cgroups and the state
    /// dir. Ending an ending/ended session reports already_ended. Unknown sid: ENOENT.
    /// `reason` becomes the session's endReason.
    void end_session(const std::string& sid, EndHandler handler, std::string reason = "api");
    /// Sets/unsets session env variables for later commands; returns the new session env.
    Result<std::map<std::string, std::string>> patch_env(const std::string& sid,
                                                         const EnvPatch& patch);
    /// Replaces an isolated session's egress rules (PATCH .../network) for its new connections;
    /// returns the egress record. EINVAL for a bad entry, ENOTSUP for a host-network session.
    Result<EgressInfo> set_egress(const std::string& sid, const EgressSpec& spec);
    /// Ends every session (daemon shutdown); `done` runs when all are gone.
    void shutdown(std::function<void()> done);

    // --- processes -----------------------------------------------------------------------------

    /// Starts a process in its own leaf cgroup. A setup failure is not an Error: the record
    /// becomes final with reason setup-failed and `error` set. The child may not have reached
    /// execve when this returns (its record says running); the failure comes on the loop, never
    /// waited for here (process_launch.cpp): async_start_process answers once it has settled.
    /// Errors are for bad requests and a session that cannot take processes.
    Result<ProcessInfo> start_process(const std::string& sid, const ProcessRequest& request);
    /// All processes of a session, in start order.
    Result<std::vector<ProcessInfo>> list_processes(const std::string& sid);
    /// One process record.
    Result<ProcessInfo> get_process(const std::string& sid, const std::string& proc);
    /// Sends a signal to the process itself (through its pidfd), as `kill PID` would; its
    /// descendants are not signalled (use kill_process for the whole tree).
    /// ESRCH when the record is already final.
    Status signal_process(const std::string& sid, const std::string& proc, int signal);
    /// cgroup.kill on the process's leaf: it and all its descendants, nothing else. The record
    /// becomes final (reason killed) asynchronously; wait for it with async_wait_process.
    /// Killing a finished process is not an error (returns 0).
    Result<size_t> kill_process(const std::string& sid, const std::string& proc);
    /// Graceful stop of the process's tree: SIGTERM to every process of its leaf, the policy's
    /// grace period, then cgroup.kill (`force`: cgroup.kill at once). Stopping a finished process
    /// is not an error (returns 0). Defined in session_manager_stops.cpp, like the two below.
    Result<size_t> stop_process(const std::string& sid, const std::string& proc, bool force);
    /// `signal` to every process of the process's leaf (ESRCH when it is empty).
    Result<size_t> signal_process_tree(const std::string& sid, const std::string& proc,
                                       int signal);
    /// cgroup.kill on every process of the session that still runs; returns their ids.
    Result<std::vector<std::string>> kill_all_processes(const std::string& sid);
    /// Waits until the record is final or `timeout` (nullopt = no limit) passes.
    WaitHandle async_wait_process(const std::string& sid, const std::string& proc,
                                  std::optional<Millis> timeout, WaitHandler handler);

    /// What async_start_process answers with: the record once the launch settled, and the hold
    /// on its output when the start asked for one.
    struct StartedProcess {
        ProcessInfo info;  ///< its `usage` is not read (zero): answer with get_process's

        /// Follows both streams from offset 0, taken before the pipes were first read; null
        /// unless asked for.
        std::shared_ptr<OutputFollower> follower;
    };
    using StartHandler = std::function<void(Result<StartedProcess>)>;
    /// start_process for callers that can wait: with request.shell the command starts once the
    /// commands queued before it in that shell context are done. `handler` runs (posted) with the
    /// record once the child has exec'd or its record is final (a setup failure), or with the
    /// error; resetting the handle drops a command still queued. With `follow_output` the start
    /// holds every byte of the output from offset 0 for a stream that must see them all (exec):
    /// its reader comes only turns of the loop after the launch settled, and a fast writer's
    /// output read meanwhile beyond the cap would be dropped before it could hold it back.
    WaitHandle async_start_process(const std::string& sid, const ProcessRequest& request,
                                   StartHandler handler, bool follow_output = false);

    // --- shell contexts (session_manager_shells.cpp) ---------------------------------------

    /// Creates a shell context (EEXIST id taken, ENOTSUP no bash in the sandbox).
    Result<ShellInfo> create_shell(const std::string& sid, const ShellRequest& request);
    /// The session's shell contexts / one of them (ENOENT).
    Result<std::vector<ShellInfo>> list_shells(const std::string& sid);
    Result<ShellInfo> get_shell(const std::string& sid, const std::string& shell);
    /// Deletes a context: queued commands fail, the running one is killed.
    Status delete_shell(const std::string& sid, const std::string& shell);

    // --- code contexts (session_manager_contexts.cpp) ------------------------------------------

    using ContextHandler = std::function<void(Result<CodeContextInfo>)>;
    using CodeEventHandler = std::function<void(const CodeRunEvent&)>;
    /// Starts a code context; `handler` runs (posted) once its interpreter is ready, or with why
    /// not (ENOPKG: the sandbox has no such interpreter, or it died before it was ready).
    WaitHandle create_context(const std::string& sid, const CodeContextRequest& request,
                              ContextHandler handler);
    /// The session's code contexts / one of them (ENOENT).
    Result<std::vector<CodeContextInfo>> list_contexts(const std::string& sid);
    Result<CodeContextInfo> get_context(const std::string& sid, const std::string& ctx);
    /// Kills a context's interpreter and forgets the context.
    Status delete_context(const std::string& sid, const std::string& ctx);
    /// A queued run: its id in its context, and the handle whose reset drops it from the queue
    /// (or mutes it once running).
    struct CodeRunTicket {
        uint64_t run = 0;
        WaitHandle handle;
    };
    /// Queues a run in a context; `handler` gets its events (the last is `end`) once its turn
    /// came. EOWNERDEAD when the context is dead.
    Result<CodeRunTicket> run_code(const std::string& sid, const std::string& ctx,
                                   CodeRunRequest request, CodeEventHandler handler);
    /// Interrupts run `run` of a context if it is the one running (SIGINT; it ends as
    /// "interrupted" and the context keeps its state).
    Status interrupt_code(const std::string& sid, const std::string& ctx, uint64_t run);

    // --- output --------------------------------------------------------------------------------

    /// Up to `max_bytes` of kept output from `offset`. Never blocks.
    Result<OutputChunk> read_output(const std::string& sid, const std::string& proc,
                                    OutputStream stream, uint64_t offset,
                                    size_t max_bytes = 1 << 20);
    /// read_output without copying the bytes (OutputView: use them before the loop runs on).
    Result<OutputView> view_output(const std::string& sid, const std::string& proc,
                                   OutputStream stream, uint64_t offset, size_t max_bytes);
    /// A stream's head and tail (all of it when under the cap): a `run` result's stdout/stderr.
    Result<OutputBuffer::Excerpt> output_excerpt(const std::string& sid, const std::string& proc,
                                                 OutputStream stream);
    /// Calls `handler` once when stdout grew past `stdout_offset` or stderr past `stderr_offset`,
    /// or the record is final — immediately (posted) if that is already true. For NDJSON
    /// streaming: read everything available, then wait again; stop after a wait that finds the
    /// record final and nothing left to read.
    WaitHandle async_wait_output(const std::string& sid, const std::string& proc,
                                 uint64_t stdout_offset, uint64_t stderr_offset,
                                 OutputHandler handler);
    /// A live reader's hold on the output (OutputFollower in process.hpp): while it lives, output
    /// it has not had is never dropped; the process waits on its pipe instead. Advance it as bytes
    /// reach the client; drop it when the stream ends.
    Result<std::shared_ptr<OutputFollower>> follow_output(const std::string& sid,
                                                          const std::string& proc, bool want_stdout,
                                                          uint64_t stdout_offset, bool want_stderr,
                                                          uint64_t stderr_offset);

    // --- stdin ---------------------------------------------------------------------------------

    /// Writes `data` to the process's stdin (queued, written as the pipe drains) and closes it
    /// afterwards when `eof`. The handler runs when all of `data` is written (or failed: EPIPE
    /// when the process closed its end, EBADF when stdin is not open).
    void write_stdin(const std::string& sid, const std::string& proc, std::string data, bool eof,
                     StatusHandler handler);

    /// Sets a terminal process's window size (ENOTTY when it is not a terminal).
    Status resize_terminal(const std::string& sid, const std::string& proc, TerminalSize size);

    // --- ports ---------------------------------------------------------------------------------

    /// Leases one more loopback port to the session (EBUSY when the pool is exhausted).
    Result<PortLeaseInfo> lease_port(const std::string& sid);
    /// The session's leased ports.
    Result<std::vector<PortLeaseInfo>> list_ports(const std::string& sid);
    /// Returns a port to the pool (ENOENT when the session does not hold it).
    Status release_port(const std::string& sid, uint16_t port);
    /// "http://127.0.0.1:PORT" or "ws://127.0.0.1:PORT" (protocol "http" or "ws", else EINVAL).
    Result<std::string> port_endpoint(const std::string& sid, uint16_t port,
                                      std::string_view protocol);
    /// Calls `handler` once something in the session accepts TCP connections on leased `port`
    /// (inside its network namespace when isolated): ok; ETIMEDOUT naming the port after
    /// `timeout`; ENOENT for an unknown session or port; ESHUTDOWN when the session ends first.
    /// Defined in session_manager_ports.cpp.
    WaitHandle async_wait_port(const std::string& sid, uint16_t port, Millis timeout,
                               StatusHandler handler);
    /// Calls `handler` (posted) once session `sid` has ended and its processes are gone — at once
    /// when it already has (ESHUTDOWN) or is unknown (ENOENT). For streams that must end with it
    /// (files/watch).
    WaitHandle async_wait_session_end(const std::string& sid, StatusHandler handler);

    // --- files and tokens ----------------------------------------------------------------------

    /// The session's file service (rooted at its working directory). The shared_ptr stays valid
    /// after the session ends (operations then fail), so a streamed upload may hold it.
    Result<std::shared_ptr<FileService>> files(const std::string& sid);
    /// Where a file-API path lands (path_space.hpp): the service and the normalized path.
    /// Relative paths resolve against shell context `shell`'s cwd, or the session's ("").
    Result<FileTarget> file_target(const std::string& sid, std::string_view path,
                                   const std::string& shell);
    /// Which session and rights a bearer token grants (constant-time compare). EACCES if none.
    Result<TokenGrant> check_token(std::string_view token);

    /// Counts as API activity for the idle timeout (the manager's own calls already do).
    void touch(const std::string& sid);
    /// The cgroup host this manager was built with (for health output).
    const CgroupHost& cgroup_host() const { return host_; }
    /// <v2_own>/<instance>/sessions.
    const std::string& sessions_cgroup_path() const;
    /// The config in use.
    const SessionManagerConfig& config() const { return config_; }
    /// Connections the egress proxies of all sessions refused since this manager started.
    uint64_t egress_refused_total() const { return *config_.egress.refused_total; }
    /// What start-up found of a previous run of this instance and removed (recovery/recovery.hpp).
    const LeftoverReport& leftovers() const { return leftovers_; }
    /// What start-up re-adopted from the journal, and what it refused.
    const AdoptionReport& adoption() const { return adoption_; }
    /// The journal's size now (0 without one).
    uint64_t journal_size() const;

    /// Internal: use create().
    SessionManager(boost::asio::io_context& io, SessionManagerConfig config, CgroupHost host);

  private:
    struct Tombstone;
    /// A prepared session and the policy as it was resolved when it was prepared (before the
    /// daemon's paths were hidden), compared with the request's at claim.
    struct PreparedSession {
        std::shared_ptr<Session> session;
        Policy resolved;
    };
    struct PreparedPool {
        size_t target = 0;
        std::deque<PreparedSession> ready;
        std::map<std::string, PreparedSession> preparing;  ///< by id
    };
    /// Live sessions a client may count: starting, active and ending (not prepared ones).
    size_t live_count() const;
    /// Puts a created, claimed or adopted session in the registry (sessions_).
    void register_session(const std::string& sid, std::shared_ptr<Session> session);
    /// EBUSY when a client's creation would pass max_sessions.
    Status check_room() const;
    // session_manager_prepared.cpp
    bool is_prepared(const std::string& sid) const;
    size_t prepared_total() const;
    /// A prepared session for `request`, out of its pool, or null: the request names something a
    /// holder's setup decides, the pool is empty, or the policy changed (those are discarded).
    std::shared_ptr<Session> take_prepared(const CreateSessionRequest& request);
    /// Ends a prepared session nobody will get; `done` (may be empty) once it has ended.
    void discard_prepared(std::shared_ptr<Session> session, std::string reason,
                          std::function<void()> done = {});
    /// Prepared sessions never make a client's creation fail: at the limit, one goes.
    void make_room_for_client();
    void schedule_refill(Millis delay);
    /// The refill timer fired: refills now if clients have paused or the refill waited long
    /// enough, else waits again.
    void refill_when_quiet();
    /// Settles claims_to_settle_ (Session::settle_claim) of sessions still there.
    void settle_claims();
    /// A session ended: a pool that waited for room may refill.
    void refill_after_end();
    void refill_pools();
    void prepare_one(const std::string& policy_name, PreparedPool& pool);
    /// Ends every prepared session (shutdown); `one_done` runs once per session as it ends:
    /// prepared_total() + discarding_.size() times, as they were before the call.
    void end_prepared(const std::function<void()>& one_done);
    Status initialize();
    Result<std::string> new_session_id(const std::string& requested);
    /// The checks and resolutions both creations share: room, the id, the policy, the workdir.
    Result<std::string> prepare_creation(const CreateSessionRequest& request, Policy& policy,
                                         CreateSessionRequest& resolved);
    CreatedSession created_record(const Session& session) const;
    /// ENOENT for `sid`, saying so when it is still being created.
    Error unknown_session(const std::string& sid) const;
    Result<std::shared_ptr<Session>> find_active(const std::string& sid);
    Result<std::shared_ptr<Session>> find_any(const std::string& sid);
    /// A process of a session in any state (its output outlives the session's activity).
    Result<std::shared_ptr<Process>> find_process(const std::string& sid, const std::string& proc);
    void on_session_ended(const std::string& sid);
    void remember_tombstone(const SessionInfo& info, bool reusable = false);
    /// Tombstones for the sessions a previous run left (ended: "daemon-restart"), but for those
    /// in `never_claimed` (prepared sessions no client had).
    void remember_reaped_sessions(const std::set<std::string>& never_claimed);
    /// The ids of prepared sessions a previous run left unclaimed (their marker is there).
    static std::set<std::string> prepared_leftovers(const std::string& state_dir);
    /// Adds the daemon's state dir and hidden_from_sessions to the policy's hidden paths.
    void hide_daemon_paths(Policy& policy) const;
    SessionContext session_context();
    // session_manager_recovery.cpp
    /// Reads and replays the journal; the sessions whose cgroup still holds processes are
    /// returned for adoption (all of them, or none with adopt_sessions false).
    std::map<std::string, JournalSession> read_journalled_sessions(
        const std::string& sessions_cgroup, uint64_t& valid_bytes, std::set<std::string>& known);
    Status open_journal(uint64_t valid_bytes);
    void adopt_sessions(std::map<std::string, JournalSession> sessions,
                        const LeftoverScope& scope);
    std::vector<nlohmann::json> journal_snapshot_records() const;
    /// Gives the directories start-up clean-up discarded to the remover.
    void remove_discarded_leftovers();

    boost::asio::io_context& io_;
    SessionManagerConfig config_;
    CgroupHost host_;
    InstanceClaim claim_;  ///< held for our lifetime: no second daemon reaps what we run
    LeftoverReport leftovers_;
    AdoptionReport adoption_;
    Cgroup instance_cgroup_;    ///< <v2_own>/<instance>
    Cgroup sessions_cgroup_;    ///< <v2_own>/<instance>/sessions
    Cgroup supervisor_cgroup_;  ///< <v2_own>/<instance>/supervisor (when we moved ourselves)
    std::unique_ptr<PortPool> ports_;
    std::unique_ptr<LimitBackend> limits_;
    std::unique_ptr<ChildReaper> reaper_;
    /// Deletes ended sessions' directories (and those a previous run left) off the loop; before
    /// sessions_, which hand it their directories as they die.
    std::unique_ptr<TreeRemover> remover_;
    /// Session directories made ahead on a thread of its own (issue 18): after remover_, so it
    /// is gone (its spares removed) before the remover is.
    std::unique_ptr<SessionDirectoryStock> directory_stock_;
    std::unique_ptr<SessionJournal> journal_;  ///< before sessions_: they append while they die
    std::map<std::string, std::shared_ptr<Session>> sessions_;  ///< active, ending, recently ended
    /// How many of sessions_ have ended (counted as they end, register_session, forgotten at the
    /// retention's end): live_count() without a walk over every session on each creation (beside
    /// 1,000 sessions a walk was ~0.15 ms, and a creation took up to three; issue 18).
    size_t ended_registered_ = 0;
    /// Sessions whose holder has not reported its setup yet (async_create_session): their ids are
    /// taken, nothing else of them is reachable.
    std::map<std::string, std::shared_ptr<Session>> starting_;
    std::map<std::string, std::shared_ptr<boost::asio::steady_timer>> retention_timers_;
    std::map<std::string, std::unique_ptr<Tombstone>> tombstones_;
    std::vector<std::string> tombstone_order_;
    /// async_wait_session_end's handlers by session, each with its WaitHandle's alive flag.
    std::map<std::string, std::vector<std::pair<std::shared_ptr<bool>, StatusHandler>>>
        end_waiters_;
    /// --prepare pools by policy name, prepared sessions being discarded (until they ended), the
    /// refill's timer (refills never run on a creation's path).
    std::map<std::string, PreparedPool> pools_;
    std::map<std::string, std::shared_ptr<Session>> discarding_;
    std::unique_ptr<boost::asio::steady_timer> refill_timer_;
    bool refill_armed_ = false;
    /// When the refill now pending was first asked for (refill_when_quiet's upper bound).
    std::optional<std::chrono::steady_clock::time_point> refill_wanted_since_;
    std::chrono::steady_clock::time_point last_client_request_{};
    /// Claimed sessions whose creation was answered and whose claim is not settled yet.
    std::vector<std::string> claims_to_settle_;
    bool shutting_down_ = false;
    std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace corral
