// corral_bench_refusal: what counting a refused syscall costs (docs/SECCOMP.md "Refusals in
// reports"). A child under the `default` preset's filter makes N refused calls (ptrace) and N
// allowed ones (getppid), timing each batch; once under the filter as installed without a
// listener (RET_ERRNO: the kernel answers at once) and once with the listener (RET_USER_NOTIF:
// this process answers each call through isolation/seccomp_listener, as corral run and corrald
// do). Rounds alternate the two, and the table prints medians of ns per call with the ratio
// against the plain filter. Needs no privileges.

#include <poll.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "bench_report.hpp"
#include "isolation/child_report.hpp"
#include "isolation/confinement.hpp"
#include "isolation/seccomp_listener.hpp"

namespace {

using namespace corral;

constexpr int kCalls = 20000;
constexpr int kRounds = 9;

double now_ns() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

struct Batch {
    double refused_ns = 0;  ///< per refused call
    double allowed_ns = 0;  ///< per allowed call
};

// In the child: the timed calls, written to `out` as one Batch.
[[noreturn]] void time_calls(int out) {
    Batch batch;
    double start = now_ns();
    for (int i = 0; i < kCalls; ++i) syscall(SYS_ptrace, PTRACE_PEEKDATA, 0, 0, 0);
    batch.refused_ns = (now_ns() - start) / kCalls;
    start = now_ns();
    for (int i = 0; i < kCalls; ++i) syscall(SYS_getppid);
    batch.allowed_ns = (now_ns() - start) / kCalls;
    _exit(write(out, &batch, sizeof batch) == sizeof batch ? 0 : 1);
}

bool measure(const Confinement& confinement, bool counted, Batch& batch) {
    int sockets[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sockets) != 0) return false;
    pid_t child = fork();
    if (child == 0) {
        close(sockets[0]);
        prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
        int listener = -1;
        if (apply_confinement(confinement, counted ? &listener : nullptr) != nullptr) _exit(2);
        if (counted && (listener < 0 || !write_listener_report(sockets[1], listener))) _exit(3);
        if (listener >= 0) close(listener);
        time_calls(sockets[1]);
    }
    close(sockets[1]);
    UniqueFd socket(sockets[0]);
    SeccompRefusals refusals(confinement.seccomp_marked);
    if (counted) {
        UniqueFd received;
        auto report = read_report_with_fd(socket.get(), received);
        if (!report || !*report || !received) return false;
        refusals.attach(std::move(received));
        while (refusals.counts().refused_total < kCalls) {
            pollfd p{refusals.fd(), POLLIN, 0};
            if (poll(&p, 1, 10000) <= 0) return false;
            refusals.serve(64);
        }
    }
    bool got = read(socket.get(), &batch, sizeof batch) == sizeof batch;
    int status = 0;
    waitpid(child, &status, 0);
    return got && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace

int main() {
    Policy policy;
    policy.seccomp.preset = "default";
    auto compiled = compile_confinement(policy);
    if (!compiled) {
        std::fprintf(stderr, "compile: %s\n", compiled.error().describe().c_str());
        return 1;
    }
    Confinement confinement;
    confinement.drop_capabilities = false;
    confinement.seccomp_filter = compiled->seccomp_filter;
    confinement.seccomp_notifying_filter = compiled->seccomp_notifying_filter;
    confinement.seccomp_marked = compiled->seccomp_marked;

    std::vector<double> plain_refused, plain_allowed, counted_refused, counted_allowed;
    for (int round = 0; round < kRounds; ++round) {
        Batch plain, counted;
        if (!measure(confinement, false, plain) || !measure(confinement, true, counted)) {
            bench::print_failed_row("refusal", "round", "a measurement failed");
            return 1;
        }
        plain_refused.push_back(plain.refused_ns);
        plain_allowed.push_back(plain.allowed_ns);
        counted_refused.push_back(counted.refused_ns);
        counted_allowed.push_back(counted.allowed_ns);
    }
    const double base_refused = bench::quantile(plain_refused, 0.5);
    const double base_allowed = bench::quantile(plain_allowed, 0.5);
    bench::print_row("refusal", "refused call, RET_ERRNO (no listener)", base_refused,
                     bench::quantile(plain_refused, 0.99), "ns/call", base_refused);
    bench::print_row("refusal", "refused call, counted (user notif)",
                     bench::quantile(counted_refused, 0.5), bench::quantile(counted_refused, 0.99),
                     "ns/call", base_refused, "a round trip to the supervisor");
    bench::print_row("refusal", "allowed call, no listener", base_allowed,
                     bench::quantile(plain_allowed, 0.99), "ns/call", base_allowed);
    bench::print_row("refusal", "allowed call, with listener",
                     bench::quantile(counted_allowed, 0.5), bench::quantile(counted_allowed, 0.99),
                     "ns/call", base_allowed, "same program path");
    return 0;
}
