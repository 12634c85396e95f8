// Prepared sessions (issue 18, "A session ready to run"): corrald --prepare POLICY=N keeps sessions
// built ahead of any request, so a creation that asks for nothing a holder's setup decides takes
// one instead of waiting for namespaces, mounts and the network (SessionManager's pool).
//
// Security, for a boundary product: a prepared session is state that waits to be handed to some
// tenant, which is what "warm pool" reuse bugs get wrong (a pooled sandbox that carried one
// tenant's files, processes or credentials to the next). Here a prepared session has never run
// anything a client asked for, holds no tokens (they are made at claim), is not journalled (a
// restart reaps it with everything unowned), and is handed out once: claim() refuses a session
// that is not an untouched prepared one, and the manager removes it from the pool before.
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>

#include "isolation/launch_worker.hpp"
#include "isolation/launch_zygote.hpp"
#include "isolation/pid_ref.hpp"
#include "isolation/setup_deadline.hpp"
#include "sessions/session.hpp"

namespace corral {
namespace {

/// <state>/sessions/<sid>/.prepared while a prepared session is nobody's (and, journalled, until
/// its claim's answer is out): a restart after a crash reaps such a session like any unowned one
/// and keeps no "ended" record of an id no client had, unless the journal knows the id
/// (SessionManager::remember_reaped_sessions). Beside the session's root, never inside it.
std::string prepared_marker(const std::string& root) {
    return root.substr(0, root.rfind('/')) + "/" + kPreparedMarker;
}

}  // namespace

void Session::complete_preparation() {
    Status built = build_request_independent(*start_request_);
    if (!built) {
        fail_start(std::move(built.error().context("set up")));
        return;
    }
    // The first process's leaf too: its mkdir is then not on the first run's path (a cgroup v2
    // mkdir with the session's controllers is tens of microseconds; issue 18, "session ready").
    // Best effort: without it the leaf is made at launch, as for every later process. A restart
    // finds it empty and owned by no process, and removes it (reap_unowned_leaves).
    if (auto leaf = cgroup_.create_child("p1")) first_leaf_ = std::move(*leaf);
    start_first_launch_ahead();
    start_request_.reset();
    state_ = SessionState::active;  // still nobody's: only the manager's pool holds it
    auto ready = std::move(ready_handler_);
    ready_handler_ = nullptr;
    if (ready) ready(Status{});
}

void Session::start_first_launch_ahead() {
    // Only where a launch forks (a session with namespaces: launch_may_share_memory() is false)
    // and the zygote is there to start it: its child may allocate once its command comes.
    LaunchWorker* worker = LaunchWorker::shared();
    LaunchZygote* zygote = worker != nullptr ? worker->started_zygote() : nullptr;
    if (zygote == nullptr || !first_leaf_ || !sandbox_.active() || sandbox_.namespace_flags() == 0)
        return;
    LaunchSpec part;
    part.cgroup_fd = first_leaf_->dir_fd();
    if (limits_) part.v1_join_fds = limits_->join_fds();
    part.namespace_holder_pidfd = sandbox_.holder_pidfd();
    part.namespace_flags = sandbox_.namespace_flags();
    part.confinement = &confinement_;  // of which only the bounding set is applied ahead
    auto waiting = zygote->launch_ahead(part);
    if (!waiting) return;  // no zygote to ask: p1 is launched as every process
    if (!*waiting) {
        // Launched as every process then. Said once per daemon: a policy whose limits leave no
        // room for it (pids.max of 1) would say it for every session the pool prepares.
        static std::atomic<bool> said{false};
        if (!said.exchange(true))
            std::fprintf(stderr,
                         "corral: session %s: its first process not started ahead (%s); such "
                         "sessions launch it as every other, and this is not said again\n",
                         id_.c_str(), waiting->error().describe().c_str());
        return;
    }
    first_launch_ = std::make_shared<WaitingLaunch>(std::move(**waiting));
    // Its start time and CPU time now, while nothing waits for them (the first run would read
    // them otherwise). By its pid, so only while its pidfd says it has not exited (a pid reaped
    // and reused would name another process). The zygote answers right after the clone, so the
    // child may still be entering its session: its command's setup deadline may then see that
    // work as progress and give it one more window, never less.
    if (auto ticks = process_start_ticks(first_launch_->child.pid()))
        first_launch_->start_ticks = *ticks;
    first_launch_->cpu_ns = process_cpu_ns(first_launch_->child.pid());
    pollfd exited{first_launch_->child.pidfd(), POLLIN, 0};
    if (::poll(&exited, 1, 0) != 0) {
        first_launch_->start_ticks = 0;  // read again at launch, if it is ever launched
        first_launch_->cpu_ns.reset();
    }
}

Status Session::claim(const CreateSessionRequest& request) {
    // Handed out once, and only untouched: no process ever ran in it, no token ever existed.
    if (!prepared_ || state_ != SessionState::active || next_process_ != 1 || !processes_.empty() ||
        !full_token_.empty() || journalled_)
        return sys_error(EINVAL, "session `" + id_ + "` is not an unclaimed prepared session");
    prepared_ = false;
    // The marker says "nobody's" to a restart. With a journal, the claim's record says otherwise
    // (recovery takes a journalled session for a claimed one, marker or not), so the unlink,
    // ~65 us, waits until the client has its answer (settle_claim, or the session's end).
    // Without one, nothing else would tell, so it goes before the answer.
    marker_left_ = true;
    if (context_.journal == nullptr) CORRAL_TRY(remove_marker(), "claim prepared session " + id_);
    CORRAL_TRY(apply_request(request), "claim prepared session " + id_);
    created_at_ = std::chrono::system_clock::now();  // its life starts now, for the client
    // Journalled before its id and tokens reach anyone, as every creation is.
    journalled_ = true;
    CORRAL_TRY(journal_session(), "claim prepared session " + id_);
    arm_session_timer();
    arm_idle_timer();
    return {};
}

void Session::settle_claim() {
    // A failure leaves it for the session's end (release_resources) to try again.
    if (marker_left_ && state_ != SessionState::ended) (void)remove_marker();
}

Status Session::remove_marker() {
    if (directory_.root().empty()) return {};
    const std::string marker = prepared_marker(directory_.root());
    if (::unlink(marker.c_str()) != 0 && errno != ENOENT)
        return sys_error("remove `" + marker + "`");
    marker_left_ = false;
    return {};
}

}  // namespace corral
