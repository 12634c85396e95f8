// The registry: creating, finding, ending and forgetting sessions. Per-process calls are thin
// lookups that forward to Session/Process (session_manager_processes.cpp).
#include "sessions/session_workdir.hpp"
#include "sessions/session_manager.hpp"

#include "sessions/network/session_resolv_conf.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "base/tree_removal.hpp"
#include "isolation/launch_worker.hpp"
#include "isolation/launch_zygote.hpp"
#include "isolation/limits.hpp"
#include "policies/compiled/compiled_presets.hpp"
#include "policies/policy_parser.hpp"
#include "sessions/child_reaper.hpp"
#include "sessions/network/port_pool.hpp"
#include "sessions/session.hpp"
#include "sessions/session_directory_stock.hpp"
#include "sessions/recovery/session_journal.hpp"
#include "sessions/tokens.hpp"

namespace corral {

/// What is remembered of an ended session after its retention window: enough for "already ended".
struct SessionManager::Tombstone {
    SessionInfo info;
    /// A session a previous run left: its id may be taken again (the client cannot have known).
    bool reusable = false;
};

namespace {

/// Spare session directories kept (SessionDirectoryStock): a pool's refill takes one at a time,
/// and a burst of creations without a pool takes what is there and makes the rest itself.
constexpr size_t kSpareSessionDirectories = 4;

bool valid_session_id(const std::string& id) {
    if (id.empty() || id.size() > 64) return false;
    return std::all_of(id.begin(), id.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
    });
}

Status make_directories(const std::string& path) {
    std::error_code error;
    std::filesystem::create_directories(path, error);
    if (error) return sys_error(error.value(), "mkdir -p `" + path + "`");
    return {};
}

/// A child cgroup of ours; one that start-up clean-up could not remove (a task stuck in the
/// kernel) is taken over rather than stopping the start.
Result<Cgroup> create_or_adopt(const Cgroup& parent, const std::string& name) {
    auto created = parent.create_child(name);
    if (created || created.error().code != EEXIST) return created;
    return Cgroup::adopt(parent.path() + "/" + name);
}

}  // namespace

SessionManager::SessionManager(boost::asio::io_context& io, SessionManagerConfig config,
                               CgroupHost host)
    : io_(io), config_(std::move(config)), host_(std::move(host)) {
    if (!config_.egress.refused_total) config_.egress.refused_total = std::make_shared<uint64_t>(0);
    // The launch worker (one thread for the process) starts with the manager, not at the first
    // launch: its cost is paid at start, and a thread that appeared during a session's life would
    // look like one the session left behind. Its zygote too, and before initialize() reads the
    // journal: the zygote is a copy of corrald as it is now, and must hold no session's tokens
    // (launch_zygote.hpp).
    if (LaunchWorker* worker = LaunchWorker::shared()) worker->start_zygote();
}

Result<std::unique_ptr<SessionManager>> SessionManager::create(boost::asio::io_context& io,
                                                               SessionManagerConfig config,
                                                               CgroupHost host) {
    std::unique_ptr<SessionManager> manager(
        new SessionManager(io, std::move(config), std::move(host)));
    CORRAL_TRY(manager->initialize(), "start session manager");
    return manager;
}

