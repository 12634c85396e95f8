#pragma once
// One session: a policy, a working directory, a cgroup subtree, namespaces held by a holder
// process, limits, leased ports, tokens, and its processes. Internal to sessions/; the manager
// owns sessions and is the only caller.
//
// Construction (Session::create) is all-or-nothing: each resource is an RAII member, so returning
// an error half-way destroys what was made (holder killed, cgroups killed and removed, ports
// released, the state directory removed).

#include <chrono>
#include <functional>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/asio.hpp"
#include "base/error.hpp"
#include "isolation/cgroup.hpp"
#include "isolation/confinement.hpp"
#include "isolation/limits.hpp"
#include "isolation/mount_plan.hpp"
#include "isolation/sandbox.hpp"
#include "isolation/setup_deadline.hpp"
#include "policies/policy.hpp"
#include "sessions/session_workdir.hpp"
#include "sessions/files/file_service.hpp"
#include "sessions/files/path_space.hpp"
#include "sessions/network/egress_gate.hpp"
#include "sessions/network/port_pool.hpp"
#include "sessions/network/port_waiter.hpp"
#include "sessions/contexts/code_context.hpp"
#include "sessions/recovery/journal_records.hpp"
#include "sessions/process.hpp"
#include "sessions/session_types.hpp"
#include "sessions/shell_context.hpp"

namespace corral {

class ChildReaper;
class SessionJournal;
class SessionNetwork;
class SessionDirectoryStock;
class TreeRemover;
struct NetworkLeftovers;

/// The file a prepared session keeps in <state>/sessions/<sid>/ from its directory's creation
/// until it is claimed (Session::start with `prepared`).
inline constexpr const char* kPreparedMarker = ".prepared";

/// What a session needs from the daemon, passed explicitly (no globals).
struct SessionContext {
    boost::asio::io_context& io;
    ChildReaper& reaper;
    PortPool& ports;
    LimitBackend& limits;
    const Cgroup& sessions_cgroup;  ///< <v2_own>/<instance>/sessions
    std::string sessions_dir;       ///< <state_dir>/sessions
    std::string instance_name;
    std::string port_host;
    size_t max_finished_processes = 256;  ///< finished records kept; older ones answer EIDRM
    EgressEnvironment egress;  ///< hosts override and refusal log of the egress proxy
    SessionJournal* journal = nullptr;    ///< where changes are recorded first (none: nowhere)
    /// The session's holder keeps its processes' output descriptors, so output written while the
    /// daemon is down is not lost (isolation/descriptor_store.hpp; corrald --keep-output).
    bool keep_output = false;
    /// Deletes ended sessions' directories off the event loop (none: deleted where they end).
    TreeRemover* remover = nullptr;
    /// Session directories made ahead, off the event loop (none: each made where it is needed).
    SessionDirectoryStock* directory_stock = nullptr;
};

/// The session's own directory on disk: removed (after unmounting a sized workdir) on destruction,
/// off the event loop when a TreeRemover is given (base/tree_removal.hpp).
class SessionDirectory {
  public:
    SessionDirectory() = default;
    SessionDirectory(SessionDirectory&& other) noexcept;
    SessionDirectory& operator=(SessionDirectory&& other) noexcept;
    ~SessionDirectory();
    /// Creates <sessions_dir>/<sid>/root, taken from `stock` where it has a spare; with `size`,
    /// mounts a tmpfs of that size on root. `prepared`: with kPreparedMarker in <sid>/.
    static Result<SessionDirectory> create(const std::string& sessions_dir, const std::string& sid,
                                           std::optional<uint64_t> size,
                                           TreeRemover* remover = nullptr,
                                           SessionDirectoryStock* stock = nullptr,
                                           bool prepared = false);
    /// Takes over the directory a previous run of the daemon made (and its corral-workdir tmpfs).
    static Result<SessionDirectory> adopt(const std::string& sessions_dir, const std::string& sid,
                                          TreeRemover* remover = nullptr);
    const std::string& root() const { return root_; }
    /// Gives <sid> and its root to the session's host identity (both stay 0700/0755), so the
    /// sandbox can write its workspace and no other host user can reach what it plants there.
    Status hand_to(uid_t uid, gid_t gid);
    /// Unmounts and removes everything (idempotent); with a remover, the directory is renamed
    /// out of the way here and deleted on the remover's thread.
    Status remove();

