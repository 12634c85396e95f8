// The launch zygote's side (launch_zygote.hpp): serves corrald's launches and holder clones on
// its socket. Runs in a fork of corrald, or as its own small program (corrald-launch,
// supervisor/corrald_launch_main.cpp), which corrald executes from the image it carries.
#include <linux/close_range.h>
#include <malloc.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "isolation/child_report.hpp"
#include "isolation/descriptor_passing.hpp"
#include "isolation/holder_plan.hpp"
#include "isolation/launch_ahead.hpp"
#include "isolation/launch_message.hpp"
#include "isolation/launch_zygote.hpp"
#include "isolation/launch_zygote_protocol.hpp"

namespace corral {
namespace {

using zygote_protocol::Answer;
using zygote_protocol::kCaller;
/// Wipes a request once served: every child the zygote starts later is a copy of its memory,
/// freed memory included, and must not carry another launch's environment (secrets) with it.
void scrub(std::string& bytes) {
    ::explicit_bzero(bytes.data(), bytes.size());
}

void scrub(DecodedLaunch& launch) {
    for (auto* strings : {&launch.spec.argv, &launch.spec.env})
        for (auto& text : *strings) scrub(text);
    scrub(launch.spec.cwd);
}

/// A holder's plan names the session's paths (its directory, so its id): gone with the request.
void scrub(DecodedHolder& holder) {
    scrub(holder.plan.hostname);
    for (MountOp& op : holder.plan.mounts.ops)
        for (auto* text : {&op.source, &op.target, &op.data, &op.step}) scrub(*text);
}

/// What the zygote answers to one request: the Answer, an error's message after it, and the
/// descriptors attached (owned here until sent; the child is corrald's, which has them then).
struct Served {
    Answer answer;
    std::string text;
    std::vector<UniqueFd> attached;
};

Served failed(Error error) {
    Served served;
    served.answer.failed = 1;
    served.answer.code = error.code;
    served.text = std::move(error.message);
    return served;
}

/// launch_begin() of a command, as corrald's child (CLONE_PARENT): its report channel and pidfd.
Served serve_launch(std::string_view bytes, std::vector<UniqueFd> fds) {
    auto decoded = decode_launch(bytes, std::move(fds));
    if (!decoded) return failed(std::move(decoded.error()));
    (*decoded)->spec.clone_parent = true;
    auto started = corral::launch_begin((*decoded)->spec);
    scrub(**decoded);
    if (!started) return failed(std::move(started.error()));
    Served served;
    served.answer.pid = started->child.pid();
    served.answer.listener_expected = started->listener_expected;
    served.answer.has_pidfd = started->child.pidfd() >= 0;
    served.attached.push_back(std::move(started->report));
    if (served.answer.has_pidfd) served.attached.push_back(started->child.take_pidfd());
    return served;
}

/// A session's first process started ahead (launch_ahead.hpp), as corrald's child
/// (CLONE_PARENT): corrald's end of its `go` socket and its pidfd.
Served serve_ahead(std::string_view bytes, std::vector<UniqueFd> fds) {
    auto decoded = decode_launch(bytes, std::move(fds), ZygoteRequest::ahead);
    if (!decoded) return failed(std::move(decoded.error()));
    (*decoded)->spec.clone_parent = true;
    auto started = start_waiting_launch((*decoded)->spec);
    scrub(**decoded);
    if (!started) return failed(std::move(started.error()));
    Served served;
    served.answer.pid = started->child.pid();
    served.answer.has_pidfd = started->child.pidfd() >= 0;
    served.attached.push_back(std::move(started->go));
    if (served.answer.has_pidfd) served.attached.push_back(started->child.take_pidfd());
    return served;
}

/// Where the heap a holder cloned here may drop once set up starts (HolderPlan::heap_start), 0
/// for none. It runs on our main stack's copy, the plan in our heap (read before the drop:
/// holder_main), so the heap is droppable unless this thread's own TLS lies in it, as glibc puts
/// a static binary's main-thread TLS (__libc_setup_tls uses sbrk); then it is kept, a copy of
/// this small process's heap, not of corrald's.
uintptr_t droppable_heap() {
    static thread_local char in_tls = 0;
    const uintptr_t start = heap_start();
    const auto tls = reinterpret_cast<uintptr_t>(&in_tls);
    const auto end = reinterpret_cast<uintptr_t>(::sbrk(0));
    return tls >= start && tls < end ? 0 : start;
}

/// A session's namespace holder, as corrald's child (CLONE_PARENT): the same clone as corrald's
/// (Sandbox::start), born in its cgroup with the plan's namespaces, from a copy of this small
/// process. Its pidfd goes back.
Served serve_holder(int socket, const char* holder_name, std::string_view bytes,
                    std::vector<UniqueFd> fds) {
    auto decoded = decode_holder(bytes, std::move(fds));
    if (!decoded) return failed(std::move(decoded.error()));
    HolderPlan& plan = (*decoded)->plan;
    plan.heap_start = droppable_heap();
    int pidfd = -1;
    const pid_t pid = clone3_fork(CLONE_PARENT | CLONE_PIDFD | static_cast<uint64_t>(plan.flags),
                                  (*decoded)->cgroup_fd, &pidfd);
    if (pid == 0) {
        // Before anything of the session: our socket to corrald is not the holder's
        // (release_descriptors would close it only after its setup, and a session's process
        // could take it meanwhile once the holder is briefly dumpable; CVE-2024-21626).
        ::close(socket);
        // Named as a holder cloned from corrald is (`ps`, and tests that count our zygotes).
        ::prctl(PR_SET_NAME, holder_name, 0, 0, 0);
        holder_main(plan);
    }
    const int error = errno;
    scrub(**decoded);
    if (pid < 0) return failed(sys_error(error, "clone3 namespace holder (in the launch zygote)"));
    Served served;
    served.answer.pid = pid;
    served.answer.has_pidfd = 1;
    served.attached.emplace_back(pidfd);
    return served;
}

/// Answers one request; `holder_name` is corrald's name, which a holder keeps.
void serve_one(int socket, const char* holder_name, PassedMessage& request,
               std::vector<UniqueFd> fds) {
    auto kind = request_kind(request.bytes);
    Served served = !kind                           ? failed(std::move(kind.error()))
                    : *kind == ZygoteRequest::holder ? serve_holder(socket, holder_name,
                                                                    request.bytes, std::move(fds))
                    : *kind == ZygoteRequest::ahead  ? serve_ahead(request.bytes, std::move(fds))
                                                     : serve_launch(request.bytes, std::move(fds));
    std::string bytes(reinterpret_cast<const char*>(&served.answer), sizeof served.answer);
    bytes += served.text;
    std::vector<int> attached;
    for (const auto& fd : served.attached) attached.push_back(fd.get());
    scrub(request.bytes);
    // Our copies of what is attached close when `served` goes: the child is corrald's
    // (CLONE_PARENT), and corrald has them now. If corrald is gone, so are we.
    if (!send_passing(socket, bytes, attached, kCaller)) ::_exit(0);
    // An error's text names the launch's paths (its cwd, its program): gone as the request is.
    scrub(bytes);
    scrub(served.text);
}

}  // namespace

[[noreturn]] void launch_zygote_main(int socket, pid_t parent,
                                     const char* holder_name) noexcept {
    // Dies with corrald: the signal comes when the worker's thread ends (the whole process, as it
    // never returns), and a parent gone before the prctl is caught by the look after it.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    if (::getppid() != parent) ::_exit(0);
    ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    char name[16] = {};  // what holders are named (PR_SET_NAME: 16 bytes with its NUL)
    std::memcpy(name, holder_name, ::strnlen(holder_name, sizeof name - 1));
    ::prctl(PR_SET_NAME, "corrald-launch", 0, 0, 0);
    // corrald's handlers and ignored signals (SIGPIPE, which survives execve too) go, once: the
    // zygote needs none (every signal stays blocked, as on the worker's thread; its sends use
    // MSG_NOSIGNAL), so the children it launches find every disposition at the default and skip
    // resetting them.
    reset_signal_dispositions_for_good();
    // The worker's table is stdio, its socket and ours; keep stdio (diagnostics) and ours.
    ::close_range(3, static_cast<unsigned>(socket) - 1, 0);
    ::close_range(static_cast<unsigned>(socket) + 1, ~0U, 0);
    // Freed memory goes back to the kernel: every launch copies what is left.
    ::malloc_trim(0);
    // Ready: start() returns once this arrives, so the zygote it returns is this one, named and
    // bound to corrald's life, with the capabilities it says.
    const auto ready = zygote_protocol::Ready::of_this_thread();
    if (!send_passing(socket, ready.bytes(), {}, kCaller)) ::_exit(0);
    for (;;) {
        auto request = receive_passing(socket, kCaller);
        if (!request) {
            if (request.error().code == EPROTO) continue;  // its descriptors are closed
            ::_exit(0);                                      // corrald's end is gone
        }
        std::vector<UniqueFd> fds = std::move(request->fds);
        serve_one(socket, name, *request, std::move(fds));
        ::malloc_trim(0);  // what the launch allocated and freed goes, not into the next copy
    }
}

}  // namespace corral