// <v2_own>/<instance>/sessions holds the sessions. When corrald moves itself into
// <instance>/supervisor, <v2_own> is left without processes, which the no-internal-process rule
// requires before controllers can be enabled for the subtree on unified hosts.
Status SessionManager::initialize() {
    if (!valid_session_id(config_.instance_name)) {
        return plain_error("bad instance name `" + config_.instance_name + "`");
    }
    CORRAL_TRY(make_directories(config_.state_dir + "/sessions"), "state dir");
    // Issue 10 item 3: a session (of any instance) may not list the state dir; 0711, not 0700,
    // so a session running as another uid without a mount namespace still reaches its own root.
    for (const std::string& dir : {config_.state_dir, config_.state_dir + "/sessions"}) {
        if (::chmod(dir.c_str(), 0711) != 0) return sys_error("chmod 0711 `" + dir + "`");
    }
    // A previous run killed with -9 left its instance cgroup, sessions and mounts behind: once
    // the claim proves no live daemon owns them, they are reaped (recovery/recovery.hpp), so
    // neither a stale instance cgroup nor an old session id stops this run.
    std::error_code error;
    const std::string state_dir =
        std::filesystem::absolute(config_.state_dir, error).lexically_normal().string();
    if (error) return sys_error(error.value(), "state dir `" + config_.state_dir + "`");
    // Isolated sandboxes see the daemon's resolv.conf (their own resolver, dns_resolver.hpp).
    if (config_.egress.resolv_conf.empty()) {
        auto resolv_conf = write_session_resolv_conf(state_dir);
        if (resolv_conf) {
            config_.egress.resolv_conf = *resolv_conf;
        } else if (config_.log) {
            config_.log("isolated sessions keep the host's /etc/resolv.conf: " +
                        resolv_conf.error().describe());
        }
    }
    const std::string instance_dir = host_.v2_own + "/" + config_.instance_name;
    auto claim = InstanceClaim::acquire(state_dir, instance_dir);
    if (!claim) return std::move(claim.error());
    claim_ = std::move(*claim);
    // The journal says which of the previous run's sessions come back (those whose cgroup still
    // holds processes); everything else of corral's is reaped as before.
    uint64_t journal_bytes = 0;
    std::set<std::string> journal_known;
    auto adoptable =
        read_journalled_sessions(instance_dir + "/sessions", journal_bytes, journal_known);
    std::set<std::string> keep;
    for (const auto& [sid, record] : adoptable) keep.insert(sid);
    const LeftoverScope scope{state_dir, instance_dir, config_.instance_name, host_.v1_own};
    // A claim is journalled before its answer and its marker removed after (Session::claim): a
    // session the journal knows was some client's, marker or not (its marker goes now).
    std::set<std::string> never_claimed = prepared_leftovers(state_dir);
    for (const auto& sid : journal_known) {
        if (never_claimed.erase(sid) != 0)
            (void)::unlink((state_dir + "/sessions/" + sid + "/" + kPreparedMarker).c_str());
    }
    leftovers_ = reap_leftovers(scope, keep);
    for (const auto& sid : journal_known) {
        if (keep.count(sid) == 0 &&
            std::find(leftovers_.sessions.begin(), leftovers_.sessions.end(), sid) ==
                leftovers_.sessions.end())
            leftovers_.sessions.push_back(sid);
    }
    remember_reaped_sessions(never_claimed);
    auto instance = Cgroup::adopt(instance_dir);
    if (!instance) return std::move(instance.error().context("instance cgroup"));
    instance_cgroup_ = std::move(*instance);
    if (config_.move_self_to_supervisor_leaf) {
        auto supervisor = create_or_adopt(instance_cgroup_, "supervisor");
        if (!supervisor) return std::move(supervisor.error().context("supervisor cgroup"));
        supervisor_cgroup_ = std::move(*supervisor);
        CORRAL_TRY(supervisor_cgroup_.attach(::getpid()), "move corrald into its cgroup");
        // The zygote was forked before (constructor) and must leave <v2_own> empty too; one
        // that cannot follow is given up (launches then fork from the worker).
        LaunchWorker* worker = LaunchWorker::shared();
        if (LaunchZygote* zygote = worker != nullptr ? worker->zygote() : nullptr) {
            if (Status moved = supervisor_cgroup_.attach(zygote->pid()); !moved) {
                if (config_.log)
                    config_.log("launch zygote given up: " + moved.error().describe());
                zygote->give_up();
            }
        }
    }
    auto sessions = create_or_adopt(instance_cgroup_, "sessions");
    if (!sessions) return std::move(sessions.error().context("sessions cgroup"));
    sessions_cgroup_ = std::move(*sessions);
    auto pool = PortPool::create(config_.port_first, config_.port_last);
    if (!pool) return std::move(pool.error().context("port pool"));
    ports_ = std::move(*pool);
    limits_ = make_limit_backend(host_);
    reaper_ = std::make_unique<ChildReaper>(io_, config_.set_child_subreaper);
    remover_ = std::make_unique<TreeRemover>();
    if (config_.journal) {
        CORRAL_TRY(open_journal(journal_bytes), "journal");
        adopt_sessions(std::move(adoptable), scope);
    }
    remove_discarded_leftovers();
    directory_stock_ = std::make_unique<SessionDirectoryStock>(
        config_.state_dir + "/spare-sessions", config_.state_dir + "/sessions",
        kSpareSessionDirectories, kPreparedMarker);
    for (const auto& [name, count] : config_.prepared) pools_[name].target = count;
    if (!pools_.empty()) {
        refill_timer_ = std::make_unique<boost::asio::steady_timer>(io_);
        schedule_refill(Millis(0));
    }
    return {};
}

