// apply_confinement against the real kernel (root): a forked child confines itself, then either
// checks the effect in-process and reports through its exit code, or execs a program whose output
// the parent reads. The launcher is not involved; this exercises isolation/confinement alone.

#include "isolation/confinement.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "isolation/landlock.hpp"
#include "tests/support/temp_dir.hpp"

namespace corral {
namespace {

namespace fs = std::filesystem;

// Exit codes of a child whose confinement itself failed, so they cannot be taken for a probe's.
constexpr int kApplyFailed = 250;
constexpr int kExecFailed = 251;

struct ChildResult {
    int status = 0;  // as from waitpid
    std::string output;
};

bool exited_with(const ChildResult& r, int code) {
    return WIFEXITED(r.status) && WEXITSTATUS(r.status) == code;
}

std::string describe(const ChildResult& r) {
    if (WIFSIGNALED(r.status)) return "signal " + std::to_string(WTERMSIG(r.status));
    return "exit " + std::to_string(WEXITSTATUS(r.status)) + ", output: " + r.output;
}

// Forks; the child applies `confinement` then runs `body` (which exits or execs). The parent
// collects the child's stdout and status.
ChildResult run_child(const Confinement& confinement, const std::function<int()>& body) {
    int out[2];
    if (pipe2(out, O_CLOEXEC) != 0) return {-1, "pipe failed"};
    pid_t pid = fork();
    if (pid == 0) {
        dup2(out[1], STDOUT_FILENO);
        if (apply_confinement(confinement) != nullptr) _exit(kApplyFailed);
        _exit(body());
    }
    close(out[1]);
    ChildResult result;
    char buffer[4096];
    ssize_t n;
    while ((n = read(out[0], buffer, sizeof buffer)) > 0) result.output.append(buffer, n);
    close(out[0]);
    waitpid(pid, &result.status, 0);
    return result;
}

// Runs `argv` (absolute path) in a confined child.
ChildResult run_program(const Confinement& confinement, std::vector<std::string> argv) {
    std::vector<char*> args;
    for (auto& arg : argv) args.push_back(arg.data());
    args.push_back(nullptr);
    return run_child(confinement, [&] {
        execv(args[0], args.data());
        return kExecFailed;
    });
}

// The value of a "Key:\tvalue" line in /proc/<pid>/status text.
std::string status_field(const std::string& status, const std::string& key) {
    auto pos = status.find("\n" + key + ":");
    if (pos == std::string::npos) return "<missing " + key + ">";
    pos = status.find_first_not_of(" \t", pos + key.size() + 2);
    return status.substr(pos, status.find('\n', pos) - pos);
}

// A root policy with everything off, which each test tightens.
Policy base_policy() {
    Policy policy;
    policy.seccomp.preset = "none";
    policy.capabilities.inherit = true;
    return policy;
}

Confinement compile_or_fail(const Policy& policy) {
    auto compiled = compile_confinement(policy);
    EXPECT_TRUE(compiled.ok()) << compiled.error().describe();
    return compiled.ok() ? std::move(*compiled) : Confinement{};
}

class ConfinementRoot : public ::testing::Test {
  protected:
    void SetUp() override {
        if (geteuid() != 0) GTEST_SKIP() << "needs root";
    }
};

TEST_F(ConfinementRoot, DefaultSeccompPresetDeniesPtraceMountAndUnshareWithEperm) {
    Policy policy = base_policy();  // keeps CAP_SYS_ADMIN: an EPERM can only come from the filter
    policy.seccomp.preset = "default";
    Confinement confinement = compile_or_fail(policy);
    auto fails_eperm = [](long rc) { return rc == -1 && errno == EPERM; };

    EXPECT_TRUE(exited_with(
        run_child(confinement,
                  [&] { return fails_eperm(ptrace(PTRACE_TRACEME, 0, nullptr, nullptr)) ? 0 : 1; }),
        0));
    // Unfiltered, this mount fails with ENOENT (no such target), so it cannot touch the host.
    EXPECT_TRUE(exited_with(run_child(confinement,
                                      [&] {
                                          return fails_eperm(mount("none", "/corral-no-such-dir",
                                                                   "tmpfs", 0, nullptr))
                                                     ? 0
                                                     : 1;
                                      }),
                            0));
    EXPECT_TRUE(exited_with(
        run_child(confinement, [&] { return fails_eperm(unshare(CLONE_NEWNS)) ? 0 : 1; }), 0));
}

TEST_F(ConfinementRoot, EmptyKeepClearsEveryCapabilitySetAndSetsNoNewPrivs) {
    Policy policy = base_policy();
    policy.seccomp.preset = "default";
    policy.capabilities.inherit = false;
    Confinement confinement = compile_or_fail(policy);

    ChildResult r = run_program(confinement, {"/bin/cat", "/proc/self/status"});
    ASSERT_TRUE(exited_with(r, 0)) << describe(r);
    EXPECT_EQ(status_field(r.output, "CapEff"), "0000000000000000");
    EXPECT_EQ(status_field(r.output, "CapPrm"), "0000000000000000");
    EXPECT_EQ(status_field(r.output, "CapInh"), "0000000000000000");
    EXPECT_EQ(status_field(r.output, "CapBnd"), "0000000000000000");
    EXPECT_EQ(status_field(r.output, "CapAmb"), "0000000000000000");
    EXPECT_EQ(status_field(r.output, "NoNewPrivs"), "1");
    EXPECT_EQ(status_field(r.output, "Seccomp"), "2");
}

TEST_F(ConfinementRoot, KeepingNetBindServiceLeavesExactlyThatBitAsRoot) {
    Policy policy = base_policy();
    policy.capabilities = {false, {"net_bind_service"}};
    Confinement confinement = compile_or_fail(policy);

    ChildResult r = run_program(confinement, {"/bin/cat", "/proc/self/status"});
    ASSERT_TRUE(exited_with(r, 0)) << describe(r);
    EXPECT_EQ(status_field(r.output, "CapEff"), "0000000000000400");  // bit 10
    EXPECT_EQ(status_field(r.output, "CapBnd"), "0000000000000400");
}

TEST_F(ConfinementRoot, KeptCapabilitySurvivesExecForNonRootUserThroughAmbientSet) {
    Policy policy = base_policy();
    policy.capabilities = {false, {"CAP_NET_BIND_SERVICE"}};
    policy.user = {false, 65534, 65534, {}};
    Confinement confinement = compile_or_fail(policy);

    ChildResult r = run_program(confinement, {"/bin/cat", "/proc/self/status"});
    ASSERT_TRUE(exited_with(r, 0)) << describe(r);
    EXPECT_EQ(status_field(r.output, "CapEff"), "0000000000000400");
    EXPECT_EQ(status_field(r.output, "CapAmb"), "0000000000000400");
}

TEST_F(ConfinementRoot, UserChangeSetsAllUidsGidsAndClearsGroups) {
    Policy policy = base_policy();
    policy.capabilities.inherit = false;
    policy.user = {false, 65534, 65534, {}};
    Confinement confinement = compile_or_fail(policy);

    ChildResult r = run_program(confinement, {"/bin/cat", "/proc/self/status"});
    ASSERT_TRUE(exited_with(r, 0)) << describe(r);
    EXPECT_EQ(status_field(r.output, "Uid"), "65534\t65534\t65534\t65534");
    EXPECT_EQ(status_field(r.output, "Gid"), "65534\t65534\t65534\t65534");
    EXPECT_EQ(status_field(r.output, "Groups"), "");
    EXPECT_EQ(status_field(r.output, "CapEff"), "0000000000000000");
}

TEST_F(ConfinementRoot, KillProcessActionEndsTheChildWithSigsys) {
    Policy policy = base_policy();
    policy.seccomp.preset = "default";
    policy.seccomp.action = SeccompAction::kill_process;
    Confinement confinement = compile_or_fail(policy);

    ChildResult r = run_child(confinement, [] {
        ptrace(PTRACE_TRACEME, 0, nullptr, nullptr);
        return 0;
    });
    ASSERT_TRUE(WIFSIGNALED(r.status)) << describe(r);
    EXPECT_EQ(WTERMSIG(r.status), SIGSYS);
}

TEST_F(ConfinementRoot, RlimitsAreAppliedAndCoreDumpsOffByDefault) {
    Policy policy = base_policy();
    policy.limits.open_files = 64;
    policy.limits.file_size = 1 << 20;
    Confinement confinement = compile_or_fail(policy);

    ChildResult r = run_child(confinement, [] {
        rlimit nofile{}, core{}, fsize{};
        getrlimit(RLIMIT_NOFILE, &nofile);
        getrlimit(RLIMIT_CORE, &core);
        getrlimit(RLIMIT_FSIZE, &fsize);
        bool ok = nofile.rlim_cur == 64 && nofile.rlim_max == 64 && core.rlim_cur == 0 &&
                  core.rlim_max == 0 && fsize.rlim_cur == (1 << 20);
        // The limit is real: the 65th descriptor cannot be opened.
        int opened = 0;
        while (open("/dev/null", O_RDONLY) >= 0) ++opened;
        return ok && errno == EMFILE && opened < 64 ? 0 : 1;
    });
    EXPECT_TRUE(exited_with(r, 0)) << describe(r);
}

TEST_F(ConfinementRoot, LandlockAllowsWritesInsideWritePathsAndDeniesOthers) {
    if (landlock_abi_version() == 0) GTEST_SKIP() << "Landlock unsupported on this kernel";
    const test_support::TempDir inside("corral-landlock-inside"), outside("corral-landlock-outside");
    ASSERT_FALSE(inside.path().empty() || outside.path().empty());
    Policy policy = base_policy();
    policy.landlock.write = {inside.path()};
    Confinement confinement = compile_or_fail(policy);

    std::string inside_file = (inside / "allowed").string();
    std::string outside_file = (outside / "denied").string();
    ChildResult r = run_child(confinement, [&] {
        int in = open(inside_file.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
        if (in < 0) return 1;
        int out = open(outside_file.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
        if (out >= 0 || errno != EACCES) return 2;
        return 0;
    });
    EXPECT_TRUE(exited_with(r, 0)) << describe(r);
    EXPECT_TRUE(fs::exists(inside_file));
    EXPECT_FALSE(fs::exists(outside_file));
}

TEST_F(ConfinementRoot, LandlockReadPathsAreReadableButNotWritable) {
    if (landlock_abi_version() == 0) GTEST_SKIP() << "Landlock unsupported on this kernel";
    const test_support::TempDir dir("corral-landlock-read");
    ASSERT_FALSE(dir.path().empty());
    std::string file = (dir / "data").string();
    {
        int fd = open(file.c_str(), O_CREAT | O_WRONLY, 0644);
        ASSERT_GE(fd, 0);
        close(fd);
    }
    Policy policy = base_policy();
    policy.landlock.read = {dir.path()};
    Confinement confinement = compile_or_fail(policy);

    ChildResult r = run_child(confinement, [&] {
        int rd = open(file.c_str(), O_RDONLY | O_CLOEXEC);
        if (rd < 0) return 1;
        int wr = open(file.c_str(), O_WRONLY | O_CLOEXEC);
        return wr < 0 && errno == EACCES ? 0 : 2;
    });
    EXPECT_TRUE(exited_with(r, 0)) << describe(r);
}

TEST_F(ConfinementRoot, StrictPresetRunsShellCoreutilsAndPython) {
    Policy policy = base_policy();
    policy.seccomp.preset = "strict";
    policy.capabilities.inherit = false;
    Confinement confinement = compile_or_fail(policy);

    std::string script = "ls / >/dev/null && cat /etc/hostname >/dev/null && echo shell-ok";
    if (access("/usr/bin/python3", X_OK) == 0) script += " && /usr/bin/python3 -c 'print(1)'";
    ChildResult r = run_program(confinement, {"/bin/sh", "-c", script});
    ASSERT_TRUE(exited_with(r, 0)) << describe(r);
    EXPECT_NE(r.output.find("shell-ok"), std::string::npos) << r.output;
    if (access("/usr/bin/python3", X_OK) == 0) {
        EXPECT_NE(r.output.find("\n1\n"), std::string::npos) << r.output;
    }
}

// Compile-time errors need no privileges; they live here because they exercise compile_confinement.
TEST(ConfinementCompile, UnknownCapabilityIsAnErrorNamingKeyAndName) {
    Policy policy = base_policy();
    policy.capabilities = {false, {"cap_fly"}};
    auto compiled = compile_confinement(policy);
    ASSERT_FALSE(compiled.ok());
    EXPECT_NE(compiled.error().message.find("capabilities.keep"), std::string::npos);
    EXPECT_NE(compiled.error().message.find("cap_fly"), std::string::npos);
}

TEST(ConfinementCompile, MissingLandlockPathIsAnErrorNamingKeyAndPath) {
    if (landlock_abi_version() == 0) GTEST_SKIP() << "Landlock unsupported on this kernel";
    Policy policy = base_policy();
    policy.landlock.write = {"/corral-no-such-dir"};
    auto compiled = compile_confinement(policy);
    ASSERT_FALSE(compiled.ok());
    EXPECT_NE(compiled.error().message.find("landlock.write"), std::string::npos);
    EXPECT_NE(compiled.error().message.find("/corral-no-such-dir"), std::string::npos);
}

TEST(ConfinementCompile, RlimitCoreDefaultsToZero) {
    auto compiled = compile_confinement(base_policy());
    ASSERT_TRUE(compiled.ok());
    bool has_core_zero = false;
    for (const auto& step : compiled->rlimits) {
        if (step.resource == RLIMIT_CORE && step.value.rlim_max == 0) has_core_zero = true;
    }
    EXPECT_TRUE(has_core_zero);
}

}  // namespace
}  // namespace corral