  private:
    std::string dir_;
    std::string root_;
    bool mounted_ = false;
    TreeRemover* remover_ = nullptr;
};

/// One session.
class Session : public std::enable_shared_from_this<Session> {
  public:
    using EndHandler = std::function<void(Result<EndSessionReport>)>;
    /// Called once the session has ended (timer-initiated endings included).
    using EndedCallback = std::function<void(Session&)>;

    /// Builds everything; `policy` is already resolved. Waits for the namespace holder's setup
    /// with a blocking wait (within kSetupReportLimit): for callers without an event loop. corrald
    /// uses start() and await_ready().
    static Result<std::shared_ptr<Session>> create(SessionContext context, std::string id,
                                                   Policy policy,
                                                   const CreateSessionRequest& request,
                                                   EndedCallback on_ended);
    /// create() for an event loop (issue 12 item 1): builds up to starting the namespace holder
    /// and returns a session in state `starting`, which takes no work; await_ready() does the
    /// rest. An error means nothing is left.
    /// `prepared`: a session for the manager's pool, nobody's until claim() (its directory
    /// carries kPreparedMarker from the start).
    static Result<std::shared_ptr<Session>> start(SessionContext context, std::string id,
                                                  Policy policy,
                                                  const CreateSessionRequest& request,
                                                  EndedCallback on_ended, bool prepared = false);
    using ReadyHandler = std::function<void(Status)>;
    /// Watches the holder's setup report on the loop (its SetupDeadline on a timer), then builds
    /// the rest and journals the session: `ready` gets ok with the session active. On a failure,
    /// or when the holder makes no progress for a whole limit, everything made so far is ended
    /// on the loop (holder killed through its pidfd and its exit awaited there, cgroups, ports and
    /// the directory removed) and `ready` gets the error naming the step once nothing is left.
    /// `ready` never runs inside this call.
    void await_ready(ReadyHandler ready);
    /// Fails a starting session with `why` (daemon shutdown); no-op once it is no longer starting.
    void abort_start(Error why);
    /// Makes a session just returned by start() a prepared one (session_prepared.cpp, issue 18):
    /// await_ready() then builds only what its policy alone decides (network, file service, path
    /// space, the policy's ports) and leaves it `active` but unjournalled, tokenless and without
    /// timers, for the manager's pool, where no route reaches it.
    /// Whether it is a prepared session nobody has claimed yet.
    bool prepared() const { return prepared_; }
    /// Hands a prepared session to the client whose creation `request` takes it: applies env,
    /// cwd and the command timeout, makes fresh tokens, restarts createdAt, journals it and arms
    /// its timers. EINVAL when it is not an unclaimed, untouched prepared session (each is handed
    /// out once). On an error the caller ends it.
    Status claim(const CreateSessionRequest& request);
    /// Removes the prepared marker a journalled claim left for after the client's answer
    /// (claim() says why); no-op when there is none. Ending the session removes it too.
    void settle_claim();
    /// Claimed, and what settle_claim() does is still to be done.
    bool claim_unsettled() const { return marker_left_ && state_ != SessionState::ended; }
    /// Takes over a session a previous run of the daemon left running (session_adoption.cpp):
    /// its cgroup, holder, limits, directory, ports (forwarders made anew), tokens, env and
    /// processes, from `record`. `notes` gets what could not be taken and why. An error means
    /// nothing was taken; what was is ended with the returned error.
    static Result<std::shared_ptr<Session>> adopt(SessionContext context,
                                                  const JournalSession& record, Policy policy,
                                                  EndedCallback on_ended,
                                                  std::vector<std::string>& notes);
    ~Session();

