// compile_seccomp (isolation/seccomp.cpp): presets, name errors, deny/allow interplay. No
// privileges: besides compiling, a few tests install the compiled program in a forked child
// (seccomp with no_new_privs needs none) and check what real system calls return there.

#include <gtest/gtest.h>
#include <linux/sched.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <functional>

#include "isolation/confinement.hpp"
#include "isolation/seccomp.hpp"

namespace corral {
namespace {

// A value no real call here returns, so a result of this errno can only come from the filter.
constexpr int kFilterErrno = EHOSTDOWN;

SeccompSpec spec_of(std::string preset, std::vector<std::string> deny = {},
                    std::vector<std::string> allow = {}) {
    SeccompSpec spec;
    spec.preset = std::move(preset);
    spec.deny = std::move(deny);
    spec.allow = std::move(allow);
    spec.errno_value = kFilterErrno;
    return spec;
}

std::vector<sock_filter> compiled(const SeccompSpec& spec) {
    auto program = compile_seccomp(spec);
    EXPECT_TRUE(program.ok()) << program.error().describe();
    return program.ok() ? *program : std::vector<sock_filter>{};
}

// Runs `probe` in a forked child under `program`; returns the probe's result (0..255), or -1 if
// the child did not exit normally.
int run_filtered(const std::vector<sock_filter>& program, const std::function<int()>& probe) {
    pid_t pid = fork();
    if (pid == 0) {
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) _exit(200);
        if (install_seccomp_filter(program.data(), program.size()) != 0) _exit(201);
        _exit(probe());
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// 1 when the raw call fails with `expected_errno`, 0 otherwise.
int fails_with(long result, int expected_errno) {
    return result == -1 && errno == expected_errno;
}

long raw_clone3() {
    clone_args args{};
    args.exit_signal = SIGCHLD;
    return syscall(SYS_clone3, &args, sizeof(args));
}

TEST(SeccompCompile, DefaultAndStrictPresetsCompileToPrograms) {
    EXPECT_GT(compiled(spec_of("default")).size(), 10u);
    EXPECT_GT(compiled(spec_of("strict")).size(), 10u);
}

TEST(SeccompCompile, NonePresetWithoutDenyIsNoFilter) {
    EXPECT_TRUE(compiled(spec_of("none")).empty());
    EXPECT_TRUE(compiled(spec_of("none", {}, {"ptrace"})).empty());
    EXPECT_FALSE(compiled(spec_of("none", {"ptrace"})).empty());
}

TEST(SeccompCompile, UnknownSyscallIsAnErrorNamingKeyAndName) {
    auto denied = compile_seccomp(spec_of("default", {"no_such_call"}));
    ASSERT_FALSE(denied.ok());
    EXPECT_NE(denied.error().message.find("seccomp.deny"), std::string::npos);
    EXPECT_NE(denied.error().message.find("no_such_call"), std::string::npos);

    auto allowed = compile_seccomp(spec_of("strict", {}, {"frobnicate"}));
    ASSERT_FALSE(allowed.ok());
    EXPECT_NE(allowed.error().message.find("seccomp.allow"), std::string::npos);
    EXPECT_NE(allowed.error().message.find("frobnicate"), std::string::npos);

    // A typo is reported even where the list has no effect.
    EXPECT_FALSE(compile_seccomp(spec_of("none", {}, {"frobnicate"})).ok());
}

TEST(SeccompCompile, UnknownGroupAndPresetAreErrors) {
    auto group = compile_seccomp(spec_of("default", {"@nonsense"}));
    ASSERT_FALSE(group.ok());
    EXPECT_NE(group.error().message.find("@nonsense"), std::string::npos);
    EXPECT_NE(group.error().message.find("seccomp.deny"), std::string::npos);

    auto preset = compile_seccomp(spec_of("paranoid"));
    ASSERT_FALSE(preset.ok());
    EXPECT_NE(preset.error().message.find("paranoid"), std::string::npos);
}

TEST(SeccompCompile, ErrnoOutOfRangeIsAnError) {
    auto spec = spec_of("default");
    spec.errno_value = 5000;
    EXPECT_FALSE(compile_seccomp(spec).ok());
}

TEST(SeccompCompile, DefaultPresetDeniesPtraceButNotOrdinaryCalls) {
    auto program = compiled(spec_of("default"));
    EXPECT_EQ(
        run_filtered(program,
                     [] { return fails_with(ptrace(PTRACE_TRACEME, 0, 0, 0), kFilterErrno); }),
        1);
    EXPECT_EQ(
        run_filtered(program,
                     [] { return fails_with(syscall(SYS_unshare, CLONE_NEWNS), kFilterErrno); }),
        1);
    EXPECT_EQ(run_filtered(program,
                           [] {
                               utsname u;
                               return getppid() > 0 && uname(&u) == 0;
                           }),
              1);
}

TEST(SeccompCompile, AllowRemovesNamesFromTheDefaultDenyList) {
    auto program = compiled(spec_of("default", {}, {"ptrace"}));
    // Unfiltered, PTRACE_TRACEME succeeds (or fails with a kernel errno, never ours).
    EXPECT_EQ(
        run_filtered(program,
                     [] { return !fails_with(ptrace(PTRACE_TRACEME, 0, 0, 0), kFilterErrno); }),
        1);
}

TEST(SeccompCompile, DenyWinsOverAllow) {
    auto program = compiled(spec_of("default", {"ptrace", "getppid"}, {"ptrace", "getppid"}));
    EXPECT_EQ(
        run_filtered(program,
                     [] { return fails_with(ptrace(PTRACE_TRACEME, 0, 0, 0), kFilterErrno); }),
        1);
    EXPECT_EQ(run_filtered(program, [] { return fails_with(syscall(SYS_getppid), kFilterErrno); }),
              1);

    auto strict = compiled(spec_of("strict", {"uname"}, {"uname"}));
    EXPECT_EQ(
        run_filtered(strict, [] { return fails_with(syscall(SYS_uname, nullptr), kFilterErrno); }),
        1);
}

TEST(SeccompCompile, DefaultPresetBlocksNamespaceClonesAndAnswersClone3WithEnosys) {
    auto program = compiled(spec_of("default"));
    EXPECT_EQ(run_filtered(program,
                           [] {
                               return fails_with(
                                   syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0),
                                   kFilterErrno);
                           }),
              1);
    EXPECT_EQ(run_filtered(program, [] { return fails_with(raw_clone3(), ENOSYS); }), 1);
    // Plain fork (clone without namespace flags) still works.
    EXPECT_EQ(run_filtered(program,
                           [] {
                               pid_t child = fork();
                               if (child == 0) _exit(7);
                               int status = 0;
                               return child > 0 && waitpid(child, &status, 0) == child &&
                                      WEXITSTATUS(status) == 7;
                           }),
              1);
}

TEST(SeccompCompile, AllowingUnshareLiftsTheCloneRules) {
    auto program = compiled(spec_of("default", {}, {"@namespaces"}));
    EXPECT_EQ(run_filtered(program,
                           [] {
                               long child = raw_clone3();
                               if (child == 0) _exit(0);  // the new child: gone at once
                               return !fails_with(child, ENOSYS);
                           }),
              1);
}

TEST(SeccompCompile, StrictPresetAllowsServicesAndDeniesTheRest) {
    auto program = compiled(spec_of("strict"));
    EXPECT_EQ(run_filtered(program, [] { return getpid() > 0 && getppid() > 0; }), 1);
    EXPECT_EQ(
        run_filtered(program,
                     [] { return fails_with(syscall(SYS_reboot, 0, 0, 0, 0), kFilterErrno); }),
        1);
    EXPECT_EQ(
        run_filtered(
            program,
            [] { return fails_with(syscall(SYS_mount, "x", "/", "tmpfs", 0, 0), kFilterErrno); }),
        1);
    EXPECT_EQ(run_filtered(program, [] { return fails_with(raw_clone3(), ENOSYS); }), 1);
}

TEST(SeccompCompile, StrictAllowAddsToTheAllowList) {
    auto program = compiled(spec_of("strict", {}, {"vhangup"}));
    EXPECT_EQ(run_filtered(program, [] { return !fails_with(syscall(SYS_vhangup), kFilterErrno); }),
              1);
}

TEST(SeccompCompile, NonePresetWithDenyFiltersOnlyThose) {
    auto program = compiled(spec_of("none", {"getppid"}));
    EXPECT_EQ(run_filtered(program, [] { return fails_with(syscall(SYS_getppid), kFilterErrno); }),
              1);
    EXPECT_EQ(
        run_filtered(program,
                     [] { return !fails_with(ptrace(PTRACE_TRACEME, 0, 0, 0), kFilterErrno); }),
        1);
}

TEST(SeccompCompile, SeccompIsAvailableOnThisKernel) {
    // corral's CI hosts have seccomp; if this fails, every other filter test is meaningless too.
    EXPECT_TRUE(seccomp_available());
}

}  // namespace
}  // namespace corral
