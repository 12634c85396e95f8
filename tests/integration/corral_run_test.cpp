// `corral run` end to end: the real binary, real cgroups, real namespaces, real seccomp.
// Each test runs in a fresh temporary directory (the command's cwd, which the sandbox keeps
// writable) and checks afterwards that corral left no cgroup behind.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <iterator>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/file_io.hpp"
#include "isolation/cgroup.hpp"
#include "isolation/cgroup_placement.hpp"
#include "isolation/sandbox.hpp"

namespace fs = std::filesystem;

namespace {

const std::string kCorral = std::string(CORRAL_BINARY_DIR) + "/supervisor/corral";

struct Outcome {
    int exit_code = -1;
    std::string out;
    std::string err;
    pid_t corral_pid = -1;
};

/// Reads a pipe to its end.
std::string drain(int fd) {
    std::string text;
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
    close(fd);
    return text;
}

class CorralRun : public ::testing::Test {
  protected:
    void SetUp() override {
        if (geteuid() != 0) GTEST_SKIP() << "needs root (cgroups and namespaces)";
        char tmpl[] = "/tmp/corral-run-test-XXXXXX";
        ASSERT_NE(mkdtemp(tmpl), nullptr);
        dir_ = tmpl;
        // Where the kernel cannot idmap this file system (tmpfs before 6.3, 9p: the pure-v2 VM),
        // a `default` sandbox reaches the bound cwd as its own unprivileged range, as documented
        // (README "Identity"), so the job's directory must let any user in and write, as a CI
        // checkout shared with an unprivileged job user would. Idmapping hosts keep mkdtemp's 0700.
        idmaps_ = static_cast<bool>(corral::probe_idmapped_mount(dir_.string()));
        if (!idmaps_) {
            ASSERT_EQ(chmod(dir_.c_str(), 0777), 0);
        }
        fs::copy_file(CORRAL_PROBE, dir_ / "probe");
        auto host = corral::discover_cgroup_host();
        ASSERT_TRUE(host) << host.error().describe();
        // Where `corral run` builds its cgroup: below the root when started from a cgroup that
        // holds other processes on a host without systemd (issue 11.5), else our own cgroup.
        auto plan = corral::plan_cgroup_placement(
            *host, corral::observe_placement_facts(*host, corral::PlacementOptions{}));
        v2_own_ = plan.base.empty() ? host->v2_own : plan.base;
    }
    void TearDown() override {
        if (!dir_.empty()) fs::remove_all(dir_);
    }

    /// Creates a job directory below the test's, open to the sandbox's range like the test's own
    /// where the kernel cannot idmap it (see SetUp).
    void make_job_dir(const fs::path& relative) {
        fs::create_directories(dir_ / relative);
        if (idmaps_)
            return;
        for (fs::path p = relative; !p.empty(); p = p.parent_path())
            ASSERT_EQ(chmod((dir_ / p).c_str(), 0777), 0);
    }

    /// Runs `corral ARGS` in the test's directory. `on_start` runs once corral has started
    /// (given its pid), for tests that signal it.
    Outcome corral(const std::vector<std::string>& args,
                   const std::function<void(pid_t)>& on_start = {}) {
        int out[2], err[2];
        EXPECT_EQ(pipe2(out, O_CLOEXEC), 0);
        EXPECT_EQ(pipe2(err, O_CLOEXEC), 0);
        const std::string stale_parent = v2_own_;  // built before fork: the child only copies
        pid_t pid = fork();
        if (pid == 0) {
            if (stale_ != Stale::none) leave_stale_cgroup(stale_parent.c_str());
            dup2(out[1], 1);
            dup2(err[1], 2);
            if (chdir((run_in_.empty() ? dir_ : run_in_).c_str()) != 0) _exit(99);
            if (!args.empty() && args[0] == "__sh") {  // a README block, run by sh as written
                if (const char* home = getenv("CORRAL_TEST_HOME")) setenv("HOME", home, 1);
                execl("/bin/sh", "sh", "-e", "-c", args[1].c_str(), static_cast<char*>(nullptr));
                _exit(97);
            }
            std::vector<char*> argv{const_cast<char*>(kCorral.c_str())};
            for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
            argv.push_back(nullptr);
            execv(kCorral.c_str(), argv.data());
            _exit(98);
        }
        close(out[1]);
        close(err[1]);
        if (on_start) on_start(pid);
        Outcome result;
        result.corral_pid = pid;
        std::thread err_reader([&] { result.err = drain(err[0]); });
        result.out = drain(out[0]);
        err_reader.join();
        int status = 0;
        waitpid(pid, &status, 0);
        result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        // Whatever happened, corral must have removed its cgroup before returning (a populated
        // stale one of its pid is not its own: it is left as it was).
        if (stale_ != Stale::populated) {
            EXPECT_FALSE(fs::exists(v2_own_ + "/corral-run-" + std::to_string(pid)))
                << "corral left its cgroup behind";
        }
        return result;
    }

    nlohmann::json report() {
        std::ifstream in(dir_ / "report.json");
        return nlohmann::json::parse(in);
    }
    std::string read(const std::string& name) {
        std::ifstream in(dir_ / name);
        std::stringstream s;
        s << in.rdbuf();
        return s.str();
    }
    std::string probe() const { return (dir_ / "probe").string(); }

    /// What a `corral run` killed by SIGKILL leaves for the next one that gets its pid: its
    /// cgroup `corral-run-<pid>` with the `main` leaf, empty, or with the command still in it.
    enum class Stale { none, empty, populated };
    /// In the forked child, before it execs corral (so with corral's pid): leaves stale_'s
    /// cgroup. Only system calls and snprintf after fork.
    void leave_stale_cgroup(const char* parent) const noexcept {
        char dir[512], leaf[560], procs[600];
        std::snprintf(dir, sizeof dir, "%s/corral-run-%d", parent, static_cast<int>(getpid()));
        std::snprintf(leaf, sizeof leaf, "%s/main", dir);
        std::snprintf(procs, sizeof procs, "%s/cgroup.procs", leaf);
        if (::mkdir(dir, 0755) != 0 || ::mkdir(leaf, 0755) != 0) _exit(96);
        if (stale_ != Stale::populated) return;
        const pid_t command = fork();
        if (command == 0) {
            const int null = ::open("/dev/null", O_RDWR);  // not the test's pipes
            dup2(null, 1);
            dup2(null, 2);
            execl("/bin/sleep", "sleep", "60", static_cast<char*>(nullptr));
            _exit(94);
        }
        // Moved in here, before corral starts: the tree is populated when corral looks at it.
        char pid[16];
        const int length = std::snprintf(pid, sizeof pid, "%d", static_cast<int>(command));
        const int fd = ::open(procs, O_WRONLY | O_CLOEXEC);
        if (fd < 0 || ::write(fd, pid, static_cast<size_t>(length)) != length) _exit(95);
        ::close(fd);
    }

