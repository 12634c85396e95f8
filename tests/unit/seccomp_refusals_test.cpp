// Counting refused syscalls (issue 17.6): the marked program and its two installed forms
// (isolation/seccomp_refusals.hpp), and the listener's answers and counts
// (isolation/seccomp_listener.hpp) against the real kernel. No privileges: seccomp with
// no_new_privs, a listener included, needs none.

#include "isolation/seccomp_refusals.hpp"

#include <gtest/gtest.h>
#include <linux/audit.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>

#include "isolation/child_report.hpp"
#include "isolation/confinement.hpp"
#include "isolation/seccomp.hpp"
#include "isolation/seccomp_listener.hpp"
#include "isolation/seccomp_listing.hpp"
#include "policies/syscall_numbers.hpp"

namespace corral {
namespace {

SeccompSpec spec_of(std::string preset, SeccompAction action = SeccompAction::errno_code,
                    int errno_value = EPERM) {
    SeccompSpec spec;
    spec.preset = std::move(preset);
    spec.action = action;
    spec.errno_value = errno_value;
    return spec;
}

std::vector<sock_filter> marked_of(const SeccompSpec& spec) {
    auto program = compile_marked_seccomp(spec);
    EXPECT_TRUE(program.ok()) << program.error().describe();
    return program.ok() ? *program : std::vector<sock_filter>{};
}

// Only the seccomp part of a policy's confinement, so the children here need no privileges.
Confinement seccomp_only(const SeccompSpec& spec) {
    Policy policy;
    policy.seccomp = spec;
    auto compiled = compile_confinement(policy);
    EXPECT_TRUE(compiled.ok()) << compiled.error().describe();
    Confinement out;
    out.drop_capabilities = false;
    if (!compiled.ok()) return out;
    out.seccomp_filter = compiled->seccomp_filter;
    out.seccomp_notifying_filter = compiled->seccomp_notifying_filter;
    out.seccomp_marked = compiled->seccomp_marked;
    return out;
}

seccomp_data call_of(const char* name, std::initializer_list<uint64_t> args = {}) {
    seccomp_data data{};
    data.nr = resolve_syscall(name);
    data.arch = AUDIT_ARCH_X86_64;
    size_t i = 0;
    for (uint64_t arg : args) data.args[i++] = arg;
    return data;
}

// The plain form answers every call exactly as the marked program's verdict says, and the
// notifying form hands over exactly the marked calls: for every number, with plain and with
// "interesting" arguments (setuid modes, socket families), under each preset and action.
TEST(SeccompRefusals, TheThreeFormsAgreeOnEveryCall) {
    const std::vector<SeccompSpec> specs = {
        spec_of("default"), spec_of("strict"), spec_of("default", SeccompAction::log),
        spec_of("strict", SeccompAction::errno_code, EXDEV),
        spec_of("strict", SeccompAction::kill_process)};
    for (const SeccompSpec& spec : specs) {
        const auto marked = marked_of(spec);
        const auto plain = without_listener(marked);
        const auto notify = notifying(marked);
        EXPECT_FALSE(has_refusal_marks(plain));
        EXPECT_FALSE(has_refusal_marks(notify));
        for (int nr = 0; nr <= highest_x86_64_syscall() + 2; ++nr) {
            for (uint64_t arg : {0ull, 04755ull, 38ull /* AF_ALG */, 0100ull /* O_CREAT */}) {
                seccomp_data data{};
                data.nr = nr;
                data.arch = AUDIT_ARCH_X86_64;
                for (auto& a : data.args) a = arg;
                const RefusalVerdict verdict = refusal_verdict(marked, data);
                const uint32_t plain_answer = evaluate_seccomp(plain, data);
                const uint32_t notify_answer = evaluate_seccomp(notify, data);
                SCOPED_TRACE("preset " + spec.preset + " nr " + std::to_string(nr) + " arg " +
                             std::to_string(arg));
                if (verdict.kind == RefusalVerdict::refused) {
                    EXPECT_EQ(plain_answer, SECCOMP_RET_ERRNO | uint32_t(verdict.error));
                    EXPECT_EQ(notify_answer, SECCOMP_RET_USER_NOTIF);
                } else if (verdict.kind == RefusalVerdict::logged) {
                    EXPECT_EQ(plain_answer, SECCOMP_RET_LOG);
                    EXPECT_EQ(notify_answer, SECCOMP_RET_USER_NOTIF);
                } else {
                    EXPECT_EQ(plain_answer, notify_answer);
                    EXPECT_EQ(plain_answer, evaluate_seccomp(marked, data));
                }
            }
        }
    }
}

TEST(SeccompRefusals, DeliberateRefusalsAreCountedFallbackAnswersAreNot) {
    const auto marked = marked_of(spec_of("default"));
    auto verdict = refusal_verdict(marked, call_of("ptrace"));
    EXPECT_EQ(verdict.kind, RefusalVerdict::refused);
    EXPECT_EQ(verdict.error, EPERM);
    EXPECT_EQ(refusal_verdict(marked, call_of("mount")).error, EPERM);
    // The guard's refusals count too: a setuid chmod, an AF_ALG socket.
    EXPECT_EQ(refusal_verdict(marked, call_of("chmod", {0, 04755})).kind,
              RefusalVerdict::refused);
    verdict = refusal_verdict(marked, call_of("socket", {38 /* AF_ALG */}));
    EXPECT_EQ(verdict.error, EAFNOSUPPORT);
    // Fallback answers (libc retries another way) and allowed calls are not refusals.
    for (const char* name : {"clone3", "openat2", "getpid", "sendmsg"})
        EXPECT_EQ(refusal_verdict(marked, call_of(name)).kind, RefusalVerdict::not_marked) << name;
    EXPECT_EQ(refusal_verdict(marked, call_of("chmod", {0, 0755})).kind,
              RefusalVerdict::not_marked);

    // strict: what it does not list answers ENOSYS and is counted; what it denies on purpose
    // gets the policy's errno.
    const auto strict = marked_of(spec_of("strict", SeccompAction::errno_code, EXDEV));
    verdict = refusal_verdict(strict, call_of("io_setup"));
    EXPECT_EQ(verdict.kind, RefusalVerdict::refused);
    EXPECT_EQ(verdict.error, ENOSYS);
    EXPECT_EQ(refusal_verdict(strict, call_of("mount")).error, EXDEV);

    const auto logged = marked_of(spec_of("default", SeccompAction::log));
    EXPECT_EQ(refusal_verdict(logged, call_of("ptrace")).kind, RefusalVerdict::logged);
    // The guard's answers stay refusals under `action: log`.
    EXPECT_EQ(refusal_verdict(logged, call_of("chmod", {0, 04755})).kind,
              RefusalVerdict::refused);
}

TEST(SeccompRefusals, KillProcessIsNotCountedAndNothingMarkedMeansNoListener) {
    SeccompSpec none = spec_of("none");
    none.deny = {"ptrace"};
    none.action = SeccompAction::kill_process;
    EXPECT_FALSE(has_refusal_marks(marked_of(none)));
    Policy policy;
    policy.seccomp = none;
    auto confinement = compile_confinement(policy);
    ASSERT_TRUE(confinement.ok()) << confinement.error().describe();
    EXPECT_FALSE(confinement->seccomp_filter.empty());
    EXPECT_TRUE(confinement->seccomp_notifying_filter.empty());
}

// A policy that refuses sendmsg would have the child wait forever on the hand-over (its listener
// is not with the parent yet): that filter goes without a listener.
TEST(SeccompRefusals, APolicyRefusingSendmsgInstallsNoListener) {
    Policy policy;
    policy.seccomp = spec_of("default");
    policy.seccomp.deny = {"sendmsg"};
    auto confinement = compile_confinement(policy);
    ASSERT_TRUE(confinement.ok()) << confinement.error().describe();
    EXPECT_FALSE(confinement->seccomp_filter.empty());
    EXPECT_TRUE(confinement->seccomp_notifying_filter.empty());
    policy.seccomp.deny.clear();
    confinement = compile_confinement(policy);
    ASSERT_TRUE(confinement.ok());
    EXPECT_FALSE(confinement->seccomp_notifying_filter.empty());
}

// The whole path for real: a child installs the notifying filter, hands its listener over the
// report socket as the launcher's child does, makes refused calls; the parent answers them. The
// child checks each answer is the filter's errno (exit 0) and the counts are exact.
TEST(SeccompRefusals, AListenerAnswersWithTheFiltersErrnoAndCountsByName) {
    const Confinement confinement = seccomp_only(spec_of("default"));
    ASSERT_FALSE(confinement.seccomp_notifying_filter.empty());
    int sockets[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sockets), 0);
    pid_t child = fork();
    if (child == 0) {
        close(sockets[0]);
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) _exit(10);
        int listener = -1;
        if (apply_confinement(confinement, &listener) != nullptr) _exit(11);
        if (listener < 0) _exit(12);
        if (!write_listener_report(sockets[1], listener)) _exit(13);
        close(listener);  // the parent holds it now
        for (int i = 0; i < 3; ++i)
            if (syscall(SYS_ptrace, PTRACE_PEEKDATA, 0, 0, 0) != -1 || errno != EPERM) _exit(20);
        if (syscall(SYS_mount, "none", "/", "tmpfs", 0, nullptr) != -1 || errno != EPERM)
            _exit(21);
        if (chmod("/nonexistent-corral", 04755) != -1 || errno != EPERM) _exit(22);
        if (syscall(SYS_clone3, nullptr, 0) != -1 || errno != ENOSYS) _exit(23);
        if (getpid() <= 0) _exit(24);
        _exit(0);
    }
    close(sockets[1]);
    UniqueFd report_socket(sockets[0]);
    UniqueFd received;
    auto report = read_report_with_fd(report_socket.get(), received);
    ASSERT_TRUE(report.ok() && *report) << "no listener report";
    EXPECT_EQ((*report)->kind, ChildReport::listener);
    ASSERT_TRUE(received.valid());
    SeccompRefusals refusals(confinement.seccomp_marked);
    refusals.attach(std::move(received));
    // Served until the child is reaped: before Linux 6.x a zombie keeps its filter in use, so
    // the listener hangs up only once the child is waited for. On newer kernels the hang-up comes
    // as the child exits, a moment before waitpid can see it: then poll returns at once, so the
    // loop waits for the child instead of spinning (a bound of spins failed on a fast machine).
    int status = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (waitpid(child, &status, WNOHANG) != child) {
        ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the child never ended";
        pollfd p{refusals.fd(), POLLIN, 0};
        const bool hung_up = poll(&p, 1, 10) > 0 && (p.revents & (POLLHUP | POLLERR)) != 0;
        refusals.serve(64);
        if (hung_up) {
            ASSERT_EQ(waitpid(child, &status, 0), child);  // every user of the filter is gone
            break;
        }
    }
    EXPECT_TRUE(WIFEXITED(status)) << status;
    EXPECT_EQ(WEXITSTATUS(status), 0) << "a call got the wrong answer (see the exit codes)";
    const RefusalCounts counts = refusals.counts();
    EXPECT_TRUE(counts.counted);
    EXPECT_EQ(counts.refused, (std::map<std::string, uint64_t>{{"chmod", 1}, {"mount", 1},
                                                               {"ptrace", 3}}));
    EXPECT_EQ(counts.refused_total, 5u);
    EXPECT_EQ(counts.logged_total, 0u);
}

// Under a filter that already has a listener (another corral around this one) the kernel refuses
// a second one (EBUSY); the filter then goes in without one and still refuses.
TEST(SeccompRefusals, UnderAnotherListenerTheFilterGoesInWithoutOne) {
    const Confinement confinement = seccomp_only(spec_of("default"));
    pid_t child = fork();
    if (child == 0) {
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) _exit(10);
        sock_filter allow_all[] = {BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
        sock_fprog outer{1, allow_all};
        if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER,
                    &outer) < 0)
            _exit(11);
        int listener = -1;
        if (apply_confinement(confinement, &listener) != nullptr) _exit(12);
        if (listener != -1) _exit(13);
        if (syscall(SYS_ptrace, PTRACE_PEEKDATA, 0, 0, 0) != -1 || errno != EPERM) _exit(14);
        _exit(0);
    }
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
}

}  // namespace
}  // namespace corral
