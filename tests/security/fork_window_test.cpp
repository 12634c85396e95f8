// The fork window (issue 10.1): every process corrald or `corral run` starts is a copy of its
// parent's memory from fork until execve, and a session's PID 1 (the namespace holder) stays one
// for the session's life. Under `default` the sandbox runs as uid 0 without capabilities, the
// same uid as those copies, so while a copy is dumpable any process of the session can open its
// /proc/N/mem (read and write: the daemon's tokens, other sessions' output), /proc/N/environ and
// /proc/N/exe. Precedents: CVE-2019-5736 (runc: /proc/<runc>/exe reopened from the container and
// overwritten), CVE-2016-9962 (runc: the container joined a dumpable runc init and ptraced it);
// both were fixed by making the runtime non-dumpable before the container can see it.
//
// The launcher tries every PATH entry in the child before exec (execvp's search), so a command
// that does not exist, run with a PATH of thousands of entries, keeps the copy alive for
// milliseconds: long enough for an attacker looping over /proc to see it every time. Not many
// more: before Linux 6.7 execve copies the whole environment (the long PATH included) before it
// opens the file, so a failed attempt costs as much as the environment is long and a search
// costs the square of the entries: 8000 took 30 s a launch on the pure-v2 VM's 6.1 kernel (the
// test overran ctest's 600 s), 2000 take ~1.7 s there and a few milliseconds natively. The
// entries are `/dev/null` (ENOTDIR at once, from the dentry cache on every file system).

#include <fcntl.h>
#include <linux/capability.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "support/sandbox_harness.hpp"
#include "support/security_daemon.hpp"

