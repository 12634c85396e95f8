#pragma once
// corrald's signals are handled on its event loop. Its other threads (the tree remover, the
// session directory stock, the setup watchdog, the launch worker, the namespace thread) must
// never take one: a process-directed signal goes to any thread that does not block it, and
// there it would interrupt a blocking call or run no handler at all. Blocking them from the
// thread's first instruction, not from its body's, leaves no window: the new thread inherits
// its creator's mask, which is restored at once.

#include <signal.h>

#include <thread>
#include <utility>

namespace corral {

/// Starts `body` on a new thread that blocks every signal. The caller's mask is restored
/// whether or not the thread could be started (std::system_error, e.g. EAGAIN at a pids limit).
template <class Body>
std::thread start_thread_without_signals(Body&& body) {
    struct Restore {
        sigset_t previous;
        ~Restore() { ::pthread_sigmask(SIG_SETMASK, &previous, nullptr); }
    } restore;
    sigset_t all;
    ::sigfillset(&all);
    ::pthread_sigmask(SIG_BLOCK, &all, &restore.previous);
    return std::thread(std::forward<Body>(body));
}

}  // namespace corral