// Start-up clean-up renames what it reaps out of the way (and finds what a previous run had
// renamed but not yet deleted); the deletion itself runs while this run already answers.
void SessionManager::remove_discarded_leftovers() {
    for (auto& dir : leftovers_.discarded) remover_->remove(std::move(dir));
    leftovers_.discarded.clear();
}

SessionContext SessionManager::session_context() {
    return SessionContext{io_,
                          *reaper_,
                          *ports_,
                          *limits_,
                          sessions_cgroup_,
                          config_.state_dir + "/sessions",
                          config_.instance_name,
                          config_.port_host,
                          config_.max_finished_processes,
                          config_.egress,
                          journal_.get(),
                          config_.journal && config_.keep_output,
                          remover_.get(),
                          directory_stock_.get()};
}

SessionManager::~SessionManager() {
    *alive_ = false;
    retention_timers_.clear();
    auto sessions = std::move(sessions_);
    sessions_.clear();
    ended_registered_ = 0;
    for (auto& [sid, session] : sessions) session->end_now();
    sessions.clear();
    auto starting = std::move(starting_);
    starting_.clear();
    for (auto& [sid, session] : starting) session->end_now();
    starting.clear();
    auto pools = std::move(pools_);
    pools_.clear();
    for (auto& [name, pool] : pools) {
        for (auto& entry : pool.ready) entry.session->end_now();
        for (auto& [sid, entry] : pool.preparing) entry.session->end_now();
    }
    pools.clear();
    auto discarding = std::move(discarding_);
    discarding_.clear();
    for (auto& [sid, session] : discarding) session->end_now();
    discarding.clear();
    (void)sessions_cgroup_.remove();
    if (supervisor_cgroup_.valid()) {
        // Move ourselves back where we started so our own leaf can be removed.
        const std::string& home = host_.v2_started_in.empty() ? host_.v2_own : host_.v2_started_in;
        if (auto own = Cgroup::open_unowned(home)) (void)own->attach(::getpid());
        (void)supervisor_cgroup_.remove();
    }
    (void)instance_cgroup_.remove();
}

const std::string& SessionManager::sessions_cgroup_path() const {
    return sessions_cgroup_.path();
}

// A named policy is looked up in the policy dir first (<dir>/<name>.yaml), then as a preset;
// paths are refused and inline policies extend presets and the policy dir only (issue 10.2).
static PolicyParseResult resolve_policy(const SessionManagerConfig& config,
                                        const CreateSessionRequest& request) {
    if (request.resolved_policy) return PolicyParseResult{request.resolved_policy, {}};
    if (!request.policy_yaml.empty())
        return parse_confined_policy(request.policy_yaml, "<inline>", config.policy_dir);
    return load_named_policy_compiled(request.policy.empty() ? "default" : request.policy,
                             config.policy_dir);
}