    /// Where the session's policy came from (a name, or inline YAML), for the journal.
    void set_policy_source(std::string name, std::string yaml);
    /// The session's recoverable state as the journal keeps it.
    JournalSession journal_state() const;

    const std::string& id() const { return id_; }
    SessionState state() const { return state_; }
    /// Snapshot for the API.
    SessionInfo info() const;

    const std::string& full_token() const { return full_token_; }
    const std::string& restricted_token() const { return restricted_token_; }

    /// Starts a process (see SessionManager::start_process).
    Result<std::shared_ptr<Process>> start_process(const ProcessRequest& request);
    /// The process `proc`, or ENOENT.
    Result<std::shared_ptr<Process>> process(const std::string& proc) const;
    /// Processes in start order.
    std::vector<std::shared_ptr<Process>> processes() const;

    // session_shells.cpp: shell contexts.
    /// Creates a shell context (EEXIST for a taken id, ENOTSUP when the sandbox has no bash).
    Result<ShellInfo> create_shell(const ShellRequest& request);
    /// Shell contexts in id order / one (ENOENT).
    std::vector<ShellInfo> shells() const;
    Result<ShellInfo> shell(const std::string& id) const;
    /// Deletes a context: its queued commands fail, its running command is killed.
    Status delete_shell(const std::string& id);
    /// Queues `request` in the context it names; `started` runs (posted) once it started, unless
    /// `*alive` became false before.
    Status enqueue_shell_command(const ProcessRequest& request, std::shared_ptr<bool> alive,
                                 ShellContext::Started started);
    // session_contexts.cpp: code contexts (issue 14, contexts/code_context.hpp).
    /// Starts a code context; `ready` runs (posted) once its interpreter is ready or failed.
    /// EEXIST for the id of a live context (a dead one's id is taken over), ENOPKG when the
    /// sandbox has no such interpreter.
    Status create_context(const CodeContextRequest& request, CodeContext::Ready ready);
    /// Code contexts in id order / one (ENOENT).
    std::vector<CodeContextInfo> contexts() const;
    Result<CodeContextInfo> context(const std::string& id) const;
    /// Kills a context's interpreter and forgets it.
    Status delete_context(const std::string& id);
    /// Queues a run (EOWNERDEAD when the context is dead); returns its run id.
    Result<uint64_t> run_code(const std::string& id, CodeRunRequest request,
                              std::shared_ptr<bool> alive, CodeContext::Events events);
    /// Interrupts run `run` of context `id` if it is running (ENOENT: no such context).
    Status interrupt_code(const std::string& id, uint64_t run);

    /// Replaces the egress rules (PATCH .../network) for new connections. EINVAL for a bad
    /// entry, ENOTSUP when the session has the host's network (nothing to filter).
    Status set_egress(const EgressSpec& spec);
    /// Sets/unsets session env; returns the new env.
    std::map<std::string, std::string> patch_env(const EnvPatch& patch);
    /// API activity: re-arms the idle timer.
    void touch();

    /// Leases one port, lists, releases.
    Result<PortLeaseInfo> lease_port();
    std::vector<PortLeaseInfo> ports() const;
    Status release_port(uint16_t port);
    /// The endpoint URL of a leased port.
    Result<std::string> endpoint(uint16_t port, std::string_view protocol) const;
    /// Waits until something in the session accepts connections on leased `port` (inside its
    /// network namespace when isolated). ENOENT when the port is not leased.
    Result<PortWait> wait_for_port(uint16_t port, Millis timeout, PortWait::Handler handler);

    /// The file service over the session's root.
    const std::shared_ptr<FileService>& files() const { return files_; }
    /// Where a file-API path lands in the session's path space (path_space.hpp): relative paths
    /// against the cwd of shell context `shell`, or the session's when `shell` is "".
    Result<FileTarget> file_target(std::string_view path, const std::string& shell) const;