namespace corral::security {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::HttpClient;

/// A PATH of `entries` entries that are no directory, then the real ones: every launch of a
/// command that is nowhere spends this many failed execve calls (ENOTDIR) as a copy of its
/// parent.
constexpr int kPathEntries = 2000;
std::string long_path(int entries = kPathEntries) {
    std::string path;
    for (int i = 0; i < entries; ++i) path += "/dev/null:";
    return path + "/usr/bin:/bin";
}

/// In a forked child that is uid 0 with no capabilities at all (what `default` runs as), opens
/// /proc/PID/FILE (PID 0: a capless sibling of the child, the control); returns 0 when it opened,
/// else the errno.
int open_as_capless_root(pid_t pid, const char* file, int flags) {
    pid_t child = ::fork();
    if (child == 0) {
        __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
        __user_cap_data_struct none[2] = {};
        if (::syscall(SYS_capset, &header, none) != 0) ::_exit(254);
        pid_t target = pid;
        if (target == 0 && (target = ::fork()) == 0) {
            ::pause();
            ::_exit(0);
        }
        std::string path = "/proc/" + std::to_string(target) + "/" + file;
        int fd = ::open(path.c_str(), flags | O_CLOEXEC);
        int error = errno;
        if (pid == 0) ::kill(target, SIGKILL);
        ::_exit(fd >= 0 ? 0 : (error & 0xff));
    }
    int status = 0;
    ::waitpid(child, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 255;
}

class ForkWindowDaemon : public DaemonTest {
  protected:
    ForkWindowDaemon() { daemon_env_ = {"CORRAL_FORK_WINDOW_SECRET=" + secret_}; }

    /// Waits (bounded) until the session's file `name` exists.
    bool wait_for_file(HttpClient& c, const std::string& base, const std::string& name) {
        for (int i = 0; i < 1000; ++i) {
            if (c.get(base + "/files/stat?path=" + name).status == 200) return true;
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        return false;
    }

    /// Starts the attacker in the background, launches `launches` commands that stay copies of
    /// corrald for a while, stops the attacker and returns its answers.
    std::map<std::string, std::string> attack_launches(HttpClient& c, const std::string& base,
                                                       int launches) {
        upload_probe(c, base, CORRAL_SYSCALL_PROBE, "sprobe");
        run(c, base, "chmod 755 sprobe");
        auto started =
            c.post(base + "/processes", {{"argv",
                                          {"./sprobe", "fork-window", secret_, "120", "stop",
                                           CORRAL_BINARY_DIR "/supervisor/corrald"}}});
        EXPECT_EQ(started.status, 201u) << started.body;
        const std::string attacker = started.json().value("id", std::string());
        EXPECT_TRUE(wait_for_file(c, base, "attacker-ready")) << "the attacker never started";
        const json env = {{"PATH", long_path()}};
        for (int i = 0; i < launches; ++i)
            c.post(base + "/run", {{"argv", {"corral-no-such-command"}}, {"env", env}});
        EXPECT_EQ(c.request("PUT", base + "/files?path=stop", "").status, 200u);
        auto done = c.get(base + "/processes/" + attacker + "/wait?timeoutMs=60000");
        EXPECT_EQ(done.json()["finished"], true) << done.body;
        auto logs = c.get(base + "/processes/" + attacker + "/logs?stream=stdout");
        const std::string out = logs.json().value("data", std::string());
        std::printf("attacker answered:\n%s", out.c_str());
        return answers(out);
    }

    const std::string secret_ = "FORK-WINDOW-SECRET-" + unique_token();
};

// corrald itself: a process of the host with uid 0 but no capabilities (the `default` sandbox's
// credentials, and exactly what a copy inherits) must not open its memory or environment.
TEST_F(ForkWindowDaemon, CorraldIsNotDumpable_CVE_2016_9962) {
    EXPECT_EQ(open_as_capless_root(daemon_->pid(), "environ", O_RDONLY), EACCES);
    EXPECT_EQ(open_as_capless_root(daemon_->pid(), "mem", O_RDWR), EACCES);
    // Control: such a process can open a dumpable process of its own uid and capabilities.
    EXPECT_EQ(open_as_capless_root(0, "environ", O_RDONLY), 0);
    EXPECT_EQ(open_as_capless_root(0, "mem", O_RDWR), 0);
}

// A process of a session watches /proc for the daemon's children while the session launches
// commands: it must never open one before it has exec'd.
TEST_F(ForkWindowDaemon, SessionCannotOpenTheDaemonsChildrenBeforeExec_CVE_2019_5736) {
    auto c = client();
    for (const char* policy : {"default", "strict"}) {
        SCOPED_TRACE(policy);
        auto [base, root] = session(c, policy);
        auto a = attack_launches(c, base, 10);
        ASSERT_NE(a["copies-seen"], "0")
            << "the attacker never saw a copy: the test proves nothing";
        EXPECT_NE(a["environ"], "ok") << "read the daemon's environment out of a child";
        EXPECT_NE(a["mem"], "ok") << "opened a child of corrald's memory for writing";
        EXPECT_NE(a["exe"], "ok") << "got an O_PATH handle to corrald through a child";
        EXPECT_NE(a["environ"], "unseen");
    }
}

// The session's PID 1 never execs: a copy of corrald for the session's whole life.
TEST_F(ForkWindowDaemon, SessionCannotOpenItsHolder) {
    auto c = client();
    auto [base, root] = session(c, "default");
    upload_probe(c, base, CORRAL_SYSCALL_PROBE, "sprobe");
    auto a = answers(run(c, base, "chmod 755 sprobe; ./sprobe proc-read 1"));
    EXPECT_NE(a["1-environ"], "ok");
    EXPECT_NE(a["1-mem"], "ok");
    EXPECT_NE(a["1-exe"], "ok");
    EXPECT_EQ(a.count("1-mem"), 1u);
}

// What must keep working: exec resets the flag, so a command is dumpable again and the session's
// own tools (ps, gdb, /proc/<pid>/environ of a sibling) see the session's processes.
TEST_F(ForkWindowDaemon, ExecdCommandsAreReadableByTheirOwnSession) {
    auto c = client();
    auto [base, root] = session(c, "default");
    upload_probe(c, base, CORRAL_SYSCALL_PROBE, "sprobe");
    auto sleeper = c.post(base + "/processes", {{"argv", {"sleep", "300"}}});
    ASSERT_EQ(sleeper.status, 201u) << sleeper.body;
    auto out = run(c, base,
                   "chmod 755 sprobe; ./sprobe dumpable; ./sprobe proc-read self; "
                   "for p in /proc/[0-9]*; do [ \"$(cat $p/comm)\" = sleep ] && "
                   "./sprobe proc-read ${p#/proc/}; done");
    auto a = answers(out);
    EXPECT_EQ(a["dumpable"], "1") << out;
    EXPECT_EQ(a["self-environ"], "ok") << out;
    EXPECT_EQ(a["self-mem"], "ok") << out;
    EXPECT_NE(out.find("-environ ok\n", out.find("self-exe")), std::string::npos)
        << "a sibling `sleep` of the same session is no longer readable: " << out;
}

class ForkWindowRun : public SandboxTest {
  protected:
    void SetUp() override {
        SandboxTest::SetUp();
        if (IsSkipped()) return;
        fs::copy_file(CORRAL_SYSCALL_PROBE, dir_ / "sprobe");
        ::chmod((dir_ / "sprobe").c_str(), 0755);
    }
};

// Two `corral run` jobs of a CI runner without a pid namespace each: the second job's child is a
// copy of its `corral` (its environment holds the runner's secrets) until exec. The first job must
// not read it.
TEST_F(ForkWindowRun, ConcurrentRunCannotOpenAnotherRunsChildBeforeExec) {
    const std::string secret = "RUN-SECRET-" + unique_token();
    {
        std::ofstream(dir_ / "attacker.yaml") << "extends: default\n"
                                                 "namespaces: { pid: false }\n";
        std::ofstream(dir_ / "victim.yaml")
            << "extends: default\nnamespaces: { pid: false }\n"
            << "env: { set: { PATH: \"" << long_path() << "\" } }\n";
    }
    RunOptions attacker;
    attacker.on_start = [&](pid_t) {
        for (int i = 0; i < 1000 && !fs::exists(dir_ / "attacker-ready"); ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        RunOptions victim;
        victim.in_child = [&] { ::setenv("CI_SECRET", secret.c_str(), 1); };
        for (int i = 0; i < 5; ++i) {
            auto r = corral({"run", "--policy", (dir_ / "victim.yaml").string(), "--",
                             "corral-no-such-command"},
                            victim);
            EXPECT_NE(r.exit_code, 0) << r.err;
        }
        std::ofstream(dir_ / "stop") << "";
    };
    auto r = corral(
        {"run", "--policy", (dir_ / "attacker.yaml").string(), "--timeout", "120s", "--",
         "./sprobe", "fork-window", secret, "100", "stop", CORRAL_BINARY_DIR "/supervisor/corral"},
        attacker);
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    std::printf("attacker answered:\n%s", r.out.c_str());
    auto a = answers(r.out);
    ASSERT_NE(a["copies-seen"], "0") << "the attacker never saw a copy: " << r.out;
    EXPECT_NE(a["environ"], "ok") << "read another run's environment out of its child";
    EXPECT_NE(a["mem"], "ok");
    EXPECT_NE(a["exe"], "ok");
}

// `corral run`'s sandbox PID 1 is a copy of corral for the whole run.
TEST_F(ForkWindowRun, RunCannotOpenItsHolderAndCommandsStayDumpable) {
    for (const char* policy : {"default", "strict"}) {
        SCOPED_TRACE(policy);
        auto r = corral({"run", "--policy", policy, "--", "/bin/sh", "-c",
                         "./sprobe proc-read 1; ./sprobe dumpable; ./sprobe proc-read self"});
        auto a = answers(r.out);
        EXPECT_NE(a["1-environ"], "ok") << r.out << r.err;
        EXPECT_NE(a["1-mem"], "ok") << r.out;
        EXPECT_NE(a["1-exe"], "ok") << r.out;
        EXPECT_EQ(a["dumpable"], "1") << r.out;
        EXPECT_EQ(a["self-environ"], "ok") << r.out;
    }
}

}  // namespace
}  // namespace corral::security