Result<std::string> SessionManager::new_session_id(const std::string& requested) {
    if (!requested.empty()) {
        if (!valid_session_id(requested)) {
            return sys_error(EINVAL,
                             "bad session id `" + requested + "` (1-64 of A-Z a-z 0-9 - _)");
        }
        // A prepared session's id is random (48 bits) and nobody's yet: taken, like a starting one.
        if (starting_.count(requested) != 0 || is_prepared(requested))
            return sys_error(EEXIST, "session id `" + requested +
                                         "` is taken (a session with it is being created)");
        auto tomb = tombstones_.find(requested);
        if (sessions_.count(requested) != 0 ||
            (tomb != tombstones_.end() && !tomb->second->reusable)) {
            return sys_error(EEXIST, "session id `" + requested + "` is taken");
        }
        if (tomb != tombstones_.end()) {
            tombstones_.erase(tomb);
            tombstone_order_.erase(
                std::find(tombstone_order_.begin(), tombstone_order_.end(), requested));
        }
        return requested;
    }
    for (;;) {
        auto token = generate_token();
        if (!token) return std::move(token.error());
        std::string id = "s" + token->substr(4, 12);
        if (sessions_.count(id) == 0 && starting_.count(id) == 0 && tombstones_.count(id) == 0 &&
            !is_prepared(id))
            return id;
    }
}

// A session must not reach the daemon's own state (every session's files live under the state
// dir) nor its socket (a request without a token has the daemon's full rights). With a mount
// namespace they are hidden; without one the policy has chosen no filesystem isolation at all.
void SessionManager::hide_daemon_paths(Policy& policy) const {
    if (!policy.namespaces.mount) return;
    auto& hidden = policy.filesystem.hidden;
    auto hide = [&](const std::string& path) {
        if (!path.empty() && path != "/") hidden.push_back(path);
    };
    hide(config_.state_dir);
    for (const auto& path : config_.hidden_from_sessions) hide(path);
}

size_t SessionManager::live_count() const {
    return starting_.size() + session_count();
}

void SessionManager::register_session(const std::string& sid, std::shared_ptr<Session> session) {
    // Never one already ended in practice (a creation answers only a ready one): counted anyway.
    ended_registered_ += session->state() == SessionState::ended;
    sessions_[sid] = std::move(session);
}

Status SessionManager::check_room() const {
    const size_t live = live_count();
    if (live >= config_.max_sessions)
        return sys_error(EBUSY, "too many sessions (" + std::to_string(live) + ")");
    return {};
}

Result<std::string> SessionManager::prepare_creation(const CreateSessionRequest& request,
                                                     Policy& policy,
                                                     CreateSessionRequest& resolved) {
    if (Status room = check_room(); !room) return std::move(room.error());
    make_room_for_client();
    auto id = new_session_id(request.id);
    if (!id) return std::move(id.error());
    PolicyParseResult parsed = resolve_policy(config_, request);
    if (!parsed.ok()) return sys_error(EINVAL, "policy: " + parsed.format_errors());
    hide_daemon_paths(*parsed.policy);
    policy = std::move(*parsed.policy);

    resolved = request;
    if (!request.workdir.empty()) {
        auto bound = resolve_workdir(config_.workdir_roots, request.workdir);
        if (!bound) return std::move(bound.error());
        resolved.bound_workdir = std::move(*bound);
    }
    return id;
}

CreatedSession SessionManager::created_record(const Session& session) const {
    CreatedSession created;
    created.info = session.info();
    created.full_token = session.full_token();
    created.restricted_token = session.restricted_token();
    return created;
}

Result<CreatedSession> SessionManager::create_session(const CreateSessionRequest& request) {
    Policy policy;
    CreateSessionRequest resolved;
    auto id = prepare_creation(request, policy, resolved);
    if (!id) return std::move(id.error());
    auto session = Session::create(session_context(), *id, std::move(policy), resolved,
                                   [this](Session& ended) { on_session_ended(ended.id()); });
    if (!session) return std::move(session.error());
    register_session(*id, *session);
    return created_record(**session);
}

