// `seccomp: {ptrace: own}` (issue 17.5): debuggers and sanitizers may trace the job's own
// processes, and nothing else. The dangers it must not reopen: tracing a process of another
// session or of the host (ptrace is the classic container escape, e.g. CVE-2019-5736's cousins
// and Docker's ban on ptrace before Linux 4.8, when a tracer could rewrite a syscall after the
// seccomp check), the session's PID 1 holder (a copy of the daemon; CVE-2016-9962 ptraced runc's
// init the same way), or corrald's children before exec.

#include <signal.h>
#include <sys/stat.h>

#include <fstream>

#include "support/sandbox_harness.hpp"
#include "support/security_daemon.hpp"

namespace corral::security {
namespace {

namespace fs = std::filesystem;
using testing::HttpClient;

constexpr const char* kTracingDefault = "extends: default\nseccomp: { ptrace: own }\n";
constexpr const char* kTracingStrict = "extends: strict\nseccomp: { ptrace: own }\n";

class PtraceOwnRun : public SandboxTest {
  protected:
    void SetUp() override {
        SandboxTest::SetUp();
        if (IsSkipped()) return;
        fs::copy_file(CORRAL_SYSCALL_PROBE, dir_ / "sprobe");
        ::chmod((dir_ / "sprobe").c_str(), 0755);
        std::ofstream(dir_ / "tracing-default.yaml") << kTracingDefault;
        std::ofstream(dir_ / "tracing-strict.yaml") << kTracingStrict;
    }
    RunOutcome run_in(const std::string& policy, const std::vector<std::string>& argv) {
        std::vector<std::string> args = {"run", "--policy", policy, "--timeout", "60s", "--"};
        args.insert(args.end(), argv.begin(), argv.end());
        return corral(args);
    }
    std::vector<std::string> tracing_policies() const {
        return {(dir_ / "tracing-default.yaml").string(), (dir_ / "tracing-strict.yaml").string(),
                CORRAL_SOURCE_DIR "/examples/policies/sanitizer-ci.yaml"};
    }
};

// Control: without the key the presets refuse ptrace (so the key is what opens it).
TEST_F(PtraceOwnRun, WithoutTheKeyPtraceIsRefused) {
    for (const char* policy : {"default", "strict"}) {
        auto r = run_in(policy, {"./sprobe", "ptrace-child"});
        EXPECT_EQ(answers(r.out)["child-attach"], "EPERM") << policy << ": " << r.out << r.err;
    }
}

// gdb/strace (trace a child) and LeakSanitizer (a child traces its parent) work with the key.
TEST_F(PtraceOwnRun, TheJobTracesItsOwnProcesses) {
    for (const auto& policy : tracing_policies()) {
        SCOPED_TRACE(policy);
        auto r = run_in(policy, {"/bin/sh", "-c", "./sprobe ptrace-child; ./sprobe ptrace-parent"});
        auto a = answers(r.out);
        EXPECT_EQ(a["child-attach"], "ok") << r.out << r.err;
        EXPECT_EQ(a["child-peek"], "ok") << r.out;
        EXPECT_EQ(a["child-vm-read"], "ok") << r.out;
        EXPECT_EQ(a["parent-attach"], "ok") << r.out;
        EXPECT_EQ(a["parent-peek"], "ok") << r.out;
    }
}

// The sandbox's PID 1 is a copy of corral, with capabilities the job lacks: never traceable.
TEST_F(PtraceOwnRun, TheHolderIsNotTraceable_CVE_2016_9962) {
    for (const auto& policy : tracing_policies()) {
        SCOPED_TRACE(policy);
        auto r = run_in(policy, {"./sprobe", "ptrace-pid", "1"});
        auto a = answers(r.out);
        ASSERT_TRUE(a.count("1-attach")) << r.out << r.err;
        EXPECT_NE(a["1-attach"], "ok");
        EXPECT_NE(a["1-vm-read"], "ok");
        EXPECT_NE(a["1-vm-read"], "EFAULT") << "process_vm_readv got past the access check";
    }
}

TEST_F(PtraceOwnRun, StraceRunsUnderTheKey) {
    if (!fs::exists("/usr/bin/strace")) GTEST_SKIP() << "strace is not installed";
    auto denied = run_in("default", {"/usr/bin/strace", "-f", "-o", "/dev/null", "/bin/true"});
    EXPECT_NE(denied.exit_code, 0) << "control: strace works even without the key";
    for (const auto& policy : tracing_policies()) {
        SCOPED_TRACE(policy);
        auto r = run_in(policy, {"/bin/sh", "-c",
                                 "/usr/bin/strace -f -e trace=execve -o /tmp/trace /bin/true && "
                                 "cat /tmp/trace"});
        EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
        EXPECT_NE(r.out.find("execve(\"/bin/true\""), std::string::npos) << r.out;
    }
}

// A -fsanitize=address binary that leaks: LeakSanitizer must report the leak (ASan's exit code 1
// with the report), not die with "LeakSanitizer has encountered a fatal error" because it cannot
// ptrace.
//
// LeakSanitizer is conservative: any word on the stack or in a register that still holds the
// chunk's address makes it "reachable". `keep = malloc(77); keep = 0;` in main left that address
// in a dead stack slot of malloc's frames in some layouts (one fresh-clone CI saw exit 0 and no
// report under sanitizer-ci.yaml, whose cleared environment moves the stack). The chunk is made in
// a frame of its own and the stack below main is overwritten before main returns, so nothing but
// the (cleared) global ever held it when LeakSanitizer looks.
constexpr const char* kLeakingProgram =
    "#include <stdlib.h>\n#include <string.h>\n"
    "void *volatile keep;\n"
    "__attribute__((noinline)) static void leak(void) { keep = malloc(77); keep = 0; }\n"
    "__attribute__((noinline)) static void scrub(void) {\n"
    "  volatile char pad[16384]; memset((char *)pad, 0, sizeof pad); }\n"
    "int main(void) { leak(); scrub(); return 0; }\n";

TEST_F(PtraceOwnRun, LeakSanitizerFindsLeaksUnderTheKey) {
    std::ofstream(dir_ / "leak.c") << kLeakingProgram;
    const std::string build = "gcc -fsanitize=address -g -o " + (dir_ / "leak").string() + " " +
                              (dir_ / "leak.c").string() + " 2>/dev/null";
    if (std::system(build.c_str()) != 0) GTEST_SKIP() << "gcc with libasan is not installed";
    auto denied = run_in("default", {"./leak"});
    EXPECT_NE(denied.err.find("LeakSanitizer has encountered a fatal error"), std::string::npos)
        << "control: " << denied.err;
    for (const auto& policy : tracing_policies()) {
        SCOPED_TRACE(policy);
        auto r = run_in(policy, {"./leak"});
        EXPECT_EQ(r.exit_code, 1) << r.err;
        EXPECT_EQ(r.err.find("fatal error"), std::string::npos) << r.err;
        EXPECT_NE(r.err.find("detected memory leaks"), std::string::npos) << r.err;
        EXPECT_NE(r.err.find("77 byte(s)"), std::string::npos) << r.err;
    }
}

// The key needs a pid namespace: `corral run` refuses it without one, naming the key.
TEST_F(PtraceOwnRun, KeyWithoutPidNamespaceIsRefused) {
    std::ofstream(dir_ / "no-pidns.yaml") << "extends: default\nnamespaces: { pid: false }\n"
                                             "seccomp: { ptrace: own }\n";
    auto r = run_in((dir_ / "no-pidns.yaml").string(), {"/bin/true"});
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("seccomp.ptrace"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("namespaces.pid"), std::string::npos) << r.err;
}

class PtraceOwnDaemon : public DaemonTest {};

// Two sessions of one daemon: the tracing session cannot reach the other's processes (by host
// pid), its own holder, or the daemon.
TEST_F(PtraceOwnDaemon, NeverAcrossSessions) {
    auto c = client();
    auto [victim, victim_root] = session(c, "default");
    const std::string token = std::to_string(3000 + ::getpid() % 1000) + ".5";
    auto sleeper = c.post(victim + "/processes", {{"argv", {"sleep", token}}});
    ASSERT_EQ(sleeper.status, 201u) << sleeper.body;
    std::vector<pid_t> victims;
    for (int i = 0; i < 500 && victims.empty(); ++i) {
        victims = processes_with_token("sleep " + token);
        if (victims.empty()) ::usleep(10000);
    }
    ASSERT_FALSE(victims.empty()) << "the victim's sleep never showed up on the host";

    auto res = c.post("/v1/sessions", {{"policyYaml", kTracingDefault}});
    ASSERT_EQ(res.status, 201u) << res.body;
    const std::string tracer = "/v1/sessions/" + res.json()["id"].get<std::string>();
    upload_probe(c, tracer, CORRAL_SYSCALL_PROBE, "sprobe");
    const std::string host_pid = std::to_string(victims.front());
    const std::string daemon_pid = std::to_string(daemon_->pid());
    auto out = run(c, tracer,
                   "chmod 755 sprobe; ./sprobe ptrace-child; ./sprobe ptrace-pid 1; "
                   "./sprobe ptrace-pid " +
                       host_pid + "; ./sprobe ptrace-pid " + daemon_pid);
    auto a = answers(out);
    EXPECT_EQ(a["child-attach"], "ok") << "the key does not work in a daemon session: " << out;
    for (const std::string& pid : {std::string("1"), host_pid, daemon_pid}) {
        SCOPED_TRACE(pid);
        ASSERT_TRUE(a.count(pid + "-attach")) << out;
        EXPECT_NE(a[pid + "-attach"], "ok") << out;
        EXPECT_NE(a[pid + "-vm-read"], "ok") << out;
        EXPECT_NE(a[pid + "-vm-read"], "EFAULT") << out;
    }
    EXPECT_TRUE(process_exists(victims.front())) << "the victim was disturbed";
}

}  // namespace
}  // namespace corral::security
