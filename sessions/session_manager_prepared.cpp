// Prepared sessions (issue 18, "A session ready to run"): `corrald --prepare POLICY=N` keeps N
// sessions of a named policy built up to the point where only the request's own part is left
// (session_prepared.cpp), so POST /v1/sessions answers without waiting for a holder's setup.
//
// A prepared session goes through the normal asynchronous creation (Session::start, await_ready)
// but is marked prepared: it is never in sessions_ or starting_, so no route finds it (404 "no
// session", as for an id nobody made), it is not listed, not counted by the API as a session, not
// journalled (a kill -9 leaves it to start-up's reaping like any unowned cgroup and directory) and
// has no tokens and no timers. take_prepared() hands one to exactly one creation, removing it from
// the pool first; refills run later on a timer, never on a creation's path.
//
// When: a refill is real work on a 2-CPU host (the holder's clone, its mounts and pivot_root,
// which walks every task on the host, the network namespace), so it waits until clients pause
// (kRefillGate: no request for a few milliseconds, as after a claimed session's first commands,
// or in an agent's think time). A client that never pauses still gets its pool refilled, a
// little later, and a pool down to half its target is refilled at once. Before, a fixed 20 ms after
// each claim, a client creating a session every ~20 ms met the refill on its next creation's first
// run: 7.4-9.6 ms instead of ~3.7 ms beside 1,000 sessions (docs/BENCHMARKS.md).
//
// What a creation may ask for and still take one: a pooled policy by name (or none: `default`),
// env, cwd, commandTimeoutMs, and `ports` only as the policy has them. An `id`, `policyYaml` or
// `workdir` is decided at the holder's setup (the directory, the mounts), so those requests are
// created normally, as is every request when the pool is empty.
#include <algorithm>

#include "policies/compiled/compiled_presets.hpp"
#include "policies/policy_parser.hpp"
#include "sessions/refill_gate.hpp"
#include "sessions/session.hpp"
#include "sessions/session_manager.hpp"