void SessionManager::async_create_session(const CreateSessionRequest& request,
                                          CreateHandler handler) {
    auto answer = [this](CreateHandler handler, Result<CreatedSession> result) {
        boost::asio::post(
            io_, [handler = std::move(handler), result = std::move(result)] { handler(result); });
    };
    if (Status room = check_room(); !room)
        return answer(std::move(handler), std::move(room.error()));
    // A prepared session when the request asks for nothing its holder's setup decided (issue 18).
    if (auto prepared = take_prepared(request)) {
        Status claimed = prepared->claim(request);
        if (claimed) {
            register_session(prepared->id(), prepared);
            return answer(std::move(handler), created_record(*prepared));
        }
        if (config_.log) config_.log("prepared session: " + claimed.error().describe());
        discard_prepared(std::move(prepared), "claim-failed");  // and a normal creation
    }
    Policy policy;
    CreateSessionRequest resolved;
    auto id = prepare_creation(request, policy, resolved);
    if (!id) return answer(std::move(handler), std::move(id.error()));
    auto session = Session::start(session_context(), *id, std::move(policy), resolved,
                                  [this](Session& ended) { on_session_ended(ended.id()); });
    if (!session) return answer(std::move(handler), std::move(session.error()));
    starting_[*id] = *session;
    (*session)->await_ready([this, alive = alive_, sid = *id, answer,
                             handler = std::move(handler)](Status ready) mutable {
        if (!*alive) return;
        auto found = starting_.find(sid);
        if (found == starting_.end()) return;
        std::shared_ptr<Session> started = std::move(found->second);
        starting_.erase(found);
        if (!ready) return answer(std::move(handler), std::move(ready.error()));
        register_session(sid, started);
        answer(std::move(handler), created_record(*started));
    });
}

std::vector<SessionInfo> SessionManager::list_sessions(const std::optional<std::string>& only) {
    std::vector<SessionInfo> list;
    if (only) {
        auto found = sessions_.find(*only);
        if (found != sessions_.end() && found->second->state() != SessionState::ended)
            list.push_back(found->second->info());
        return list;
    }
    for (const auto& [sid, session] : sessions_) {
        if (session->state() != SessionState::ended) list.push_back(session->info());
    }
    return list;
}

size_t SessionManager::session_count() const {
    return sessions_.size() - ended_registered_;
}

bool SessionManager::knows_session(const std::string& sid) {
    auto found = sessions_.find(sid);
    if (found != sessions_.end()) {
        found->second->touch();
        return true;
    }
    return tombstones_.count(sid) != 0;
}

Result<SessionInfo> SessionManager::get_session(const std::string& sid) {
    auto found = sessions_.find(sid);
    if (found != sessions_.end()) {
        found->second->touch();
        return found->second->info();
    }
    auto tomb = tombstones_.find(sid);
    if (tomb != tombstones_.end()) return tomb->second->info;
    return unknown_session(sid);
}

Error SessionManager::unknown_session(const std::string& sid) const {
    if (starting_.count(sid) != 0)
        return sys_error(ENOENT, "no session `" + sid +
                                     "` yet: it is still being created (its namespaces are being "
                                     "set up)");
    return sys_error(ENOENT, "no session `" + sid + "`");
}

void SessionManager::end_session(const std::string& sid, EndHandler handler,
                                 std::string reason) {
    auto found = sessions_.find(sid);
    if (found != sessions_.end()) {
        found->second->end(std::move(reason), std::move(handler));
        return;
    }
    auto tomb = tombstones_.find(sid);
    Result<EndSessionReport> result = unknown_session(sid);
    if (tomb != tombstones_.end()) {
        EndSessionReport report;
        report.id = sid;
        report.already_ended = true;
        report.end_reason = tomb->second->info.end_reason;
        report.processes_killed = tomb->second->info.processes_killed;
        result = report;
    }
    boost::asio::post(
        io_, [handler = std::move(handler), result = std::move(result)] { handler(result); });
}

