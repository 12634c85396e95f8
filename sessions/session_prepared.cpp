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
#include "sessions/session.hpp"

namespace corral {

void Session::complete_preparation() {
    Status built = build_request_independent(*start_request_);
    if (!built) {
        fail_start(std::move(built.error().context("set up")));
        return;
    }
    start_request_.reset();
    state_ = SessionState::active;  // still nobody's: only the manager's pool holds it
    auto ready = std::move(ready_handler_);
    ready_handler_ = nullptr;
    if (ready) ready(Status{});
}

Status Session::claim(const CreateSessionRequest& request) {
    // Handed out once, and only untouched: no process ever ran in it, no token ever existed.
    if (!prepared_ || state_ != SessionState::active || next_process_ != 1 || !processes_.empty() ||
        !full_token_.empty() || journalled_)
        return sys_error(EINVAL, "session `" + id_ + "` is not an unclaimed prepared session");
    prepared_ = false;
    CORRAL_TRY(apply_request(request), "claim prepared session " + id_);
    created_at_ = std::chrono::system_clock::now();  // its life starts now, for the client
    // Journalled before its id and tokens reach anyone, as every creation is.
    journalled_ = true;
    CORRAL_TRY(journal_session(), "claim prepared session " + id_);
    arm_session_timer();
    arm_idle_timer();
    return {};
}

}  // namespace corral