    Stale stale_ = Stale::none;
    fs::path dir_;
    fs::path run_in_;  ///< where corral is started (empty: dir_)
    bool idmaps_ = true;  ///< the kernel can idmap dir_ (false: tmpfs before 6.3, 9p)
    std::string v2_own_;
};

bool process_alive(pid_t pid) {
    return kill(pid, 0) == 0 || errno != ESRCH;
}

TEST_F(CorralRun, PolicySeccompExportsTheFilterTheKernelEnforces) {
    auto r = corral({"policy", "seccomp", "default"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    ASSERT_FALSE(r.out.empty());
    ASSERT_EQ(r.out.size() % sizeof(sock_filter), 0u) << "a raw sock_filter array";
    // Installed by hand in a child, the exported program refuses what the default preset does.
    std::vector<sock_filter> program(r.out.size() / sizeof(sock_filter));
    std::memcpy(program.data(), r.out.data(), r.out.size());
    pid_t child = fork();
    if (child == 0) {
        sock_fprog prog{static_cast<unsigned short>(program.size()), program.data()};
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) _exit(10);
        if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) _exit(11);
        if (unshare(CLONE_NEWNS) == 0 || errno != EPERM) _exit(12);
        _exit(getpid() > 0 ? 0 : 13);
    }
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;

    auto none = corral({"policy", "seccomp", "none"});
    EXPECT_EQ(none.exit_code, 1);
    EXPECT_NE(none.err.find("has no seccomp filter"), std::string::npos) << none.err;
}

/// Ends and removes the stale cgroup a test left (the test made it, whether or not it passed).
struct StaleCgroupRemoval {
    std::string dir;
    ~StaleCgroupRemoval() {
        if (!fs::exists(dir)) return;
        (void)corral::write_file(dir + "/main/cgroup.kill", "1");
        for (int i = 0; i < 200 && ::rmdir((dir + "/main").c_str()) != 0 && errno != ENOENT; ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        ::rmdir(dir.c_str());
    }
};

// A `corral run` killed by SIGKILL (a CI runner's timeout) cannot remove its cgroup; the next
// `corral run` that got its pid failed with EEXIST (exit 125, found while benchmarking issue
// 18). An empty one is removed and the name taken again (the helper checks it is gone after).
TEST_F(CorralRun, AStaleEmptyCgroupOfOurPidIsReclaimed) {
    stale_ = Stale::empty;
    auto r = corral({"run", "--policy", "none", "--", "sh", "-c", "echo ran"});
    StaleCgroupRemoval cleanup{v2_own_ + "/corral-run-" + std::to_string(r.corral_pid)};
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "ran\n");
}

// One whose command outlived its killed supervisor is not ours to end or remove: it stays with
// its process, and the run takes another name (removed after it like its own).
TEST_F(CorralRun, AStalePopulatedCgroupOfOurPidIsLeftAndTheRunGoesElsewhere) {
    stale_ = Stale::populated;
    auto r = corral({"run", "--policy", "none", "--", "sh", "-c", "echo ran"});
    const std::string stale = v2_own_ + "/corral-run-" + std::to_string(r.corral_pid);
    StaleCgroupRemoval cleanup{stale};
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "ran\n");
    auto procs = corral::read_file(stale + "/main/cgroup.procs");
    ASSERT_TRUE(procs) << "the stale cgroup was removed";
    EXPECT_FALSE(procs->empty()) << "its command was ended";
    EXPECT_FALSE(fs::exists(stale + "-1")) << "the run's own cgroup was left behind";
}

TEST_F(CorralRun, ExitCodePassesThrough) {
    auto r =
        corral({"run", "--policy", "none", "--report", "report.json", "--", "sh", "-c", "exit 7"});
    EXPECT_EQ(r.exit_code, 7) << r.err;
    auto rep = report();
    EXPECT_EQ(rep["status"], "exited");
    EXPECT_EQ(rep["exitCode"], 7);
    EXPECT_TRUE(rep["signal"].is_null());
}

TEST_F(CorralRun, SignalBecomes128PlusN) {
    auto r = corral({"run", "--report", "report.json", "--", "sh", "-c", "kill -TERM $$"});
    EXPECT_EQ(r.exit_code, 128 + SIGTERM) << r.err;
    auto rep = report();
    EXPECT_EQ(rep["status"], "signaled");
    EXPECT_EQ(rep["signal"], "SIGTERM");  // the daemon's form too (issue 12.6)
}

// Red-team finding on issue 10 (a confused deputy, like CVE-2022-24765's git safe.directory):
// an untrusted checkout that holds a file named after a preset must not choose the policy of a
// root `corral run` started in it. A bare word is always a preset (or policy) name.
TEST_F(CorralRun, AFileNamedLikeAPresetInTheCwdIsNotThePolicy) {
    std::ofstream(dir_ / "default") << "extends: none\n";
    std::ofstream(dir_ / "strict") << "extends: none\n";
    ASSERT_EQ(chmod(dir_.c_str(), 0755), 0);  // strict's nobody may enter (not write) the job dir
    for (const char* preset : {"default", "strict"}) {
        auto r = corral({"run", "--policy", preset, "--", "cat", "/proc/self/uid_map"});
        EXPECT_EQ(r.exit_code, 0) << preset << ": " << r.err;
        EXPECT_EQ(r.out.find("4294967295"), std::string::npos)
            << preset << ": the planted file's `extends: none` ran on the host's identity";
    }
    auto implicit = corral({"run", "--", "cat", "/proc/self/uid_map"});
    EXPECT_EQ(implicit.out.find("4294967295"), std::string::npos) << implicit.err;
    // Written as a path, the file is what is meant.
    auto as_file = corral({"run", "--policy", "./default", "--", "cat", "/proc/self/uid_map"});
    EXPECT_NE(as_file.out.find("4294967295"), std::string::npos) << as_file.err;
}

