// Building a session and serving its processes, env, ports and timers. Ending is in
// session_ending.cpp.
#include "sessions/session.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "policies/environment.hpp"
#include "sessions/child_reaper.hpp"
#include "sessions/network/session_network.hpp"
#include "sessions/recovery/session_journal.hpp"
#include "sessions/tokens.hpp"

extern char** environ;

namespace corral {

Session::Session(SessionContext context, std::string id, Policy policy, EndedCallback on_ended)
    : context_(context),
      id_(std::move(id)),
      policy_(std::move(policy)),
      on_ended_(std::move(on_ended)),
      created_at_(std::chrono::system_clock::now()),
      holder_report_watch_(context.io),
      holder_timer_(context.io),
      session_timer_(context.io),
      idle_timer_(context.io),
      end_timer_(context.io) {}

Session::~Session() {
    if (state_ != SessionState::ended) end_now();
}

std::shared_ptr<Session> Session::construct(SessionContext context, std::string id, Policy policy,
                                            const CreateSessionRequest& request,
                                            EndedCallback on_ended) {
    std::shared_ptr<Session> session(
        new Session(context, std::move(id), std::move(policy), std::move(on_ended)));
    session->set_policy_source(request.policy_yaml.empty() ? request.policy : "",
                               request.policy_yaml);
    return session;
}

Result<std::shared_ptr<Session>> Session::create(SessionContext context, std::string id,
                                                 Policy policy, const CreateSessionRequest& request,
                                                 EndedCallback on_ended) {
    auto session = construct(context, std::move(id), std::move(policy), request,
                             std::move(on_ended));
    // On failure the shared_ptr dies here and ~Session undoes whatever build made.
    const std::string creating = "create session " + session->id_;
    CORRAL_TRY(session->build_until_holder(request), creating);
    CORRAL_TRY(session->wait_for_holder(), creating);
    CORRAL_TRY(session->build_after_holder(request), creating);
    // Journalled before its id and tokens reach anyone: a restart knows every session a client
    // can name.
    session->journalled_ = true;
    CORRAL_TRY(session->journal_session(), creating);
    session->arm_session_timer();
    session->arm_idle_timer();
    return session;
}

Result<std::shared_ptr<Session>> Session::start(SessionContext context, std::string id,
                                                Policy policy, const CreateSessionRequest& request,
                                                EndedCallback on_ended, bool prepared) {
    auto session = construct(context, std::move(id), std::move(policy), request,
                             std::move(on_ended));
    session->state_ = SessionState::starting;
    session->prepared_ = prepared;
    // Nothing here waits for a process: a holder that was cloned is ours and has reported
    // nothing yet. On failure ~Session undoes what was made.
    CORRAL_TRY(session->build_until_holder(request), "create session " + session->id_);
    session->start_request_ = request;
    return session;
}

Status Session::wait_for_holder() {
    if (!sandbox_.active()) return {};
    const pid_t holder = sandbox_.holder_pid();
    Status ready = sandbox_.wait_until_ready(kSetupReportLimit);
    if (ready) return ready;
    context_.reaper.remove_owned(holder);  // killed and reaped by wait_until_ready
    return std::move(ready.error().context("namespaces").context("set up"));
}

Status Session::build_until_holder(const CreateSessionRequest& request) {
    // With a mount namespace, Landlock waits for the sandbox's root (root_landlock_in_sandbox).
    auto confinement = compile_confinement(policy_, policy_.namespaces.mount);
    if (!confinement) return std::move(confinement.error().context("policy"));
    confinement_ = std::move(*confinement);

    auto directory = SessionDirectory::create(context_.sessions_dir, id_, policy_.workdir.size,
                                              context_.remover, context_.directory_stock,
                                              prepared_);
    if (!directory) return std::move(directory.error());
    directory_ = std::move(*directory);
    if (request.bound_workdir) {
        // The user's directory: bound from its descriptor (never by path again), idmapped to
        // its owner, never handed to the sandbox's identity, never removed.
        bound_workdir_ = request.bound_workdir;
        works_in_host_dir_ = true;
        workdir_.host_path = bound_workdir_->host_path;
        workdir_.host_fd = bound_workdir_->fd.get();
        workdir_.idmap_to_owner = true;
    } else {
        workdir_.host_path = directory_.root();
        workdir_.idmap_to_owner = false;  // a scratch dir: handed to the sandbox's identity below
    }
    workdir_.inside_path =
        policy_.namespaces.mount ? policy_.workdir.mount : workdir_.host_path;

    CORRAL_TRY(create_kernel_resources(), "set up");
    return {};
}

// Once the holder is ready: its namespaces can be entered (network, the sandbox's root).
Status Session::build_after_holder(const CreateSessionRequest& request) {
    CORRAL_TRY(build_request_independent(request), "set up");
    return apply_request(request);
}

// Everything that depends on the policy alone (and on the ports and workdir fixed at the holder's
// setup): what a prepared session has built before any client asked for it.
Status Session::build_request_independent(const CreateSessionRequest& request) {
    CORRAL_TRY(finish_kernel_resources(), "set up");
    CORRAL_TRY(root_landlock_in_sandbox(), "policy");
    // The workspace and the files the API creates belong to the sandbox's user as the host sees
    // it: a user namespace's leased range (DESIGN.md "Identity"), else the policy's uid.
    std::optional<FileOwner> owner;
    if (auto identity = sandbox_.host_identity()) {
        owner = FileOwner{identity->uid, identity->gid};
    } else if (!policy_.user.inherit) {
        owner = FileOwner{policy_.user.uid, policy_.user.gid};
    }
    if (owner) CORRAL_TRY(directory_.hand_to(owner->uid, owner->gid), "session directory");
    choose_command_shell();

    // Uploads to a bound workdir belong to its owner, as the sandbox's own writes there do.
    std::optional<FileOwner> workspace_owner = owner;
    if (bound_workdir_)
        workspace_owner = FileOwner{bound_workdir_->owner_uid, bound_workdir_->owner_gid};
    auto workspace = open_workspace();
    if (!workspace) return std::move(workspace.error().context("file service"));
    files_ = std::make_shared<FileService>(std::move(*workspace),
                                           FileServiceOptions{workspace_owner, false});
    CORRAL_TRY(open_path_space(workspace_owner, owner), "file service");

    const unsigned ports = request.ports.value_or(policy_.network.ports);
    for (unsigned i = 0; i < ports; ++i) {
        auto port = context_.ports.lease(id_);
        if (!port) return std::move(port.error().context("lease network.ports"));
        leased_.push_back(*port);
        CORRAL_TRY(forward_port(*port), "network.ports");
    }
    return {};
}

// What the creation request itself asks for (env, cwd, command timeout) and the tokens: done at
// claim for a prepared session, so its tokens never existed before a client asked for it.
Status Session::apply_request(const CreateSessionRequest& request) {
    set_env(request.env);
    cwd_ = resolve_cwd(request.cwd, workdir_.inside_path);
    if (!request.cwd.empty()) {
        auto checked = prepare_cwd(cwd_);
        if (!checked) return std::move(checked.error());
        cwd_ = std::move(*checked);
    }
    command_timeout_.reset();
    if (request.command_timeout) {
        if (request.command_timeout->count() > 0) command_timeout_ = request.command_timeout;
    } else {
        command_timeout_ = policy_.timeouts.command;
    }
    auto full = generate_token();
    if (!full) return std::move(full.error());
    auto restricted = generate_token();
    if (!restricted) return std::move(restricted.error());
    full_token_ = std::move(*full);
    restricted_token_ = std::move(*restricted);
    return {};
}

// The session cgroup carries the limits; the holder sits in a leaf of its own (no internal
// processes in the session cgroup), and so does every process started later.
Status Session::create_kernel_resources() {
    auto cgroup = context_.sessions_cgroup.create_child(id_);
    if (!cgroup) return std::move(cgroup.error().context("session cgroup"));
    cgroup_ = std::move(*cgroup);
    auto limits = context_.limits.apply(cgroup_, context_.instance_name + "-" + id_, policy_.limits,
                                        policy_.enforcement);
    if (!limits) return std::move(limits.error().context("limits"));
    limits_ = std::move(*limits);
    // A session without namespaces gets a holder of its own too (a keeper) when the daemon keeps
    // output across its restarts: in the same leaf, so cgroup.kill of the session ends it.
    SandboxOptions options;
    options.keep_output = context_.keep_output;
    options.reap_given_up = [&reaper = context_.reaper](PidRef holder) {
        reaper.hand_over(std::move(holder));
    };
    options.clone_from_small_table = true;
    if (Sandbox::needed(policy_, options)) {
        auto holder = cgroup_.create_child("holder");
        if (!holder) return std::move(holder.error().context("holder cgroup"));
        holder_cgroup_ = std::move(*holder);
    }
    // Started only: its setup report is awaited by the caller (wait_for_holder, await_ready).
    auto sandbox =
        Sandbox::start(policy_, holder_cgroup_, workdir_, context_.egress.resolv_conf, options);
    if (!sandbox) return std::move(sandbox.error().context("namespaces"));
    sandbox_ = std::move(*sandbox);
    if (sandbox_.active()) {
        // Its exit is ours to collect (through its pidfd), never the orphan reaper's.
        context_.reaper.add_owned(sandbox_.holder_pid());
        if (auto ticks = process_start_ticks(sandbox_.holder_pid())) holder_start_ticks_ = *ticks;
    }
    return {};
}

Status Session::finish_kernel_resources() {
    workdir_warning_ = sandbox_.workdir_warning();
    CORRAL_TRY(start_network(), "network");
    watch_oom_group();
    return {};
}

Result<UniqueFd> Session::open_workspace() const {
    if (works_in_host_dir_ && !bound_workdir_)
        return sys_error(ESRCH, "session `" + id_ + "` has ended: its workdir is let go");
    if (bound_workdir_) {
        const int fd = ::fcntl(bound_workdir_->fd.get(), F_DUPFD_CLOEXEC, 0);
        if (fd < 0) return sys_error("dup workdir `" + bound_workdir_->host_path + "`");
        return UniqueFd(fd);
    }
    const int fd = ::open(directory_.root().c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return sys_error("open `" + directory_.root() + "`");
    return UniqueFd(fd);
}

// A session whose cwd is not there would fail every command it runs (setup-failed, chdir ENOENT,
// which the clients showed as exit code -1). As `docker run -w` does, a missing cwd is made (mkdir
// -p through the file service: confined, as the sandbox's identity); one that cannot be made, or
// is not a directory, refuses the creation naming the key. `..` is resolved lexically, as the file
// API does. Without a mount namespace a cwd outside the workspace is a host path: it must exist
// (a typo is not made into a directory on the host).
Result<std::string> Session::prepare_cwd(const std::string& cwd) const {
    auto refuse = [&](const std::string& why) {
        return sys_error(EINVAL, "cwd `" + cwd + "` " + why);
    };
    if (!policy_.namespaces.mount) {
        std::string normal = std::filesystem::path(cwd).lexically_normal().string();
        if (normal.size() > 1 && normal.back() == '/') normal.pop_back();
        struct stat st {};
        if (::stat(normal.c_str(), &st) == 0) {
            if (!S_ISDIR(st.st_mode)) return refuse("is not a directory");
            return normal;
        }
        const int code = errno;
        const std::string& workspace = workdir_.inside_path;
        const bool in_workspace =
            normal == workspace || normal.starts_with(workspace + "/");
        if (code != ENOENT || !in_workspace)
            return refuse("is not a directory the session can enter: " + errno_name(code));
    }
    auto target = paths_.resolve(cwd, workdir_.inside_path);
    if (!target) return refuse("cannot be the session's: " + target.error().describe());
    auto info = target->service->stat(target->path);
    if (info) {
        if (info->type != FileType::dir) return refuse("is not a directory in the session");
        return target->path;
    }
    if (info.error().code != ENOENT)
        return refuse("is not a directory the session can enter: " + info.error().describe());
    if (auto made = target->service->mkdir(target->path, true); !made)
        return refuse("does not exist and cannot be made: " + made.error().describe());
    return target->path;
}

// Landlock's rules hold inodes: the sandbox's own /workspace and /tmp, not the host's paths of the
// same names (isolation/landlock.hpp). Built once its root stands, before any launch.
Status Session::root_landlock_in_sandbox() {
    if (!policy_.namespaces.mount || !policy_.landlock.enabled()) return {};
    auto root = open_sandbox_root();
    if (!root) return std::move(root.error().context("landlock"));
    return root_landlock(policy_, root->get(), confinement_);
}

std::string Session::resolve_cwd(const std::string& cwd, const std::string& base) const {
    if (cwd.empty()) return base;
    if (cwd.front() == '/') return cwd;
    return base + "/" + cwd;
}

std::vector<std::string> Session::process_env(
    const std::map<std::string, std::string>& extra) const {
    // Nothing but env_, the policy (fixed), corrald's environment (corral never changes it) and
    // the proxy port goes into it without `extra`.
    const uint16_t port = network_ ? network_->proxy_port() : 0;
    if (extra.empty() && process_env_cache_ && process_env_cache_->proxy_port == port)
        return process_env_cache_->env;
    std::map<std::string, std::string> overrides = env_;
    for (const auto& [key, value] : extra) overrides[key] = value;
    // The only way out of an isolated network is the daemon's proxy inside it: point the usual
    // variables there (both spellings: curl reads http_proxy lower-case only), unless the
    // caller set them itself. Loopback stays direct: it is the session's own.
    if (port != 0) {
        const std::string url = "http://127.0.0.1:" + std::to_string(port);
        for (const char* key : {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"})
            overrides.try_emplace(key, url);
        for (const char* key : {"NO_PROXY", "no_proxy"})
            overrides.try_emplace(key, "localhost,127.0.0.1,::1");
    }
    std::vector<std::string> env = build_environment(policy_.env, environ, overrides);
    const bool has_path = std::any_of(env.begin(), env.end(), [](const std::string& entry) {
        return entry.rfind("PATH=", 0) == 0;
    });
    // The launcher resolves argv[0] through PATH; without one, `ls` would not be found.
    if (!has_path)
        env.push_back("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
    if (extra.empty()) process_env_cache_ = ProcessEnvCache{port, env};
    return env;
}

void Session::set_env(std::map<std::string, std::string> env) {
    env_ = std::move(env);
    process_env_cache_.reset();
}

Result<std::shared_ptr<Process>> Session::start_process(const ProcessRequest& request) {
    if (state_ != SessionState::active) {
        return sys_error(ESHUTDOWN, "session " + id_ + " is " + std::string(to_string(state_)));
    }
    if (request.command.empty() == request.argv.empty()) {
        return sys_error(EINVAL, "give exactly one of `command` and `argv`");
    }
    ProcessSetup setup = base_setup(request);
    if (!request.command.empty()) {
        setup.command = request.command;
        setup.argv = {command_shell_, "-c", request.command};
    } else {
        setup.argv = request.argv;
    }
    setup.env = process_env(request.env);
    if (request.terminal) {
        // Issue 14: from the sandbox's own devpts (terminal_pty.hpp); the terminal's scrollback
        // is the latest bytes of its stdout ring.
        const bool mount_ns = sandbox_.active() && (sandbox_.namespace_flags() & CLONE_NEWNS);
        auto pty = open_session_pty(sandbox_.active() ? sandbox_.holder_pid() : -1, mount_ns,
                                    *request.terminal);
        if (!pty) return std::move(pty.error().context("start terminal"));
        // The sandbox's user owns its terminal (as login does), so programs that reopen it by
        // name (/dev/pts/N) can; otherwise it would belong to the daemon's unmapped root.
        if (auto identity = sandbox_.host_identity();
            identity && ::fchown(pty->slave.get(), identity->uid, identity->gid) != 0)
            return sys_error("start terminal: chown the pty to the sandbox's user");
        setup.terminal = std::make_shared<PtyPair>(std::move(*pty));
        setup.output_cap = std::min(setup.output_cap, kTerminalScrollback);
    }
    return launch(std::move(setup));
}

ProcessSetup Session::base_setup(const ProcessRequest& request) {
    ProcessSetup setup;
    setup.id = "p" + std::to_string(next_process_++);
    setup.cwd = resolve_cwd(request.cwd, cwd_);
    if (request.timeout) {
        if (request.timeout->count() > 0) setup.timeout = request.timeout;
    } else if (!request.background) {
        setup.timeout = command_timeout_;
    }
    setup.grace = policy_.timeouts.grace;
    setup.output_cap = static_cast<size_t>(policy_.limits.output);
    setup.stdin_data = request.stdin_data;
    setup.stdin_open = request.stdin_open;
    return setup;
}

void Session::wire_setup(ProcessSetup& setup) {
    setup.session_cgroup = &cgroup_;
    if (first_leaf_ && setup.id == "p1") {  // made while the session was prepared
        setup.leaf = std::move(first_leaf_);
        first_leaf_.reset();
        setup.waiting = std::move(first_launch_);
    }
    // p1's id went to a launch that failed before it started anything (a terminal without a
    // pty): the child that waited for it must not wait beside this one (launch_ahead.hpp).
    if (first_launch_) end_first_launch();
    if (limits_) {
        setup.limit_join_fds = limits_->join_fds();
        setup.read_limit_events = [limits = limits_.get()] { return limits->read_events(); };
    }
    if (sandbox_.active()) {
        setup.holder_pidfd = sandbox_.holder_pidfd();
        setup.namespace_flags = sandbox_.namespace_flags();
    }
    setup.confinement = &confinement_;
    std::weak_ptr<Session> weak = weak_from_this();
    setup.on_leaf_removed = [weak] {
        auto self = weak.lock();
        if (self && self->state_ == SessionState::ending && !self->grace_over_)
            self->watch_leaves_during_grace();  // its cgroup.events watch may never fire
    };
}

Process::FinishCallback Session::finish_callback() {
    std::weak_ptr<Session> weak = weak_from_this();
    return [weak](Process& finished) {
        if (auto self = weak.lock()) self->on_process_finished(finished);
    };
}

Result<std::shared_ptr<Process>> Session::launch(ProcessSetup setup) {
    wire_setup(setup);
    auto process =
        Process::start(context_.io, context_.reaper, std::move(setup), finish_callback());
    if (!process) return std::move(process.error());
    if (!(*process)->finished()) hold_output(**process);
    // Before its id reaches the client; a failure to even start is final at once (one in the
    // child, before execve, comes later on the loop and is journalled as any end).
    journal_process_started(**process);
    if ((*process)->finished()) journal_process_ended(**process);
    processes_[(*process)->id()] = *process;
    process_order_.push_back((*process)->id());
    idle_timer_.cancel();
    return process;
}

Result<std::shared_ptr<Process>> Session::process(const std::string& proc) const {
    auto found = processes_.find(proc);
    if (found != processes_.end()) return found->second;
    // Ids are p1, p2, ... in start order: one below the next id that is not here was pruned.
    if (proc.size() > 1 && proc[0] == 'p' &&
        std::all_of(proc.begin() + 1, proc.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
        proc.size() < 11 && std::stoul(proc.substr(1)) > 0 &&
        std::stoul(proc.substr(1)) < next_process_) {
        return sys_error(EIDRM, "process `" + proc + "` of session " + id_ +
                                    " has finished and its record was dropped: a session keeps "
                                    "the last " +
                                    std::to_string(context_.max_finished_processes) +
                                    " finished records, and their output up to four times "
                                    "limits.output");
    }
    return sys_error(ENOENT, "session " + id_ + " has no process `" + proc + "`");
}

std::vector<std::shared_ptr<Process>> Session::processes() const {
    std::vector<std::shared_ptr<Process>> list;
    for (const auto& id : process_order_) {
        auto found = processes_.find(id);
        if (found != processes_.end()) list.push_back(found->second);
    }
    return list;
}

std::map<std::string, std::string> Session::patch_env(const EnvPatch& patch) {
    std::map<std::string, std::string> patched = env_;
    for (const auto& [key, value] : patch.set) patched[key] = value;
    for (const auto& key : patch.unset) patched.erase(key);
    set_env(std::move(patched));
    (void)journal_session();  // before the caller answers; a failure is logged by the journal
    return env_;
}

void Session::touch() {
    if (state_ == SessionState::active) arm_idle_timer();
}

bool Session::any_process_running() const {
    return std::any_of(processes_.begin(), processes_.end(),
                       [](const auto& entry) { return !entry.second->finished(); });
}

void Session::on_process_finished(Process& finished) {
    journal_process_ended(finished);
    // Only now: a slot given to a new process before this end reached the journal could be
    // taken back by a restart as this one's.
    release_output(finished);
    finished_output_ += finished.output_memory();
    finish_order_.push_back(finished.id());
    // Posted: the record that just finished is still on the call stack.
    if (!prune_posted_) {
        prune_posted_ = true;
        std::weak_ptr<Session> weak = weak_from_this();
        boost::asio::post(context_.io, [weak] {
            if (auto self = weak.lock()) self->prune_finished_processes();
        });
    }
    if (state_ == SessionState::active) {
        end_if_oom_group_hit();
        if (state_ == SessionState::active) arm_idle_timer();
    } else if (state_ == SessionState::ending) {
        finalize_if_done();
    }
}

size_t Session::finished_output_budget() const {
    // Each stream keeps up to 1.5 x limits.output allocated (OutputBuffer::memory_used): four
    // times holds at least one record whole, and the newest finished one always stays anyway.
    return 4 * static_cast<size_t>(policy_.limits.output);
}

// Stop 44's red-team finding: 256 finished records of 16 MiB each (limits.output, both streams)
// grew corrald's memory without a useful bound (344 MB after ten), none of it the session's
// own memory limit's. The budget bounds what a session's records keep, whatever their count.
void Session::prune_finished_processes() {
    prune_posted_ = false;
    if (state_ != SessionState::active) return;  // the end's report still lists every record
    const size_t budget = finished_output_budget();
    // Fewer records than the cap and little output cannot be too much: no need to count them
    // (a scan of every record at every finish, issue 18).
    if (processes_.size() <= context_.max_finished_processes && finished_output_ <= budget) return;
    size_t finished = 0;
    size_t output = 0;
    for (const auto& [id, process] : processes_) {
        if (!process->finished()) continue;
        ++finished;
        output += process->output_memory();
    }
    finished_output_ = output;
    // Whether the record of `id` may go now: finished, and its leaf gone (a record whose leaf
    // still holds descendants, `cmd &`, stays until they are).
    auto droppable = [&](const std::string& id) {
        auto found = processes_.find(id);
        return found != processes_.end() && found->second->finished() &&
               !found->second->leaf().valid();
    };
    auto drop = [&](const std::string& id) {
        auto found = processes_.find(id);
        output -= std::min(output, found->second->output_memory());
        found->second->shut_down();
        processes_.erase(found);
        std::erase(process_order_, id);
        std::erase(finish_order_, id);
        --finished;
        ++pruned_processes_;
    };
    // The count cap: oldest started first, as always.
    for (size_t i = 0; i < process_order_.size() && finished > context_.max_finished_processes;) {
        const std::string id = process_order_[i];
        if (!processes_.count(id)) {
            process_order_.erase(process_order_.begin() + static_cast<long>(i));
        } else if (droppable(id)) {
            drop(id);
        } else {
            ++i;
        }
    }
    // The output budget: oldest finished first, never the one that finished last (a `run` or a
    // waiter may be reading it just now; review of stop 44: by start order, a long first process
    // was dropped the moment it finished).
    for (size_t i = 0; i + 1 < finish_order_.size() && finished > 1 && output > budget;) {
        const std::string id = finish_order_[i];
        if (!processes_.count(id)) {
            finish_order_.erase(finish_order_.begin() + static_cast<long>(i));
        } else if (droppable(id)) {
            drop(id);
        } else {
            ++i;
        }
    }
    finished_output_ = output;
}

// Counted from the session's creation, so an adopted session keeps the deadline it had.
void Session::arm_session_timer() {
    if (!policy_.timeouts.session || policy_.timeouts.session->count() <= 0) return;
    const auto age = std::chrono::duration_cast<Millis>(std::chrono::system_clock::now() -
                                                        created_at_);
    session_timer_.expires_after(std::max(Millis(0), *policy_.timeouts.session - age));
    std::weak_ptr<Session> weak = weak_from_this();
    session_timer_.async_wait([weak](const boost::system::error_code& error) {
        auto self = weak.lock();
        if (error || !self || self->state_ != SessionState::active) return;
        self->end("timeout", nullptr);
    });
}

// Idle: no API request and no running process for timeouts.idle.
void Session::arm_idle_timer() {
    if (!policy_.timeouts.idle || policy_.timeouts.idle->count() <= 0) return;
    idle_timer_.cancel();
    if (any_process_running()) return;
    idle_timer_.expires_after(*policy_.timeouts.idle);
    std::weak_ptr<Session> weak = weak_from_this();
    idle_timer_.async_wait([weak](const boost::system::error_code& error) {
        auto self = weak.lock();
        if (error || !self || self->state_ != SessionState::active) return;
        if (self->any_process_running()) return;
        self->end("idle", nullptr);
    });
}

Result<PortLeaseInfo> Session::lease_port() {
    if (state_ != SessionState::active) {
        return sys_error(ESHUTDOWN, "session " + id_ + " is " + std::string(to_string(state_)));
    }
    auto port = context_.ports.lease(id_);
    if (!port) return sys_error(EBUSY, port.error().describe());
    if (Status forwarded = forward_port(*port); !forwarded) {
        context_.ports.release(*port);
        return std::move(forwarded.error());
    }
    leased_.push_back(*port);
    if (Status journalled = journal_session(); !journalled) {
        (void)release_port(*port);
        return std::move(journalled.error().context("lease port"));
    }
    return PortLeaseInfo{*port, "http://" + context_.port_host + ":" + std::to_string(*port)};
}

std::vector<PortLeaseInfo> Session::ports() const {
    std::vector<PortLeaseInfo> list;
    for (uint16_t port : leased_) {
        list.push_back({port, "http://" + context_.port_host + ":" + std::to_string(port)});
    }
    return list;
}

Status Session::release_port(uint16_t port) {
    auto found = std::find(leased_.begin(), leased_.end(), port);
    if (found == leased_.end()) {
        return sys_error(ENOENT, "session " + id_ + " holds no port " + std::to_string(port));
    }
    leased_.erase(found);
    unforward_port(port);
    context_.ports.release(port);
    (void)journal_session();
    return {};
}

Result<std::string> Session::endpoint(uint16_t port, std::string_view protocol) const {
    if (std::find(leased_.begin(), leased_.end(), port) == leased_.end()) {
        return sys_error(ENOENT, "session " + id_ + " holds no port " + std::to_string(port));
    }
    if (protocol != "http" && protocol != "ws") {
        return sys_error(EINVAL,
                         "protocol must be http or ws, not `" + std::string(protocol) + "`");
    }
    return std::string(protocol) + "://" + context_.port_host + ":" + std::to_string(port);
}

SessionInfo Session::info() const {
    SessionInfo info;
    info.id = id_;
    info.policy_name = policy_.name;
    info.state = state_;
    info.end_reason = end_reason_;
    info.created_at = created_at_;
    info.ended_at = ended_at_;
    info.root = works_in_host_dir_ ? workdir_.host_path : directory_.root();
    info.workdir = workdir_.inside_path;
    info.workdir_warning = workdir_warning_;
    info.cwd = cwd_;
    info.env = env_;
    info.command_timeout = command_timeout_;
    if (sandbox_.active() || state_ != SessionState::active) {
        const NamespaceSpec& ns = policy_.namespaces;
        if (ns.pid) info.namespaces.push_back("pid");
        if (ns.mount) info.namespaces.push_back("mount");
        if (ns.ipc) info.namespaces.push_back("ipc");
        if (ns.uts) info.namespaces.push_back("uts");
        if (ns.user) info.namespaces.push_back("user");
        if (ns.network == NetworkMode::isolated) info.namespaces.push_back("net");
    }
    info.ports = ports();
    if (limits_) info.not_enforced = limits_->not_enforced();
    for (const auto& process : processes()) info.processes.push_back(process->info());
    if (state_ == SessionState::ended) {
        info.usage = final_usage_;
    } else if (limits_) {
        info.usage = limits_->usage();
    } else if (cgroup_.valid()) {
        if (auto usage = cgroup_.usage()) info.usage = *usage;
    }
    info.processes_killed = report_.processes_killed;
    if (network_) {
        info.egress = network_->egress_info();
    } else {
        info.egress = final_egress_;
    }
    return info;
}

}  // namespace corral