void SessionManager::shutdown(std::function<void()> done) {
    auto remaining = std::make_shared<size_t>(0);
    auto finish = std::make_shared<std::function<void()>>(std::move(done));
    std::vector<std::string> ids;
    for (const auto& [sid, session] : sessions_) {
        if (session->state() != SessionState::ended) ids.push_back(sid);
    }
    std::vector<std::shared_ptr<Session>> starting;
    for (const auto& [sid, session] : starting_) starting.push_back(session);
    // Prepared sessions are nobody's: they end with the daemon (never journalled, so a restart
    // would not have them either). Counted before any end starts.
    *remaining = ids.size() + starting.size() + 1 + prepared_total() + discarding_.size();
    auto one_done = [remaining, finish] {
        if (--*remaining == 0 && *finish) (*finish)();
    };
    end_prepared(one_done);
    for (const auto& sid : ids) {
        sessions_[sid]->end("shutdown", [one_done](Result<EndSessionReport>) { one_done(); });
    }
    // A creation under way fails (its creator hears so) and what it made is ended the same way.
    for (const auto& session : starting) {
        session->abort_start(sys_error(ESHUTDOWN, "corrald is shutting down"));
        session->end("shutdown", [one_done](Result<EndSessionReport>) { one_done(); });
    }
    boost::asio::post(io_, one_done);
}

Result<std::map<std::string, std::string>> SessionManager::patch_env(const std::string& sid,
                                                                     const EnvPatch& patch) {
    auto session = find_active(sid);
    if (!session) return std::move(session.error());
    return (*session)->patch_env(patch);
}

Result<EgressInfo> SessionManager::set_egress(const std::string& sid, const EgressSpec& spec) {
    auto session = find_active(sid);
    if (!session) return std::move(session.error());
    if (auto status = (*session)->set_egress(spec); !status) return std::move(status.error());
    return (*session)->info().egress.value_or(EgressInfo{});
}

Result<std::shared_ptr<Session>> SessionManager::find_active(const std::string& sid) {
    auto session = find_any(sid);
    if (!session) return session;
    if ((*session)->state() != SessionState::active) {
        return sys_error(ESHUTDOWN,
                         "session `" + sid + "` is " + std::string(to_string((*session)->state())));
    }
    (*session)->touch();
    return session;
}

Result<std::shared_ptr<Session>> SessionManager::find_any(const std::string& sid) {
    auto found = sessions_.find(sid);
    if (found == sessions_.end()) {
        if (tombstones_.count(sid) != 0)
            return sys_error(ESHUTDOWN, "session `" + sid + "` has ended");
        return unknown_session(sid);
    }
    return found->second;
}

// An ended session stays readable (records, output) for the retention window, then shrinks to a
// tombstone so that a late DELETE still says "already ended".
void SessionManager::on_session_ended(const std::string& sid) {
    if (sessions_.count(sid) == 0) return;  // a prepared session nobody claimed: nothing to keep
    ++ended_registered_;                    // once: a session ends once (Session::finalize)
    refill_after_end();                     // room again for prepared sessions that waited for it
    if (auto waiters = end_waiters_.find(sid); waiters != end_waiters_.end()) {
        for (auto& [alive, handler] : waiters->second)
            boost::asio::post(io_, [alive, handler = std::move(handler), sid] {
                if (*alive) handler(sys_error(ESHUTDOWN, "session `" + sid + "` has ended"));
            });
        end_waiters_.erase(waiters);
    }
    auto timer = std::make_shared<boost::asio::steady_timer>(io_, config_.ended_retention);
    retention_timers_[sid] = timer;
    timer->async_wait([this, sid, alive = alive_](const boost::system::error_code& error) {
        if (error || !*alive) return;
        retention_timers_.erase(sid);
        auto found = sessions_.find(sid);
        if (found == sessions_.end()) return;
        remember_tombstone(found->second->info());
        ended_registered_ -= found->second->state() == SessionState::ended;
        sessions_.erase(found);
    });
}