    /// Ends the session (see SessionManager::end_session). `reason`: "api", "timeout", "idle"...
    void end(std::string reason, EndHandler handler);
    /// Synchronous hard stop for daemon destruction: kill, bounded wait, remove.
    void end_now();
    /// Drops the output of ended processes (the retention window is over).
    void forget_processes();

  private:
    Session(SessionContext context, std::string id, Policy policy, EndedCallback on_ended);
    /// What create() and start() share: the object with its policy source, nothing built yet.
    static std::shared_ptr<Session> construct(SessionContext context, std::string id,
                                              Policy policy, const CreateSessionRequest& request,
                                              EndedCallback on_ended);
    /// Creation in two halves around the holder's setup: up to Sandbox::start, and after it.
    Status build_until_holder(const CreateSessionRequest& request);
    Status build_after_holder(const CreateSessionRequest& request);
    /// build_after_holder's halves: what the policy alone decides, and what the request asks
    /// for (env, cwd, command timeout) with the tokens.
    Status build_request_independent(const CreateSessionRequest& request);
    Status apply_request(const CreateSessionRequest& request);
    /// `cwd` (absolute, in the session's path space) normalized, made (mkdir -p) where it is
    /// missing inside what the sandbox may write; EINVAL naming `cwd` when it cannot be used.
    Result<std::string> prepare_cwd(const std::string& cwd) const;
    /// Builds the Landlock ruleset in the sandbox's root once it stands (a mount namespace's
    /// sessions; compile_confinement left it): its paths are the sandbox's.
    Status root_landlock_in_sandbox();
    /// complete_start() of a prepared session (session_prepared.cpp).
    void complete_preparation();
    /// Unlinks this session's kPreparedMarker (ENOENT counts as done).
    Status remove_marker();
    /// create()'s blocking wait for the holder's setup.
    Status wait_for_holder();
    // session_starting.cpp: await_ready's steps.
    void watch_holder_report();
    void on_holder_report();
    void arm_holder_deadline();
    void stop_holder_watch();
    void complete_start();
    void fail_start(Error error);
    // session_adoption.cpp
    Status rebuild(const JournalSession& record, std::vector<std::string>& notes);
    void adopt_processes(const JournalSession& record, std::vector<std::string>& notes);
    void adopt_keeper(const JournalSession& record, std::vector<std::string>& notes);
    void reap_unowned_leaves(std::vector<std::string>& notes);
    /// Starts p1 ahead in first_leaf_ (session_prepared.cpp); best effort.
    void start_first_launch_ahead();
    /// Kills first_launch_'s child, if no process took it, and hands it to the reaper.
    void end_first_launch();
    // session_held_output.cpp: output descriptors kept by the holder across a daemon restart.
    /// Hands a just-started process's output descriptors to the holder (before it is journalled).
    void hold_output(Process& process);
    /// Lets the holder close a finished process's slots (after its end is journalled).
    void release_output(Process& process);
    /// Takes a journalled process's descriptors back from the holder; empty when they are not
    /// there (or not what they should be), with a note why.
    ResumedOutput take_output(const JournalProcess& journalled, std::vector<std::string>& notes);
    /// Lets the holder close the slots of a journalled process that will not be read any more.
    void release_slots(const JournalProcess& journalled);
    /// `count` free consecutive slots of the holder's store, or nullopt (its limit reached).
    std::optional<int> allocate_slots(int count);
    void free_slots(int first, int count);
    /// Records the session's state in the journal (no journal: nothing).
    Status journal_session() const;
    void journal_process_started(const Process& process) const;
    void journal_process_ended(const Process& process) const;
    /// Fills in what every process of this session needs (cgroups, namespaces, callbacks).
    void wire_setup(ProcessSetup& setup);
    Process::FinishCallback finish_callback();
    Status create_kernel_resources();
    Status finish_kernel_resources();
    std::string resolve_cwd(const std::string& cwd, const std::string& base) const;
    /// The process setup of `request` before argv/env are decided (id, cwd, timeout, fds...).
    ProcessSetup base_setup(const ProcessRequest& request);
    /// Starts `setup` and records the process.
    Result<std::shared_ptr<Process>> launch(ProcessSetup setup);
    // session_shells.cpp
    /// The root the session's processes see, as an O_PATH fd (their mount namespace's root).
    Result<UniqueFd> open_sandbox_root() const;
    /// Whether `path` (inside the sandbox) is an executable regular file.
    bool sandbox_has_executable(const std::string& path) const;
    void choose_command_shell();
    /// `workspace_owner`: who owns what the API creates in the workspace; `sandbox_identity`: who
    /// the daemon acts as elsewhere in the sandbox's view.
    Status open_path_space(const std::optional<FileOwner>& workspace_owner,
                           const std::optional<FileOwner>& sandbox_identity);
    /// A new descriptor of the workspace directory (the bound workdir's, or the scratch root).
    Result<UniqueFd> open_workspace() const;
    std::vector<std::string> process_env(const std::map<std::string, std::string>& extra) const;
    /// The one way env_ is written: it also drops the process environment built from it.
    void set_env(std::map<std::string, std::string> env);
    void on_process_finished(Process& process);
    /// Drops the oldest finished records beyond context_.max_finished_processes, and beyond
    /// finished_output_budget() of retained output (their leaves are gone, so nothing of the
    /// kernel's is dropped with them). The newest finished record always stays.
    void prune_finished_processes();
    /// Output bytes the session's finished records may hold together: four times the policy's
    /// limits.output (64 MiB at the default 16 MiB), at least one record's worth.
    size_t finished_output_budget() const;
    // session_oom_group.cpp
    void watch_oom_group();
    void arm_oom_watcher(std::shared_ptr<boost::asio::posix::stream_descriptor> watcher);
    void end_if_oom_group_hit();
    void recheck_oom_group(int attempts);
    void stop_oom_watch();
    void arm_session_timer();
    void arm_idle_timer();
    bool any_process_running() const;