TEST_F(CorralRun, StdoutIsTheCommandsOwn) {
    auto r = corral({"run", "--", "echo", "hello from inside"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "hello from inside\n");
}

TEST_F(CorralRun, KillsDoubleForkedSetsidDaemon) {
    // The job starts a daemon that double-forks and calls setsid, then exits at once.
    auto r = corral({"run", "--policy", "none", "--report", "report.json", "--", "sh", "-c",
                     "setsid sh -c 'sleep 1000 & echo $! > daemon.pid' & wait"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    pid_t daemon = std::stoi(read("daemon.pid"));
    EXPECT_FALSE(process_alive(daemon)) << "daemon " << daemon << " survived corral run";
    EXPECT_GE(report()["leftBehind"].get<int>(), 1);
}

TEST_F(CorralRun, KillsLeftBehindProcessesInDefaultSandbox) {
    auto r = corral({"run", "--report", "report.json", "--", "sh", "-c",
                     "setsid sh -c 'sleep 1000 & sleep 1000 &' & wait; echo started"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "started\n");
    EXPECT_GE(report()["leftBehind"].get<int>(), 2);
}

TEST_F(CorralRun, TimeoutEndsTheWholeTree) {
    // The timeout must come after the shell started its background daemon (bg.pid written): on
    // a slow machine (the pure-v2 harness) 1 s may not be enough, so it doubles until it is.
    for (int seconds = 1; seconds <= 32; seconds *= 2) {
        fs::remove(dir_ / "bg.pid");
        auto started = std::chrono::steady_clock::now();
        auto r = corral({"run", "--policy", "none", "--timeout", std::to_string(seconds) + "s",
                         "--report", "report.json", "--", "sh", "-c",
                         "setsid sleep 1000 & echo $! > bg.pid.new; mv bg.pid.new bg.pid; "
                         "sleep 1000"});
        auto took = std::chrono::steady_clock::now() - started;
        EXPECT_EQ(r.exit_code, 124) << r.err;
        EXPECT_EQ(report()["status"], "timeout");
        EXPECT_LT(took, std::chrono::seconds(seconds + 60)) << "hang bound";
        if (!fs::exists(dir_ / "bg.pid")) continue;
        EXPECT_FALSE(process_alive(std::stoi(read("bg.pid"))));
        return;
    }
    FAIL() << "the shell never started its background daemon before the timeout";
}

TEST_F(CorralRun, SigtermToCorralIsForwardedAndEndsTheSession) {
    auto r = corral({"run", "--policy", "none", "--report", "report.json", "--", "sh", "-c",
                     "echo $$ > main.pid; setsid sleep 1000 & echo $! > bg.pid; sleep 1000"},
                    [&](pid_t corral_pid) {
                        for (int i = 0; i < 200 && !fs::exists(dir_ / "bg.pid"); ++i)
                            std::this_thread::sleep_for(std::chrono::milliseconds(25));
                        std::this_thread::sleep_for(std::chrono::milliseconds(100));
                        kill(corral_pid, SIGTERM);
                    });
    EXPECT_EQ(r.exit_code, 128 + SIGTERM) << r.err;
    EXPECT_EQ(report()["status"], "killed");
    EXPECT_FALSE(process_alive(std::stoi(read("bg.pid"))));
}

// Where no controller is enabled below the run's cgroup, the namespace holder lives in the run's
// cgroup itself and only the command gets a leaf (`main`): one cgroup fewer per sandboxed launch
// (issue 18). Where one is (a pure v2 host with limits), the no-internal-process rule needs the
// `holder` leaf as before. Either way the command is alone in its leaf (what stops its processes
// must not stop the holder), and the holder is in the run's tree (cgroup.kill of it ends both).
TEST_F(CorralRun, TheHolderSitsInTheRunsCgroupUnlessControllersAreEnabledBelowIt) {
    std::string checked;
    auto r = corral(
        {"run", "--", "sh", "-c", "touch started; while [ ! -e checked ]; do sleep 0.05; done"},
        [&](pid_t corral_pid) {
            const std::string run = v2_own_ + "/corral-run-" + std::to_string(corral_pid);
            for (int i = 0; i < 400 && !fs::exists(dir_ / "started"); ++i)
                std::this_thread::sleep_for(std::chrono::milliseconds(25));
            auto controllers = corral::read_file(run + "/cgroup.subtree_control");
            auto in_run = corral::read_file(run + "/cgroup.procs");
            auto in_main = corral::read_file(run + "/main/cgroup.procs");
            auto in_holder = corral::read_file(run + "/holder/cgroup.procs");
            std::ofstream(dir_ / "checked") << "";
            ASSERT_TRUE(controllers && in_run && in_main) << "no run cgroup at " << run;
            const bool enabled = controllers->find_first_not_of(" \n") != std::string::npos;
            std::istringstream main_pids(*in_main);
            std::vector<std::string> commands{std::istream_iterator<std::string>(main_pids), {}};
            EXPECT_FALSE(commands.empty()) << "the command is not in its leaf";
            if (enabled) {
                EXPECT_TRUE(in_holder && !in_holder->empty()) << "controllers " << *controllers;
                EXPECT_TRUE(in_run->empty()) << *in_run;
            } else {
                EXPECT_FALSE(fs::exists(run + "/holder")) << "a leaf made for the holder";
                EXPECT_FALSE(in_run->empty()) << "the holder is not in the run's cgroup";
            }
            checked = "yes";
        });
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(checked, "yes");
}

TEST_F(CorralRun, DefaultPresetDeniesPtraceMountUnshare) {
    for (const char* action : {"ptrace", "mount", "unshare-mount"}) {
        auto r = corral({"run", "--", probe(), action});
        EXPECT_EQ(r.out, "EPERM\n") << action << ": " << r.err;
    }
}

TEST_F(CorralRun, DefaultPresetDropsCapabilitiesAndSetsNoNewPrivs) {
    auto r = corral({"run", "--", probe(), "caps"});
    EXPECT_NE(r.out.find("CapEff:\t0000000000000000"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("CapBnd:\t0000000000000000"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("CapAmb:\t0000000000000000"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("NoNewPrivs:\t1"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("Seccomp:\t2"), std::string::npos) << r.out;
}

TEST_F(CorralRun, PidNamespaceSeesOnlyTheSession) {
    auto r = corral({"run", "--", probe(), "pids"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::istringstream lines(r.out);
    std::vector<int> pids;
    for (std::string line; std::getline(lines, line);) pids.push_back(std::stoi(line));
    // The namespace holder (1) and the probe itself; nothing of the host's.
    EXPECT_LE(pids.size(), 3u) << r.out;
    EXPECT_NE(std::find(pids.begin(), pids.end(), 1), pids.end()) << r.out;
    for (int pid : pids) EXPECT_LT(pid, 10) << r.out;
}

TEST_F(CorralRun, HomeIsHiddenAndUsrIsReadOnly) {
    auto home = corral({"run", "--", "ls", "-A", "/home", "/root"});
    EXPECT_EQ(home.exit_code, 0) << home.err;
    EXPECT_EQ(home.out, "/home:\n\n/root:\n") << home.out;
    auto usr = corral({"run", "--", probe(), "write", "/usr/corral-must-not-exist"});
    EXPECT_EQ(usr.out, "EROFS\n") << usr.err;
    auto cwd = corral({"run", "--", probe(), "write", "written-inside"});
    EXPECT_EQ(cwd.out, "ok\n") << "the working directory stays writable: " << cwd.err;
    EXPECT_TRUE(fs::exists(dir_ / "written-inside"));
}

TEST_F(CorralRun, IsolatedNetworkHasOnlyLoopbackAndCannotReachHost) {
    int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    ASSERT_EQ(listen(listener, 4), 0);
    socklen_t len = sizeof addr;
    getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
    std::string port = std::to_string(ntohs(addr.sin_port));

    auto devs = corral({"run", "--", probe(), "netdevs"});
    EXPECT_EQ(devs.out, "lo\n") << devs.err;
    auto inside = corral({"run", "--", probe(), "connect", port});
    EXPECT_EQ(inside.out, "ECONNREFUSED\n") << inside.err;
    auto host = corral({"run", "--policy", "none", "--", probe(), "connect", port});
    EXPECT_EQ(host.out, "ok\n") << "control: the listener is reachable without isolation";
    close(listener);
}

// Issue 15: corral run has none of corrald's egress (proxy, relay, session DNS). A policy that
// opens egress gets nothing more under it — fail-closed, as deny-all — and both corral run and
// `corral policy check` say so instead of leaving the job to fail with a bare ENETUNREACH.
TEST_F(CorralRun, EgressPolicyIsServedByCorraldOnlyAndCorralRunSaysSo) {
    {
        std::ofstream(dir_ / "egress.yaml") << "name: egress\nextends: default\nnetwork:\n"
                                               "  egress: {mode: allow-all}\n";
    }
    const std::string policy = (dir_ / "egress.yaml").string();
    auto check = corral({"policy", "check", policy});
    EXPECT_EQ(check.exit_code, 0) << check.err;
    EXPECT_NE(check.out.find("# corral run: corrald serves network.egress mode allow-all (its "
                             "proxy, relay and DNS), corral run does not"),
              std::string::npos)
        << check.out;
    auto run = corral({"run", "--policy", policy, "--", probe(), "netdevs"});
    EXPECT_EQ(run.out, "lo\n") << run.err;
    EXPECT_NE(run.err.find("corral run: note: corrald serves network.egress mode allow-all"),
              std::string::npos)
        << run.err;
    // The default policy (deny-all) means the same under both: no note.
    auto plain = corral({"policy", "check", "default"});
    EXPECT_EQ(plain.out.find("corrald serves"), std::string::npos);
}

TEST_F(CorralRun, MissingWorkingDirectoryIsASetupErrorNamingWhatWasGiven) {
    auto r = corral({"run", "--cwd", "/no/such/dir", "--report", "report.json", "--", "true"});
    EXPECT_EQ(r.exit_code, 125);
    EXPECT_NE(r.err.find("--cwd `/no/such/dir`"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("ENOENT"), std::string::npos) << r.err;
    EXPECT_EQ(report()["status"], "setup-failed");

    std::ofstream(dir_ / "a-file") << "x";
    auto file = corral({"run", "--cwd", "a-file", "--", "true"});
    EXPECT_EQ(file.exit_code, 125);
    EXPECT_NE(file.err.find("--cwd `a-file`"), std::string::npos) << file.err;
    EXPECT_NE(file.err.find("ENOTDIR"), std::string::npos) << file.err;
}

// Issue 17, item 8: exit codes a shell would give. 125 stays for corral's own setup failures.
TEST_F(CorralRun, MissingProgramExits127AndNamesExecveAndErrno) {
    auto r = corral({"run", "--report", "report.json", "--", "no-such-program-corral"});
    EXPECT_EQ(r.exit_code, 127);
    EXPECT_NE(r.err.find("execve `no-such-program-corral`"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("ENOENT"), std::string::npos) << r.err;
    auto rep = report();
    EXPECT_EQ(rep["status"], "setup-failed");
    EXPECT_EQ(rep["exitCode"], 127);
}

TEST_F(CorralRun, NonExecutableProgramExits126) {
    std::ofstream(dir_ / "not-executable") << "#!/bin/sh\necho ran\n";
    fs::permissions(dir_ / "not-executable", fs::perms::owner_read | fs::perms::owner_write);
    for (const char* policy : {"default", "none"}) {
        auto r = corral({"run", "--policy", policy, "--report", "report.json", "--",
                         (dir_ / "not-executable").string()});
        EXPECT_EQ(r.exit_code, 126) << policy << ": " << r.err;
        EXPECT_NE(r.err.find("EACCES"), std::string::npos) << r.err;
        EXPECT_EQ(report()["exitCode"], 126) << policy;
    }
    auto missing = corral({"run", "--policy", "none", "--", (dir_ / "absent").string()});
    EXPECT_EQ(missing.exit_code, 127) << missing.err;
}

TEST_F(CorralRun, BadPolicyIsReportedWithLineAndColumn) {
    std::ofstream(dir_ / "bad.yaml") << "name: x\nlimits:\n  memory: 12XB\n";
    auto r = corral({"run", "--policy", (dir_ / "bad.yaml").string(), "--", "true"});
    EXPECT_EQ(r.exit_code, 125);
    EXPECT_NE(r.err.find("bad.yaml:3:"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("limits.memory"), std::string::npos) << r.err;
}

TEST_F(CorralRun, ReportHasUsage) {
    auto r = corral({"run", "--report", "report.json", "--", "sh", "-c",
                     "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    auto rep = report();
    EXPECT_GT(rep["usage"]["cpuTotalUsec"].get<uint64_t>(), 0u);
    EXPECT_GT(rep["durationMs"].get<uint64_t>(), 0u);
}

}  // namespace

namespace {

TEST_F(CorralRun, ForkBombUnderPidsLimitIsContainedAndReported) {
    std::ofstream(dir_ / "pids.yaml") << "extends: default\nlimits: { pids: 64 }\n";
    // `sleep` starts before the bomb: once the limit is reached the main shell could not fork
    // it (dash exits on a failed fork), which on a slow machine happens before it gets there.
    auto r = corral({"run", "--policy", (dir_ / "pids.yaml").string(), "--timeout", "20s",
                     "--report", "report.json", "--", "sh", "-c",
                     "sleep 2 & s=$!; bomb() { bomb | bomb & }; bomb; wait $s; "
                     "echo still-responsive"});
    EXPECT_EQ(r.out, "still-responsive\n") << r.err;
    auto usage = report()["usage"];
    EXPECT_GT(usage["pidsLimitHits"].get<uint64_t>(), 0u) << usage.dump();
    EXPECT_LE(usage["pidsPeak"].get<uint64_t>(), 64u) << usage.dump();
}

TEST_F(CorralRun, AllocationPastMemoryLimitEndsWithOom) {
    std::ofstream(dir_ / "mem.yaml") << "extends: default\nlimits: { memory: 64Mi }\n";
    auto r = corral({"run", "--policy", (dir_ / "mem.yaml").string(), "--timeout", "60s",
                     "--report", "report.json", "--", probe(), "alloc", "512"});
    EXPECT_EQ(r.exit_code, 128 + SIGKILL) << r.out << r.err;
    auto rep = report();
    EXPECT_EQ(rep["status"], "oom") << rep.dump();
    EXPECT_GE(rep["usage"]["oomKills"].get<uint64_t>(), 1u) << rep.dump();
}

// Issue 18: `corral run` of a policy without limits does not confirm the v1 hierarchies' mounts
// (isolation/cgroup.hpp, V1Hierarchies::skip). A policy with limits must still find them on a
// hybrid host: the command's own v1 memory and pids cgroups carry the limits. Were the v1
// hierarchies skipped here, strict enforcement would refuse the run (no v1 hierarchy holds us),
// and best-effort would run the command without its limits.
TEST_F(CorralRun, LimitsOnAHybridHostStillLandInTheCommandsV1Cgroups) {
    auto host = corral::discover_cgroup_host();
    ASSERT_TRUE(host) << host.error().describe();
    if (host->layout != corral::CgroupLayout::hybrid)
        GTEST_SKIP() << "v1 limit hierarchies exist only on hybrid hosts";
    auto cgroups = corral::read_file("/proc/self/cgroup");
    ASSERT_TRUE(cgroups) << cgroups.error().describe();
    // The mount of controller `c`: our v1 cgroup less our path in that hierarchy.
    auto mount_of = [&](const std::string& c) -> std::string {
        const std::string key = ":" + c + ":";
        const size_t at = cgroups->find(key);
        if (at == std::string::npos || !host->v1_own.count(c)) return "";
        const size_t start = at + key.size();
        std::string path = cgroups->substr(start, cgroups->find('\n', start) - start);
        if (path == "/") path.clear();
        const std::string& own = host->v1_own.at(c);
        return own.substr(0, own.size() - path.size());
    };
    const std::string memory = mount_of("memory"), pids = mount_of("pids");
    if (memory.empty() || pids.empty()) GTEST_SKIP() << "no v1 memory and pids hierarchies here";
    for (const char* enforcement : {"strict", "best-effort"}) {
        std::ofstream(dir_ / "limited.yaml")
            << "extends: none\nlimits: { memory: 64Mi, pids: 50 }\nenforcement: " << enforcement
            << "\n";
        auto r = corral({"run", "--policy", (dir_ / "limited.yaml").string(), "--report",
                         "report.json", "--", "sh", "-c",
                         "m=$(sed -n 's/^[0-9]*:memory://p' /proc/self/cgroup); "
                         "p=$(sed -n 's/^[0-9]*:pids://p' /proc/self/cgroup); "
                         "cat \"" + memory + "$m/memory.limit_in_bytes\" \"" + pids +
                             "$p/pids.max\""});
        EXPECT_EQ(r.exit_code, 0) << enforcement << ": " << r.err;
        EXPECT_EQ(r.out, "67108864\n50\n") << enforcement << ": " << r.err;
        EXPECT_TRUE(report()["notEnforced"].empty()) << enforcement << ": " << report().dump();
    }
}

TEST_F(CorralRun, StrictEnforcementRefusesALimitTheHostCannotEnforce) {
    std::ofstream(dir_ / "io.yaml") << "extends: default\nlimits: { io_weight: 100 }\n";
    auto r = corral(
        {"run", "--policy", (dir_ / "io.yaml").string(), "--report", "report.json", "--", "true"});
    if (r.exit_code == 0) GTEST_SKIP() << "this host can enforce io weights (bfq in use)";
    EXPECT_EQ(r.exit_code, 125);
    EXPECT_EQ(report()["status"], "setup-failed");
    EXPECT_NE(r.err.find("io"), std::string::npos) << r.err;

    std::ofstream(dir_ / "io-best.yaml")
        << "extends: default\nlimits: { io_weight: 100 }\nenforcement: best-effort\n";
    auto best = corral({"run", "--policy", (dir_ / "io-best.yaml").string(), "--report",
                        "report.json", "--", "true"});
    EXPECT_EQ(best.exit_code, 0) << best.err;
    EXPECT_FALSE(report()["notEnforced"].empty()) << "best-effort must list what it skipped";
}

}  // namespace

namespace {

// The daemon hides its state dir and its socket's dir, which may nest (state under the socket
// dir): a hidden dir covered by a later hidden dir or tmpfs must not break the sandbox.
// Stop 44: Landlock's rules were opened in corral run's own mount namespace, so `write: [/tmp]`
// held the host's /tmp and the sandbox could not write its own /tmp tmpfs (EACCES).
TEST_F(CorralRun, LandlockRulesHoldTheSandboxsOwnTmp) {
    std::ofstream(dir_ / "ll.yaml")
        << "name: ll\nextends: default\nlandlock:\n  read: [/usr, /bin, /lib, /lib64, /etc, "
           "/proc, /dev]\n  write: [/tmp, /dev/null]\n";
    auto r = corral({"run", "--policy", "ll.yaml", "--", "sh", "-c",
                     "echo t > /tmp/t && cat /tmp/t && ls /root"});
    EXPECT_EQ(r.out, "t\n") << r.err;
    EXPECT_NE(r.err.find("Permission denied"), std::string::npos) << r.err;  // /root: not listed
    EXPECT_EQ(r.exit_code, 2) << r.err;
}

TEST_F(CorralRun, NestedHiddenDirectoriesAreHiddenTogether) {
    fs::create_directories(dir_ / "outer" / "inner");
    std::ofstream(dir_ / "outer" / "inner" / "secret") << "s";
    std::ofstream(dir_ / "nested.yaml")
        << "extends: none\nnamespaces: { mount: true, pid: true }\nfilesystem:\n  hidden: ["
        << (dir_ / "outer" / "inner").string() << ", " << (dir_ / "outer").string() << "]\n";
    auto r = corral({"run", "--policy", (dir_ / "nested.yaml").string(), "--cwd", "/", "--", "ls",
                     "-A", (dir_ / "outer").string()});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "") << "a hidden directory showed its contents";
}

}  // namespace

namespace {

TEST_F(CorralRun, OomGroupEndsTheWholeSessionOnTheFirstOomKill) {
    std::ofstream(dir_ / "group.yaml")
        << "extends: default\nlimits: { memory: 64Mi, oom_group: true }\n";
    auto started = std::chrono::steady_clock::now();
    // Only a background child allocates; without oom_group the main process would sleep on.
    auto r =
        corral({"run", "--policy", (dir_ / "group.yaml").string(), "--timeout", "60s", "--report",
                "report.json", "--", "sh", "-c", probe() + " alloc 512 & sleep 100"});
    EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(50));
    auto rep = report();
    EXPECT_EQ(rep["status"], "oom") << rep.dump();
    EXPECT_EQ(r.exit_code, 128 + SIGKILL) << r.err;
}

}  // namespace

namespace {

// Issue 17, item 4: --env K=V and --env K (from the caller), repeatable, over the policy's env.
TEST_F(CorralRun, EnvOptionsSetPassAndOverrideThePolicy) {
    std::ofstream(dir_ / "env.yaml")
        << "extends: default\nenv: { clear: true, set: { PATH: /usr/bin:/bin, FROM_POLICY: policy, "
           "DROPPED: policy } }\n";
    setenv("CORRAL_TEST_PASSED", "from the caller", 1);
    unsetenv("DROPPED");
    auto r = corral({"run", "--policy", (dir_ / "env.yaml").string(), "--env", "CC=gcc", "--env",
                     "CFLAGS=-O2 -g", "-e", "FROM_POLICY=command line", "--env",
                     "CORRAL_TEST_PASSED", "--env", "DROPPED", "--env", "CC=clang", "--", "sh",
                     "-c", "echo \"$CC|$CFLAGS|$FROM_POLICY|$CORRAL_TEST_PASSED|${DROPPED-unset}\""});
    unsetenv("CORRAL_TEST_PASSED");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "clang|-O2 -g|command line|from the caller|unset\n");

    auto bad = corral({"run", "--env", "1X=2", "--", "true"});
    EXPECT_EQ(bad.exit_code, 2);
    EXPECT_NE(bad.err.find("--env `1X=2`"), std::string::npos) << bad.err;
}

// Issue 17, item 3: --cwd DIR is the job's directory with the same binding as the current one
// (a path under the sandbox's fresh /tmp and a relative path included).
TEST_F(CorralRun, CwdIsTheJobDirectoryBoundLikeTheCurrentOne) {
    make_job_dir(fs::path("checkout") / "sub");
    auto relative = corral({"run", "--cwd", "checkout/sub", "--", "sh", "-c",
                            "pwd; echo built > out.txt"});
    EXPECT_EQ(relative.exit_code, 0) << relative.err;
    EXPECT_EQ(relative.out, (dir_ / "checkout" / "sub").string() + "\n");
    EXPECT_EQ(read("checkout/sub/out.txt"), "built\n");

    run_in_ = "/";
    auto absolute = corral({"run", "--cwd", (dir_ / "checkout").string(), "--", "sh", "-c",
                            "echo x > written-inside && echo ok"});
    EXPECT_EQ(absolute.out, "ok\n") << absolute.err;
    EXPECT_TRUE(fs::exists(dir_ / "checkout" / "written-inside"));
}

TEST_F(CorralRun, RunningFromRootWorksAndSaysTheRootIsNotBound) {
    run_in_ = "/";
    auto r = corral({"run", "--", "sh", "-c", "pwd; touch /corral-must-not-exist"});
    EXPECT_EQ(r.out, "/\n") << r.err;
    EXPECT_NE(r.exit_code, 0) << "the host's / became writable";
    EXPECT_FALSE(fs::exists("/corral-must-not-exist"));
    EXPECT_EQ(r.err.find("workdir.mount"), std::string::npos) << "a key the user never set";
    EXPECT_NE(r.err.find("the job directory is `/`"), std::string::npos) << r.err;
}

// Issue 17, item 2: the sandbox user cannot write a root-owned checkout; say so before the run.
TEST_F(CorralRun, StrictInARootOwnedDirectorySaysBeforeTheRunThatItCannotWrite) {
    ASSERT_EQ(chmod(dir_.c_str(), 0755), 0);
    auto r = corral({"run", "--policy", "strict", "--", "sh", "-c", "echo x > f || echo refused"});
    EXPECT_EQ(r.out, "refused\n") << r.err;
    const size_t note = r.err.find("cannot write the job directory `" + dir_.string() + "`");
    ASSERT_NE(note, std::string::npos) << r.err;
    EXPECT_NE(r.err.find("uid 65534 inside"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("workdir: {from: copy"), std::string::npos) << "how to fix it: " << r.err;
    EXPECT_LT(note, r.err.find("Permission denied")) << "said before the run: " << r.err;

    auto writable = corral({"run", "--policy", "strict", "--cwd", "/tmp", "--", "true"});
    EXPECT_EQ(writable.err.find("cannot write"), std::string::npos) << writable.err;
}

// Issues 17.1 and 10.8: workdir.from: copy runs the job in a tmpfs of workdir.size at
// workdir.mount and copies back only workdir.outputs, owned by the checkout's owner.
TEST_F(CorralRun, CopiedWorkdirRunsInASizedTmpfsAndCopiesBackOnlyTheOutputs) {
    fs::create_directories(dir_ / "checkout");
    std::ofstream(dir_ / "checkout" / "input.txt") << "source\n";
    ASSERT_EQ(chown((dir_ / "checkout").c_str(), 4321, 4321), 0);
    std::ofstream(dir_ / "copy.yaml")
        << "extends: strict\nworkdir: { from: copy, size: 8Mi, mount: /workspace, outputs: "
           "[out.txt, results, never-made] }\n";
    auto r = corral({"run", "--policy", (dir_ / "copy.yaml").string(), "--cwd", "checkout",
                     "--report", "report.json", "--", "sh", "-c",
                     "pwd; cat input.txt; echo made > out.txt; mkdir results; echo r > "
                     "results/r.txt; echo junk > junk.txt; echo changed > input.txt; "
                     "head -c 16M /dev/zero > big || echo ENOSPC"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "/workspace\nsource\nENOSPC\n") << r.err;
    EXPECT_NE(r.err.find("No space left on device"), std::string::npos) << r.err;
    EXPECT_EQ(read("checkout/out.txt"), "made\n");
    EXPECT_EQ(read("checkout/results/r.txt"), "r\n");
    EXPECT_EQ(read("checkout/input.txt"), "source\n") << "only outputs come back";
    EXPECT_FALSE(fs::exists(dir_ / "checkout" / "junk.txt"));
    EXPECT_FALSE(fs::exists(dir_ / "checkout" / "big"));
    struct stat st {};
    ASSERT_EQ(stat((dir_ / "checkout" / "results" / "r.txt").c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, 4321u) << "outputs belong to the checkout's owner";
    auto outputs = report()["outputs"];
    EXPECT_EQ(outputs["copied"], nlohmann::json({"out.txt", "results"})) << outputs.dump();
    EXPECT_EQ(outputs["missing"], nlohmann::json({"never-made"})) << outputs.dump();
    EXPECT_NE(r.err.find("`never-made` was not created"), std::string::npos) << r.err;
}

TEST_F(CorralRun, WorkdirSizeWithABoundCwdIsRefusedNamingTheKey) {
    std::ofstream(dir_ / "sized.yaml") << "extends: default\nworkdir: { size: 64Mi }\n";
    auto r = corral({"run", "--policy", (dir_ / "sized.yaml").string(), "--report", "report.json",
                     "--", "touch", "ran"});
    EXPECT_EQ(r.exit_code, 125);
    EXPECT_NE(r.err.find("workdir.size (64Mi)"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("workdir.from: copy"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(dir_ / "ran"));
    EXPECT_EQ(report()["status"], "setup-failed");

    std::ofstream(dir_ / "outputs.yaml") << "extends: default\nworkdir: { outputs: [a] }\n";
    auto outputs = corral({"run", "--policy", (dir_ / "outputs.yaml").string(), "--", "true"});
    EXPECT_EQ(outputs.exit_code, 125);
    EXPECT_NE(outputs.err.find("outputs.yaml:2:"), std::string::npos) << outputs.err;
    EXPECT_NE(outputs.err.find("workdir.outputs"), std::string::npos) << outputs.err;
}

TEST_F(CorralRun, PolicyCheckSaysWhereTheCommandRunsAndWhatItCanWrite) {
    auto ci = corral({"policy", "check", std::string(CORRAL_SOURCE_DIR) +
                                             "/examples/policies/ci-job.yaml"});
    ASSERT_EQ(ci.exit_code, 0) << ci.err;
    EXPECT_NE(ci.out.find("is copied into a fresh tmpfs of 4Gi at /workspace and the command "
                          "runs there"),
              std::string::npos)
        << ci.out;
    auto def = corral({"policy", "check", "default"});
    EXPECT_NE(def.out.find("the command runs in the job directory (the current one, or --cwd "
                           "DIR), bound writable at its own path. It can write there and in "
                           "/run (fresh tmpfs of 16Mi), /tmp (fresh tmpfs of 256Mi); everything "
                           "else it sees is read-only"),
              std::string::npos)
        << def.out;
}

}  // namespace

namespace {

/// The first ```sh block after `heading` in the README.
std::string readme_block(const std::string& heading) {
    std::ifstream in(std::string(CORRAL_SOURCE_DIR) + "/README.md");
    std::stringstream text;
    text << in.rdbuf();
    const std::string readme = text.str();
    size_t at = readme.find("\n" + heading + "\n");
    if (at == std::string::npos) return "";
    size_t start = readme.find("```sh\n", at);
    if (start == std::string::npos) return "";
    start += 6;
    return readme.substr(start, readme.find("```", start) - start);
}

// Issue 17 "done when": the README's CI jobs command works as written, from a root-owned
// checkout, with no chown and no wrapper. It runs in a scratch copy of corral's checkout layout
// (build/supervisor, examples/policies) with HOME holding the job's checkout ~/src/hello.
TEST_F(CorralRun, ReadmeCiJobsCommandWorksAsWritten) {
    const std::string block = readme_block("## CI jobs");
    ASSERT_NE(block.find("corral run"), std::string::npos) << "no CI jobs command in the README";
    const fs::path tree = dir_ / "corral-checkout";
    const fs::path home = dir_ / "home";
    fs::create_directories(tree / "build" / "supervisor");
    fs::create_directories(tree / "examples" / "policies");
    fs::create_symlink(kCorral, tree / "build" / "supervisor" / "corral");
    fs::copy_file(std::string(CORRAL_SOURCE_DIR) + "/examples/policies/ci-job.yaml",
                  tree / "examples" / "policies" / "ci-job.yaml");
    const fs::path project = home / "src" / "hello";
    fs::create_directories(project);
    std::ofstream(project / "configure") << "#!/bin/sh\necho \"CC=${CC:-cc}\" > config.mk\n";
    fs::permissions(project / "configure", fs::perms(0755));
    std::ofstream(project / "Makefile")
        << "include config.mk\nhello: hello.c\n\t$(CC) -o hello hello.c\n"
           "check: hello\n\t./hello | grep -q '^hello$$' && echo PASS\n";
    std::ofstream(project / "hello.c")
        << "#include <stdio.h>\nint main(void) { puts(\"hello\"); return 0; }\n";
    for (const auto& p : {dir_, home, home / "src", project}) chmod(p.c_str(), 0755);

    run_in_ = tree;
    setenv("CORRAL_TEST_HOME", home.c_str(), 1);
    auto r = corral({"__sh", block});
    unsetenv("CORRAL_TEST_HOME");
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("PASS"), std::string::npos) << r.out << r.err;
    std::ifstream in(tree / "report.json");
    auto rep = nlohmann::json::parse(in);
    EXPECT_EQ(rep["status"], "exited") << rep.dump();
    EXPECT_EQ(rep["policy"], "ci-job");
    EXPECT_FALSE(fs::exists(project / "hello")) << "the checkout was changed";
    EXPECT_FALSE(fs::exists(project / "config.mk")) << "the checkout was changed";
}

}  // namespace

namespace {

// Issue 17, item 9: limits.accounting measures memory and pids peaks without a limit, also on
// hybrid hosts, where only v1 cgroups have them.
TEST_F(CorralRun, AccountingReportsPeaksWithoutALimit) {
    std::ofstream(dir_ / "acct.yaml") << "extends: default\nlimits: { accounting: true }\n";
    auto r = corral({"run", "--policy", (dir_ / "acct.yaml").string(), "--report", "report.json",
                     "--", "sh", "-c", probe() + " alloc 16"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto usage = report()["usage"];
    ASSERT_TRUE(usage["memoryPeakBytes"].is_number()) << usage.dump();
    EXPECT_GE(usage["memoryPeakBytes"].get<uint64_t>(), 16u << 20) << usage.dump();
    ASSERT_TRUE(usage["pidsPeak"].is_number()) << usage.dump();
    EXPECT_GE(usage["pidsPeak"].get<uint64_t>(), 2u) << usage.dump();
}

// Issue 17, item 9: io bytes come from io.stat wherever cgroup2 has the io controller (pure v2:
// corral enables it for accounting, as memory and pids), and stay null where it has not (hybrid:
// v1 blkio's byte counters stay at 0 without a throttle rule, and a 0 would be a lie). The job
// writes and reads 8 MiB with O_DIRECT on a loop device the test makes, so the bytes really
// reach the block layer (a tmpfs or 9p write never would).
TEST_F(CorralRun, IoBytesAreCountedWhereTheHostHasThem) {
    {
        std::ofstream img(dir_ / "disk.img", std::ios::binary);
        img.seekp((32 << 20) - 1);
        img.put('\0');
    }
    // Where the loop driver is a module not yet loaded (the pure-v2 VM: its modules.dep does not
    // list it, so modprobe finds nothing and insmod takes the file), load it first.
    const std::string sbin = "PATH=$PATH:/usr/sbin:/sbin ";
    if (access("/dev/loop-control", F_OK) != 0)
        (void)!system((sbin + "sh -c '(modprobe loop || insmod /lib/modules/$(uname -r)/kernel/"
                              "drivers/block/loop.ko) >/dev/null 2>&1'")
                          .c_str());
    FILE* losetup = popen(
        (sbin + "losetup --find --show " + (dir_ / "disk.img").string() + " 2>&1").c_str(), "r");
    ASSERT_NE(losetup, nullptr);
    char line[256] = {};
    std::string device = fgets(line, sizeof line, losetup) ? line : "";
    const int rc = pclose(losetup);
    if (!device.empty() && device.back() == '\n') device.pop_back();
    if (rc != 0 || device.rfind("/dev/loop", 0) != 0)
        GTEST_SKIP() << "no loop device on this host: " << device;
    // The loop device goes whatever happens below.
    struct Detach {
        std::string device;
        ~Detach() { (void)!system(("PATH=$PATH:/usr/sbin:/sbin losetup -d " + device).c_str()); }
    } detach{device};

    auto r = corral({"run", "--policy", "none", "--report", "report.json", "--", "sh", "-c",
                     "dd if=/dev/zero of=" + device + " bs=1M count=8 oflag=direct status=none && "
                     "dd if=" + device + " of=/dev/null bs=1M count=8 iflag=direct status=none"});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    auto usage = report()["usage"];

    std::ifstream controllers_file(v2_own_ + "/cgroup.controllers");
    std::string controllers((std::istreambuf_iterator<char>(controllers_file)), {});
    if ((" " + controllers + " ").find(" io") != std::string::npos) {
        ASSERT_TRUE(usage["ioWriteBytes"].is_number()) << usage.dump();
        ASSERT_TRUE(usage["ioReadBytes"].is_number()) << usage.dump();
        EXPECT_GE(usage["ioWriteBytes"].get<uint64_t>(), 8u << 20) << usage.dump();
        EXPECT_GE(usage["ioReadBytes"].get<uint64_t>(), 8u << 20) << usage.dump();
    } else {
        EXPECT_TRUE(usage["ioWriteBytes"].is_null()) << "no io controller here: " << usage.dump();
        EXPECT_TRUE(usage["ioReadBytes"].is_null()) << "no io controller here: " << usage.dump();
    }
}

}  // namespace

namespace {

// Issue 17, item 6: refused syscalls are reported. The syscall probe makes each call N times
// and says what it got back; the report must count exactly those calls, by name, and every one
// of them must still get the errno the policy gives (docs/SECCOMP.md "Refusals in reports").
class CorralRunRefusals : public CorralRun {
  protected:
    void SetUp() override {
        CorralRun::SetUp();
        if (IsSkipped()) return;
        fs::copy_file(CORRAL_SYSCALL_PROBE, dir_ / "sprobe");
    }
    std::string sprobe() const { return (dir_ / "sprobe").string(); }
    /// "<label> <answer>" lines of the probe as a map.
    static std::map<std::string, std::string> answers(const std::string& out) {
        std::map<std::string, std::string> found;
        std::istringstream lines(out);
        std::string label, answer;
        while (lines >> label >> answer) found[label] = answer;
        return found;
    }
    using Counts = std::map<std::string, uint64_t>;
};

TEST_F(CorralRunRefusals, ReportCountsRefusalsByNameAndEachGetsThePolicysErrno) {
    auto r = corral({"run", "--report", "report.json", "--", "sh", "-c",
                     sprobe() + " repeat 3 ptrace; " + sprobe() + " repeat 1 mount; " + sprobe() +
                         " repeat 2 keyctl"});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    auto a = answers(r.out);
    for (const char* name : {"ptrace", "mount", "keyctl"}) {
        EXPECT_EQ(a[name], "EPERM") << name << ": " << r.out;
        EXPECT_EQ(a[std::string(name) + "-all-same"], "yes") << name << ": " << r.out;
    }
    auto seccomp = report()["seccomp"];
    ASSERT_TRUE(seccomp.is_object()) << report().dump();
    EXPECT_EQ(seccomp["counted"], true) << seccomp.dump();
    EXPECT_EQ(seccomp["refused"].get<Counts>(), (Counts{{"keyctl", 2}, {"mount", 1}, {"ptrace", 3}}))
        << seccomp.dump();
    EXPECT_EQ(seccomp["refusedTotal"], 6) << seccomp.dump();
    EXPECT_EQ(seccomp["loggedTotal"], 0) << seccomp.dump();
}

// strict: an unlisted call answers ENOSYS (programs fall back) and is counted; a deliberately
// denied one gets the policy's own errno, here EXDEV.
TEST_F(CorralRunRefusals, StrictCountsUnlistedCallsWithEnosysAndKeepsTheConfiguredErrno) {
    std::ofstream(dir_ / "exdev.yaml") << "extends: strict\nseccomp: { errno: EXDEV }\n";
    ASSERT_EQ(chmod(dir_.c_str(), 0755), 0);  // strict's nobody enters the job directory
    auto r = corral({"run", "--policy", (dir_ / "exdev.yaml").string(), "--report", "report.json",
                     "--", sprobe(), "repeat", "2", "io_setup", "mount"});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    auto a = answers(r.out);
    EXPECT_EQ(a["io_setup"], "ENOSYS") << r.out;
    EXPECT_EQ(a["mount"], "EXDEV") << r.out;
    auto seccomp = report()["seccomp"];
    EXPECT_EQ(seccomp["refused"].get<Counts>(), (Counts{{"io_setup", 2}, {"mount", 2}}))
        << seccomp.dump();
}

// action: log allows the call (it runs: PTRACE_PEEKDATA of pid 0 answers ESRCH) and counts it
// apart from the refusals; the guard's setuid refusal stays a refusal.
TEST_F(CorralRunRefusals, LoggedCallsRunAndAreCountedApart) {
    std::ofstream(dir_ / "log.yaml") << "extends: default\nseccomp: { action: log }\n";
    auto r = corral({"run", "--policy", (dir_ / "log.yaml").string(), "--report", "report.json",
                     "--", "sh", "-c", sprobe() + " repeat 4 ptrace; " + sprobe() + " setid ."});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    auto a = answers(r.out);
    EXPECT_EQ(a["ptrace"], "ESRCH") << r.out;
    EXPECT_EQ(a["setid-files"], "0") << r.out;
    auto seccomp = report()["seccomp"];
    EXPECT_EQ(seccomp["logged"].get<Counts>(), (Counts{{"ptrace", 4}})) << seccomp.dump();
    EXPECT_GT(seccomp["refusedTotal"].get<uint64_t>(), 0u) << seccomp.dump();
    EXPECT_GT(seccomp["refused"].value("chmod", 0u), 0u) << seccomp.dump();
}

TEST_F(CorralRunRefusals, NoFilterMeansNoSeccompReport) {
    auto r = corral({"run", "--policy", "none", "--report", "report.json", "--", "true"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(report()["seccomp"].is_null()) << report().dump();
}

// A program that installs its own filter inside corral keeps working: its rules apply, and
// corral's refusals are still refused and counted. Its own listener is refused (EBUSY: one
// listener per chain of filters), which is also why it cannot answer its own refused calls.
TEST_F(CorralRunRefusals, ProgramsWithTheirOwnFiltersStillWork) {
    auto r = corral({"run", "--report", "report.json", "--", "sh", "-c",
                     sprobe() + " nested-filter ptrace; " + sprobe() + " own-listener; true"});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    auto a = answers(r.out);
    EXPECT_EQ(a["install"], "ok") << r.out;
    EXPECT_EQ(a["getppid"], "EXDEV") << "the program's own rule" << r.out;
    EXPECT_EQ(a["ptrace"], "EPERM") << r.out;
    EXPECT_EQ(a["getpid"], "ok") << r.out;
    EXPECT_EQ(a["listener-fds"], "0") << "the sandbox holds a listener: " << r.out;
    EXPECT_EQ(a["new-listener"], "EBUSY") << r.out;
    EXPECT_EQ(report()["seccomp"]["refused"].get<Counts>(), (Counts{{"ptrace", 1}}))
        << report().dump();
}

}  // namespace