namespace corral {
namespace {

/// How long after a claim (or an end) the pool may be refilled at the earliest. Not redundant
/// with kRefillGate's quiet time: a pool running low skips that wait, and a 0 ms timer's handler
/// can run before the claim's answer is written (the coroutine that writes it is resumed only
/// after the creation's posted handler has run), putting a holder's clone ahead of the answer.
constexpr Millis kRefillDelay{5};
/// A refill starts once no client request arrived for 5 ms, or 20 ms after it was wanted.
constexpr RefillGate kRefillGate{std::chrono::milliseconds(5), std::chrono::milliseconds(20)};
/// How long before a pool whose preparation failed is tried again.
constexpr Millis kRetryDelay{2000};

}  // namespace

bool SessionManager::is_prepared(const std::string& sid) const {
    for (const auto& [name, pool] : pools_) {
        if (pool.preparing.count(sid) != 0) return true;
        for (const auto& entry : pool.ready)
            if (entry.session->id() == sid) return true;
    }
    return discarding_.count(sid) != 0;
}

size_t SessionManager::prepared_total() const {
    size_t total = 0;
    for (const auto& [name, pool] : pools_) total += pool.ready.size() + pool.preparing.size();
    return total;
}

size_t SessionManager::prepared_count() const {
    size_t total = 0;
    for (const auto& [name, pool] : pools_) total += pool.ready.size();
    return total;
}

std::map<std::string, PreparedPoolInfo> SessionManager::prepared_pools() const {
    std::map<std::string, PreparedPoolInfo> pools;
    for (const auto& [name, pool] : pools_)
        pools[name] = PreparedPoolInfo{pool.target, pool.ready.size(), pool.preparing.size()};
    return pools;
}

std::shared_ptr<Session> SessionManager::take_prepared(const CreateSessionRequest& request) {
    if (!request.id.empty() || !request.policy_yaml.empty() || !request.workdir.empty() ||
        request.bound_workdir)
        return nullptr;
    const std::string name = request.policy.empty() ? "default" : request.policy;
    auto found = pools_.find(name);
    if (found == pools_.end()) return nullptr;
    PreparedPool& pool = found->second;
    // The policy dir is read per request: a file changed since preparation means the prepared
    // sessions were built from another policy than the one this client asks for.
    std::optional<Policy> current = request.resolved_policy;
    if (!current) {
        PolicyParseResult parsed = load_named_policy_compiled(name, config_.policy_dir);
        if (!parsed.ok()) return nullptr;
        current = std::move(*parsed.policy);
    }
    if (request.ports && *request.ports != current->network.ports) return nullptr;
    schedule_refill(kRefillDelay);
    while (!pool.ready.empty()) {
        PreparedSession entry = std::move(pool.ready.front());
        pool.ready.pop_front();  // out of the pool before anything else: handed out once
        if (entry.resolved == *current && entry.session->state() == SessionState::active &&
            entry.session->prepared())
            return std::move(entry.session);
        discard_prepared(std::move(entry.session), "policy-changed");
    }
    return nullptr;
}

void SessionManager::discard_prepared(std::shared_ptr<Session> session, std::string reason,
                                      std::function<void()> done) {
    const std::string sid = session->id();
    discarding_[sid] = session;
    session->end(std::move(reason),
                 [this, alive = alive_, sid, done = std::move(done)](Result<EndSessionReport>) {
                     if (!*alive) return;
                     discarding_.erase(sid);
                     if (done) done();
                 });
}

// A client's creation is never refused because of prepared sessions: at the limit, a prepared one
// (a ready one first, it is the cheaper loss) is ended to make room, and refills wait for room.
void SessionManager::make_room_for_client() {
    if (live_count() + prepared_total() < config_.max_sessions) return;
    for (auto& [name, pool] : pools_) {
        if (pool.ready.empty()) continue;
        auto session = std::move(pool.ready.back().session);
        pool.ready.pop_back();
        discard_prepared(std::move(session), "session-limit");
        return;
    }
    for (auto& [name, pool] : pools_) {
        if (pool.preparing.empty()) continue;
        auto session = pool.preparing.begin()->second.session;
        session->abort_start(sys_error(EBUSY, "the session limit is reached"));
        return;  // its await_ready handler takes it out of the pool once it has ended
    }
}

void SessionManager::schedule_refill(Millis delay) {
    if (!refill_timer_ || refill_armed_ || shutting_down_) return;
    if (!refill_wanted_since_) refill_wanted_since_ = std::chrono::steady_clock::now();
    refill_armed_ = true;
    refill_timer_->expires_after(delay);
    refill_timer_->async_wait([this, alive = alive_](const boost::system::error_code& error) {
        if (error || !*alive) return;
        refill_armed_ = false;
        refill_when_quiet();
    });
}

void SessionManager::creation_answered(const std::string& sid) {
    auto found = sessions_.find(sid);
    if (found == sessions_.end() || !found->second->claim_unsettled()) return;  // not a claim
    // Not now: a client that has its answer sends its first command next, and the marker's unlink
    // (~50 us after an idle pause) was read on that command's way. A restart in between still
    // takes the session for a client's: its claim is journalled (Session::claim), and recovery
    // goes by the journal, marker or not (with a journal refused at the restart, as with no
    // journal, a claim in this window would be taken for a prepared one: that window was ~50 us
    // and is now up to the refill gate's 20 ms).
    if (!refill_timer_ || shutting_down_) {  // no refill to ride with
        found->second->settle_claim();
        return;
    }
    claims_to_settle_.push_back(sid);
    schedule_refill(kRefillDelay);  // armed by the claim already, unless a refill ran since
}

void SessionManager::settle_claims() {
    for (const std::string& sid : claims_to_settle_)
        if (auto found = sessions_.find(sid); found != sessions_.end())
            found->second->settle_claim();
    claims_to_settle_.clear();
}

void SessionManager::refill_when_quiet() {
    const auto now = std::chrono::steady_clock::now();
    bool running_low = false;
    for (const auto& [name, pool] : pools_)
        running_low |= 2 * (pool.ready.size() + pool.preparing.size()) <= pool.target;
    const auto wait = kRefillGate.wait(now, last_client_request_,
                                       refill_wanted_since_.value_or(now), running_low);
    if (wait > std::chrono::steady_clock::duration::zero()) {
        schedule_refill(std::chrono::ceil<Millis>(wait));
        return;
    }
    refill_wanted_since_.reset();
    settle_claims();
    refill_pools();
}

void SessionManager::refill_after_end() {
    for (const auto& [name, pool] : pools_) {
        if (pool.ready.size() + pool.preparing.size() < pool.target) {
            schedule_refill(kRefillDelay);
            return;
        }
    }
}

// One session per pool at a time: each one's holder setup runs while the loop serves requests,
// and the next starts once it is ready.
void SessionManager::refill_pools() {
    if (shutting_down_) return;
    for (auto& [name, pool] : pools_) {
        if (!pool.preparing.empty() || pool.ready.size() >= pool.target) continue;
        if (live_count() + prepared_total() >= config_.max_sessions) return;
        prepare_one(name, pool);
    }
}

void SessionManager::prepare_one(const std::string& policy_name, PreparedPool& pool) {
    // Resolved as POST /v1/sessions resolves it (a policy-dir file, else the compiled preset), so
    // a claim compares like with like.
    PolicyParseResult parsed = load_named_policy_compiled(policy_name, config_.policy_dir);
    if (!parsed.ok()) {
        if (config_.log)
            config_.log("prepare `" + policy_name + "`: policy: " + parsed.format_errors());
        schedule_refill(kRetryDelay);
        return;
    }
    Policy resolved = *parsed.policy;
    Policy policy = std::move(*parsed.policy);
    hide_daemon_paths(policy);
    auto id = new_session_id("");
    if (!id) return;
    CreateSessionRequest request;
    request.policy = policy_name;
    auto session =
        Session::start(session_context(), *id, std::move(policy), request,
                       [this](Session& ended) { on_session_ended(ended.id()); }, /*prepared=*/true);
    if (!session) {
        if (config_.log)
            config_.log("prepare `" + policy_name + "`: " + session.error().describe());
        schedule_refill(kRetryDelay);
        return;
    }
    pool.preparing[*id] = PreparedSession{*session, std::move(resolved)};
    (*session)->await_ready([this, alive = alive_, policy_name, sid = *id](Status ready) {
        if (!*alive) return;
        auto found = pools_.find(policy_name);
        if (found == pools_.end()) return;
        auto entry = found->second.preparing.find(sid);
        if (entry == found->second.preparing.end()) return;
        PreparedSession prepared = std::move(entry->second);
        found->second.preparing.erase(entry);
        if (!ready) {  // everything it made is gone already (fail_start)
            if (!shutting_down_ && config_.log)
                config_.log("prepare `" + policy_name + "`: " + ready.error().describe());
            schedule_refill(kRetryDelay);
            return;
        }
        if (shutting_down_) {
            discard_prepared(std::move(prepared.session), "shutdown");
            return;
        }
        found->second.ready.push_back(std::move(prepared));
        // The next one at once: a refill under way goes on (the gate only decides when one
        // starts), else a burst of creations would drain the pool between waits.
        refill_pools();
    });
}

void SessionManager::end_prepared(const std::function<void()>& one_done) {
    shutting_down_ = true;
    if (refill_timer_) refill_timer_->cancel();
    settle_claims();  // the sessions clients have outlive corrald: not as "nobody's"
    // Those already being discarded: their end counts too (taken before this adds more).
    std::vector<std::shared_ptr<Session>> discarding;
    for (auto& [sid, session] : discarding_) discarding.push_back(session);
    for (auto& session : discarding) {
        session->end("shutdown", [one_done](Result<EndSessionReport>) { one_done(); });
    }
    for (auto& [name, pool] : pools_) {
        auto ready = std::move(pool.ready);
        pool.ready.clear();
        for (auto& entry : ready) {
            discard_prepared(std::move(entry.session), "shutdown", one_done);
        }
        // A preparation under way fails and ends what it made, as a starting creation does.
        std::vector<std::shared_ptr<Session>> preparing;
        for (auto& [sid, entry] : pool.preparing) preparing.push_back(entry.session);
        for (auto& session : preparing) {
            session->abort_start(sys_error(ESHUTDOWN, "corrald is shutting down"));
            session->end("shutdown", [one_done](Result<EndSessionReport>) { one_done(); });
        }
    }
}

}  // namespace corral