    // session_ending.cpp
    void begin_grace();
    void watch_leaves_during_grace();
    void after_grace();
    void watch_until_empty();
    void after_empty();
    void await_holder_exit();
    void finalize_if_done();
    void finalize();
    void release_resources();

    // session_ports.cpp: forwarding leased ports into an isolated network namespace.
    /// `leftovers`: what a previous run of the daemon left in the namespace (adoption).
    Status start_network(const NetworkLeftovers* leftovers = nullptr);
    Status forward_port(uint16_t port);
    void unforward_port(uint16_t port);
    void stop_network();

    SessionContext context_;
    std::string id_;
    Policy policy_;
    std::string policy_name_;  ///< what it was created from, for the journal
    std::string policy_yaml_;
    uint64_t holder_start_ticks_ = 0;
    EndedCallback on_ended_;
    SessionState state_ = SessionState::active;
    std::string end_reason_;
    std::chrono::system_clock::time_point created_at_;
    std::optional<std::chrono::system_clock::time_point> ended_at_;
    std::chrono::steady_clock::time_point end_started_;

    // Resources, in construction order (destroyed in reverse).
    SessionDirectory directory_;
    Cgroup cgroup_;
    std::unique_ptr<SessionLimits> limits_;
    /// Limit event fds watched when the kernel cannot end the session on OOM itself (v1).
    std::vector<std::shared_ptr<boost::asio::posix::stream_descriptor>> oom_watchers_;
    Cgroup holder_cgroup_;
    Sandbox sandbox_;
    Confinement confinement_;
    std::shared_ptr<FileService> files_;
    PathSpace paths_;
    /// The host directory bound as the workspace (CreateSessionRequest::workdir), or null: a
    /// scratch directory (or the session ended: its descriptor is let go then). Never removed
    /// by the session.
    std::shared_ptr<const BoundWorkdir> bound_workdir_;
    bool works_in_host_dir_ = false;  ///< bound_workdir_ was set (workdir_.host_path names it)
    /// Why the bound workdir could not be idmapped to its owner (Sandbox::workdir_warning), or
    /// empty. Not journalled: a session adopted after a restart no longer says it.
    std::string workdir_warning_;
    std::vector<uint16_t> leased_;
    std::unique_ptr<SessionNetwork> network_;  ///< isolated network only; before sandbox_ dies
    std::optional<EgressInfo> final_egress_;   ///< the egress record as it was when it stopped

