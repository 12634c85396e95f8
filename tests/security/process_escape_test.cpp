// Escapes through processes: leaving the session's cgroup, reaching host processes, exhausting the
// host's pids, and gaining privileges through setuid binaries.

#include <grp.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "support/sandbox_harness.hpp"

namespace corral::security {
namespace {

namespace fs = std::filesystem;

class ProcessEscape : public SandboxTest, public ::testing::WithParamInterface<const char*> {
  protected:
    /// Fails (and kills them by pid) if processes carrying `token` outlived the session.
    void expect_no_survivors(const std::string& token) {
        auto survivors = processes_with_token(token);
        EXPECT_TRUE(survivors.empty()) << survivors.size() << " process(es) outlived the session";
        kill_processes_with_token(token);
    }
    nlohmann::json report() {
        std::ifstream in(dir() / "report.json");
        return nlohmann::json::parse(in, nullptr, false);
    }
};

// A process that moves itself out of the session's cgroup is no longer tracked or killed with it:
// CVE-2022-0492 (cgroup v1 release_agent written from a container), and plain cgroup.procs (or
// v1 `tasks`, a thread at a time) moves wherever cgroupfs is writable. The probe tries every cgroup
// mount it can see, then leaves a setsid'd daemon behind, which must die with the session all the
// same.
TEST_P(ProcessEscape, CannotLeaveTheSessionCgroup_CVE_2022_0492) {
    const std::string token = unique_token();
    auto r = attack(GetParam(), {"cgroup-escape", token});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    for (const auto& [label, result] : answers(r.out))
        EXPECT_NE(result, "ok") << label << " was writable inside the sandbox";
    expect_no_survivors(token);
}

// A process of the host (started here, unrelated to corral) must be out of reach: not visible, not
// signalable, not traceable (the PID namespace; runc's CVE-2016-9962 let a container ptrace the
// runtime's process as it joined). kill(-1) reaches everything a process may signal: inside, that
// must be nothing (the probe uses signal 0 there, so a broken namespace cannot hurt the host).
TEST_P(ProcessEscape, HostProcessesAreUnreachable_CVE_2016_9962) {
    HostProcess target;
    ASSERT_TRUE(target.alive());
    auto r = attack(GetParam(), {"host-pid", std::to_string(target.pid())});
    auto a = answers(r.out);
    EXPECT_EQ(a["kill"], "ESRCH") << r.out << r.err;
    EXPECT_NE(a["ptrace"], "ok") << r.out;
    EXPECT_EQ(a["pidfd"], "ESRCH") << r.out;
    EXPECT_EQ(a["proc"], "ENOENT") << r.out;
    EXPECT_TRUE(target.alive()) << "the host process was killed from inside the sandbox";

    auto all = attack(GetParam(), {"kill-all"});
    EXPECT_EQ(answers(all.out)["kill-all"], "ESRCH")
        << "processes outside are signalable: " << all.out;
}

INSTANTIATE_TEST_SUITE_P(Presets, ProcessEscape, ::testing::Values("default", "strict"));

class StrictOnly : public ProcessEscape {};

// A fork bomb under `strict` (pids: 256) is stopped by the pids limit, and the session still ends
// cleanly with every child killed. The probe stops by itself at 1000 children so that a missing
// limit fails this test rather than the host. Precedent: the classic `:(){ :|:& };:`; Docker's
// --pids-limit exists for it (moby/moby#15286 era).
TEST_F(StrictOnly, ForkBombIsContainedByThePidsLimit) {
    const std::string token = unique_token();
    const auto started = std::chrono::steady_clock::now();
    auto r = corral({"run", "--policy", "strict", "--timeout", "10s", "--report", "report.json",
                     "--", probe(), "fork-bomb", "1000", token});
    const auto took = std::chrono::steady_clock::now() - started;
    EXPECT_LT(took, std::chrono::seconds(60)) << "hang bound";
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;

    long forked = -1;
    std::string error;
    std::istringstream(r.out) >> std::ws >> error >> forked >> error;  // "forked N ERRNO"
    EXPECT_GT(forked, 0) << r.out;
    EXPECT_LT(forked, 256) << "the pids limit did not stop the fork bomb";
    EXPECT_EQ(error, "EAGAIN") << r.out;
    auto rep = report();
    ASSERT_FALSE(rep.is_discarded()) << "no report";
    EXPECT_GE(rep["leftBehind"].get<long>(), forked) << rep.dump();
    expect_no_survivors(token);
}

// A setuid-root binary in the writable working directory must not raise privileges: no_new_privs
// (and nosuid) make the bit inert. Precedent: setuid helpers reachable from sandboxes turn any of
// their bugs into root (sudo's CVE-2021-3156, pkexec's CVE-2021-4034).
TEST_F(StrictOnly, SetuidBinaryGrantsNoPrivileges_CVE_2021_4034) {
    const fs::path suid = dir() / "probe-suid";
    fs::copy_file(dir() / "probe", suid);
    ASSERT_EQ(::chown(suid.c_str(), 0, 0), 0);
    ASSERT_EQ(::chmod(suid.c_str(), 04755), 0);

    // Control: outside any sandbox, nobody running it becomes euid 0 (the bit works here).
    int out[2];
    ASSERT_EQ(::pipe(out), 0);
    pid_t pid = ::fork();
    if (pid == 0) {
        ::dup2(out[1], 1);
        if (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0)
            ::_exit(97);
        ::execl(suid.c_str(), suid.c_str(), "ids", static_cast<char*>(nullptr));
        ::_exit(98);
    }
    ::close(out[1]);
    std::string control;
    char buf[512];
    for (ssize_t n; (n = ::read(out[0], buf, sizeof buf)) > 0;) control.append(buf, size_t(n));
    ::close(out[0]);
    ::waitpid(pid, nullptr, 0);
    if (answers(control)["euid"] != "0")
        GTEST_SKIP() << "setuid bits do not work in " << dir() << " on this host: " << control;

    auto r = corral({"run", "--policy", "strict", "--", suid.string(), "ids"});
    auto a = answers(r.out);
    EXPECT_EQ(a["ruid"], "65534") << r.out << r.err;
    EXPECT_EQ(a["euid"], "65534") << "setuid took effect inside the sandbox";
    EXPECT_NE(r.out.find("CapEff:\t0000000000000000"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("NoNewPrivs:\t1"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace corral::security