WaitHandle SessionManager::async_wait_session_end(const std::string& sid,
                                                  StatusHandler handler) {
    auto alive = std::make_shared<bool>(true);
    auto session = find_any(sid);
    if (!session || (*session)->state() == SessionState::ended) {
        Error error = session ? sys_error(ESHUTDOWN, "session `" + sid + "` has ended")
                              : std::move(session.error());
        boost::asio::post(io_, [alive, handler = std::move(handler), error = std::move(error)] {
            if (*alive) handler(error);
        });
        return WaitHandle(alive);
    }
    auto& waiters = end_waiters_[sid];
    // Waits given up on (a watch whose client left) go now, not when the session ends.
    std::erase_if(waiters, [](const auto& waiter) { return !*waiter.first; });
    waiters.emplace_back(alive, std::move(handler));
    return WaitHandle(alive);
}

// Prepared sessions a previous run left (never claimed: their marker is still there) were no
// client's: reaped with the rest, they leave no "ended" record either (issue 18).
std::set<std::string> SessionManager::prepared_leftovers(const std::string& state_dir) {
    std::set<std::string> found;
    std::error_code error;
    const std::filesystem::path sessions = state_dir + "/sessions";
    for (auto it = std::filesystem::directory_iterator(sessions, error);
         !error && it != std::filesystem::directory_iterator(); it.increment(error)) {
        const std::string sid = it->path().filename();
        struct stat st;
        const std::string marker = it->path().string() + "/" + kPreparedMarker;
        if (valid_session_id(sid) && ::lstat(marker.c_str(), &st) == 0 && S_ISREG(st.st_mode))
            found.insert(sid);
    }
    return found;
}

void SessionManager::remember_reaped_sessions(const std::set<std::string>& never_claimed) {
    const auto now = std::chrono::system_clock::now();
    for (const auto& sid : leftovers_.sessions) {
        if (!valid_session_id(sid) || never_claimed.count(sid) != 0) continue;
        SessionInfo info;
        info.id = sid;
        info.state = SessionState::ended;
        info.end_reason = "daemon-restart";
        info.created_at = leftovers_.created_at.count(sid) ? leftovers_.created_at.at(sid) : now;
        info.ended_at = now;
        auto killed = leftovers_.processes_by_session.find(sid);
        info.processes_killed =
            killed == leftovers_.processes_by_session.end() ? 0 : killed->second;
        remember_tombstone(info, true);
    }
}

void SessionManager::remember_tombstone(const SessionInfo& info, bool reusable) {
    auto tomb = std::make_unique<Tombstone>();
    tomb->info = info;
    tomb->reusable = reusable;
    tomb->info.processes.clear();
    tombstones_[info.id] = std::move(tomb);
    tombstone_order_.push_back(info.id);
    while (tombstone_order_.size() > config_.max_tombstones) {
        tombstones_.erase(tombstone_order_.front());
        tombstone_order_.erase(tombstone_order_.begin());
    }
}

void SessionManager::touch(const std::string& sid) {
    auto found = sessions_.find(sid);
    if (found != sessions_.end()) found->second->touch();
}

Result<TokenGrant> SessionManager::check_token(std::string_view token) {
    // Every active session's tokens are compared, matching or not, so timing reveals nothing.
    std::optional<TokenGrant> grant;
    for (const auto& [sid, session] : sessions_) {
        if (session->state() == SessionState::ended) continue;
        const bool full = tokens_equal(token, session->full_token());
        const bool restricted = tokens_equal(token, session->restricted_token());
        if ((full || restricted) && !grant) {
            grant = TokenGrant{sid, full ? TokenRights::full : TokenRights::restricted};
        }
    }
    if (!grant) return sys_error(EACCES, "invalid token");
    touch(grant->session_id);
    return *grant;
}

}  // namespace corral