    WorkdirBinding workdir_;
    std::string cwd_;
    std::map<std::string, std::string> env_;
    /// process_env() without a request's own variables, for the proxy port it was built with:
    /// the same for every `run` until env_ changes (set_env()), and building it
    /// parsed corrald's environment into maps each time (issue 18).
    struct ProcessEnvCache {
        uint16_t proxy_port = 0;
        std::vector<std::string> env;
    };
    mutable std::optional<ProcessEnvCache> process_env_cache_;
    std::optional<Millis> command_timeout_;
    std::string full_token_;
    std::string restricted_token_;

    std::string command_shell_ = "/bin/sh";
    std::string context_shell_;  ///< bash for shell contexts; "" when the sandbox has none
    std::map<std::string, std::shared_ptr<ShellContext>> shells_;
    unsigned next_shell_ = 1;

    std::map<std::string, std::shared_ptr<CodeContext>> contexts_;
    unsigned next_context_ = 1;

    std::map<std::string, std::shared_ptr<Process>> processes_;
    std::vector<std::string> process_order_;
    /// p1's leaf, made while the session was prepared (session_prepared.cpp); taken by the first
    /// process, removed with the session if none came.
    std::optional<Cgroup> first_leaf_;
    /// p1 itself, started ahead in that leaf and waiting for its command (launch_ahead.hpp);
    /// taken by the first process with the leaf, ended with the session if none came.
    std::shared_ptr<WaitingLaunch> first_launch_;
    unsigned next_process_ = 1;
    std::vector<bool> slots_in_use_;  ///< the holder's store slots, by number
    size_t pruned_processes_ = 0;
    bool prune_posted_ = false;
    /// Output memory of the finished records, as of their finish (an estimate the prune makes
    /// exact): what tells a prune it must look even while the count is under its cap.
    size_t finished_output_ = 0;
    /// Ids of finished records in the order they finished (the output budget drops the oldest).
    std::deque<std::string> finish_order_;

    // Starting (await_ready): the request it was created with, who waits, the holder's report
    // channel and its SetupDeadline.
    std::optional<CreateSessionRequest> start_request_;
    ReadyHandler ready_handler_;
    boost::asio::posix::stream_descriptor holder_report_watch_;
    boost::asio::steady_timer holder_timer_;
    SetupDeadline holder_deadline_;
    /// The journal has (or may have) a record of it: only then are its ending and end recorded.
    bool journalled_ = false;
    /// Prepared for the pool and not claimed yet (start with `prepared`, claim).
    bool prepared_ = false;
    /// Claimed, and its kPreparedMarker is still there (claim, settle_claim).
    bool marker_left_ = false;

    boost::asio::steady_timer session_timer_;
    boost::asio::steady_timer idle_timer_;
    boost::asio::steady_timer end_timer_;
    std::vector<std::unique_ptr<boost::asio::posix::stream_descriptor>> end_watches_;
    std::vector<std::pair<EndHandler, bool>> end_handlers_;  ///< handler, already_ended
    bool grace_over_ = false;
    bool empty_reached_ = false;
    bool final_bound_armed_ = false;  ///< the last kKillBound wait for records and holder
    EndSessionReport report_;
    ResourceUsage final_usage_;
};

}  // namespace corral
