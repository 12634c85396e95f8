// corrald's launch zygote (isolation/launch_zygote.hpp, issue 18) in a real daemon: one small
// child of corrald's, in corrald's cgroup, gone with it, and holding nothing of any session.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/directory_listing.hpp"
#include "base/file_io.hpp"
#include "isolation/launch_zygote.hpp"
#include "support/corrald_process.hpp"
#include "support/http_client.hpp"
#include "support/test_helpers.hpp"

namespace corral {
namespace {

using namespace std::chrono_literals;
using test_support::memory_holds;
using test_support::proc_text;
using testing::children_named;
using testing::corrald_can_run;
using testing::CorraldProcess;
using testing::HttpClient;
using testing::HttpResponse;

/// The zygote of `daemon` (its one corrald-launch child), -1 when not exactly one.
pid_t zygote_of(pid_t daemon) {
    auto found = children_named(daemon, "corrald-launch");
    EXPECT_EQ(found.size(), 1u) << "corrald-launch children of " << daemon;
    return found.size() == 1 ? found[0] : -1;
}

/// Whether `pid` runs corrald's carried program (an executed zygote) rather than a fork of corrald.
bool runs_carried_program(pid_t pid) {
    std::error_code error;
    const auto exe = std::filesystem::read_symlink("/proc/" + std::to_string(pid) + "/exe", error);
    return exe.string().rfind("/memfd:corrald-launch", 0) == 0;
}

/// Waits until `pid` no longer runs (gone, or a zombie nobody reaped yet); false after 10 s.
bool wait_until_dead(pid_t pid) {
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (std::chrono::steady_clock::now() < deadline) {
        const std::string stat = proc_text(pid, "stat");
        if (stat.empty() || stat.find(") Z ") != std::string::npos) return true;
        std::this_thread::sleep_for(20ms);
    }
    return false;
}

/// A `default` command run in session `s` (its path); whether it ran and printed "ran".
void expect_runs(HttpClient& c, const std::string& s) {
    auto ran = c.post(s + "/run", {{"command", "echo ran"}});
    ASSERT_EQ(ran.status, 200u) << ran.body;
    EXPECT_EQ(ran.json()["exitCode"], 0) << ran.body;
    EXPECT_EQ(ran.json()["stdout"], "ran\n") << ran.body;
}

class DaemonZygote : public ::testing::Test {
  protected:
    void SetUp() override {
        std::string why;
        if (!corrald_can_run(why)) GTEST_SKIP() << why;
    }
};

// One zygote per corrald, in corrald's own cgroup (on a unified host corrald moves itself into
// <instance>/supervisor, and the zygote must not stay behind in a cgroup that has to be empty),
// with a table of stdio and its socket; it dies with corrald, even with a kill -9.
TEST_F(DaemonZygote, OneSmallChildInCorraldsCgroupThatDiesWithIt) {
    CorraldProcess daemon;
    ASSERT_TRUE(daemon.ready()) << daemon.log();
    const pid_t zygote = zygote_of(daemon.pid());
    ASSERT_GT(zygote, 0) << daemon.log();
    EXPECT_EQ(proc_text(zygote, "cgroup"), proc_text(daemon.pid(), "cgroup"));
    size_t fds = 0;
    for ([[maybe_unused]] const auto& entry :
         std::filesystem::directory_iterator("/proc/" + std::to_string(zygote) + "/fd"))
        ++fds;
    EXPECT_LE(fds, 4u) << "stdio and its socket";
    // A `default` run goes through it (the command forks from the zygote, not from corrald).
    HttpClient c = daemon.client();
    auto made = c.post("/v1/sessions", {{"policy", "default"}});
    ASSERT_EQ(made.status, 201u) << made.body;
    const std::string s = "/v1/sessions/" + made.json()["id"].get<std::string>();
    auto ran = c.post(s + "/run", {{"command", "echo $PPID"}});
    ASSERT_EQ(ran.status, 200u) << ran.body;
    EXPECT_EQ(ran.json()["exitCode"], 0) << ran.body;
    EXPECT_EQ(zygote_of(daemon.pid()), zygote) << "the zygote was replaced";

    daemon.kill_hard();
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    bool gone = false;
    while (!gone && std::chrono::steady_clock::now() < deadline) {
        const std::string stat = proc_text(zygote, "stat");
        // Gone, or a zombie its new parent has not reaped yet: either way it no longer runs.
        gone = stat.empty() || stat.find(") Z ") != std::string::npos;
        if (!gone) std::this_thread::sleep_for(20ms);
    }
    EXPECT_TRUE(gone) << "the zygote outlived corrald: " << proc_text(zygote, "status");
    ASSERT_TRUE(daemon.start()) << daemon.log();
}

// GET /v1/health says what starts corrald's forked launches and holders: an operator who confines
// corrald with an LSM must know which program its children run (stop 33's review: an AppArmor
// `ux` rule on the memfd would leave an executed zygote unconfined, and falling back to a fork
// of corrald was only a log line). And it says it truthfully: once the zygote is dead, the next
// launch starts a new executed one (stop 34), and health says "executed" again; a forked one is
// never restarted (launch_zygote.hpp), launches fork from corrald's worker, and health says none.
TEST_F(DaemonZygote, HealthSaysWhatStartsLaunchesAndWhenTheZygoteIsGone) {
    CorraldProcess daemon;
    ASSERT_TRUE(daemon.ready()) << daemon.log();
    const pid_t zygote = zygote_of(daemon.pid());
    ASSERT_GT(zygote, 0) << daemon.log();
    const bool executed = runs_carried_program(zygote);
    HttpClient c = daemon.client();
    auto health = c.get("/v1/health");
    ASSERT_EQ(health.status, 200u) << health.body;
    EXPECT_EQ(health.json()["layers"]["launchZygote"], executed ? "executed" : "forked")
        << health.body;

    // Killed by hand (the daemon is this test's): the next launch finds it gone and starts a new
    // one (executed) or forks from corrald's worker (forked); the command runs either way.
    ASSERT_EQ(::kill(zygote, SIGKILL), 0);
    ASSERT_TRUE(wait_until_dead(zygote));
    auto made = c.post("/v1/sessions", {{"policy", "default"}});
    ASSERT_EQ(made.status, 201u) << made.body;
    const std::string s = "/v1/sessions/" + made.json()["id"].get<std::string>();
    ASSERT_NO_FATAL_FAILURE(expect_runs(c, s));
    health = c.get("/v1/health");
    ASSERT_EQ(health.status, 200u) << health.body;
    if (executed) {
        EXPECT_EQ(health.json()["layers"]["launchZygote"], "executed") << health.body;
        const pid_t restarted = zygote_of(daemon.pid());
        EXPECT_GT(restarted, 0) << daemon.log();
        EXPECT_NE(restarted, zygote);
        EXPECT_TRUE(runs_carried_program(restarted)) << daemon.log();
    } else {
        EXPECT_EQ(health.json()["layers"]["launchZygote"], "none") << health.body;
        EXPECT_TRUE(children_named(daemon.pid(), "corrald-launch").empty())
            << "a fork of corrald was started again, with the sessions' tokens";
    }
    EXPECT_EQ(c.del(s).status, 200u);
}

// A zygote that died (the OOM killer, an operator's kill -9, a crash) left every later launch and
// holder to fork from corrald's worker: a copy of its whole address space, growing with its
// sessions (issue 18). An executed one is started again at the next launch, which it serves: the
// same program from the same memfd, corrald's only corrald-launch child (the dead one reaped,
// no zombie), in corrald's own cgroup (forked by the worker's thread, which moved with corrald
// into <instance>/supervisor on a unified host), with stdio and its socket. And, as the first
// one (issue 10.1, CVE-2019-5736, HoldsNoSessionsTokenBeforeOrAfterARestart), it holds no
// token of the sessions that existed when it was started: it is the carried program, not a fork
// of corrald, which by now holds them all.
TEST_F(DaemonZygote, AKilledZygoteIsRestartedCleanInCorraldsCgroup) {
    CorraldProcess daemon;
    ASSERT_TRUE(daemon.ready()) << daemon.log();
    const pid_t zygote = zygote_of(daemon.pid());
    ASSERT_GT(zygote, 0) << daemon.log();
    if (!runs_carried_program(zygote))
        GTEST_SKIP() << "the zygote is a fork of corrald here (never restarted): " << daemon.log();
    HttpClient c = daemon.client();
    auto made = c.post("/v1/sessions", {{"policy", "default"}});
    ASSERT_EQ(made.status, 201u) << made.body;
    const std::string token = made.json()["token"];
    const std::string id = made.json()["id"];
    ASSERT_GE(token.size(), 32u);
    const std::string s = "/v1/sessions/" + id;
    ASSERT_NO_FATAL_FAILURE(expect_runs(c, s));

    ASSERT_EQ(::kill(zygote, SIGKILL), 0);
    ASSERT_TRUE(wait_until_dead(zygote));
    ASSERT_NO_FATAL_FAILURE(expect_runs(c, s));
    const auto zygotes = children_named(daemon.pid(), "corrald-launch");
    ASSERT_EQ(zygotes.size(), 1u) << "corrald-launch children (the dead one reaped?)\n"
                                  << daemon.log();
    const pid_t restarted = zygotes[0];
    EXPECT_NE(restarted, zygote);
    EXPECT_FALSE(std::filesystem::exists("/proc/" + std::to_string(zygote)))
        << "the dead zygote was not reaped: " << proc_text(zygote, "status");
    EXPECT_TRUE(runs_carried_program(restarted));
    EXPECT_EQ(proc_text(restarted, "cgroup"), proc_text(daemon.pid(), "cgroup"));
    EXPECT_EQ(proc_text(restarted, "environ"), "");
    // At rest: the zygote closes its copies of what it attached to an answer (the launch's
    // report channel and pidfd) only after sending it, so right after the run they may still be
    // there (seen under `stress-ng --cpu 3`, 2 runs in 40).
    auto table_size = [restarted] {
        size_t fds = 0;
        for ([[maybe_unused]] const auto& entry :
             std::filesystem::directory_iterator("/proc/" + std::to_string(restarted) + "/fd"))
            ++fds;
        return fds;
    };
    size_t fds = table_size();
    for (int i = 0; i < 500 && fds > 4; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        fds = table_size();
    }
    EXPECT_LE(fds, 4u) << "stdio and its socket";
    auto health = c.get("/v1/health");
    ASSERT_EQ(health.status, 200u) << health.body;
    EXPECT_EQ(health.json()["layers"]["launchZygote"], "executed") << health.body;
    // The scan works: corrald itself holds the session's id.
    EXPECT_EQ(memory_holds(daemon.pid(), id), std::optional<bool>(true));
    EXPECT_EQ(memory_holds(restarted, token), std::optional<bool>(false));
    EXPECT_EQ(memory_holds(restarted, id), std::optional<bool>(false));
    // And it serves the session's next holder too.
    auto other = c.post("/v1/sessions", {{"policy", "default"}});
    ASSERT_EQ(other.status, 201u) << other.body;
    EXPECT_EQ(zygote_of(daemon.pid()), restarted);
    EXPECT_EQ(c.del(s).status, 200u);
}

// A zygote killed each time it starts (an LSM, a watchdog) must not make every launch pay a
// fork, an execve and a handshake: a second death within LaunchZygote::kRestartInterval of the
// last restart leaves launches on corrald's worker (health says so) until the interval is over,
// when the next launch starts one again. Launches succeed throughout.
TEST_F(DaemonZygote, AZygoteThatKeepsDyingIsRestartedAtMostOncePerInterval) {
    CorraldProcess daemon;
    ASSERT_TRUE(daemon.ready()) << daemon.log();
    const pid_t zygote = zygote_of(daemon.pid());
    ASSERT_GT(zygote, 0) << daemon.log();
    if (!runs_carried_program(zygote))
        GTEST_SKIP() << "the zygote is a fork of corrald here (never restarted): " << daemon.log();
    HttpClient c = daemon.client();
    auto made = c.post("/v1/sessions", {{"policy", "default"}});
    ASSERT_EQ(made.status, 201u) << made.body;
    const std::string s = "/v1/sessions/" + made.json()["id"].get<std::string>();

    ASSERT_EQ(::kill(zygote, SIGKILL), 0);
    ASSERT_TRUE(wait_until_dead(zygote));
    const auto restarted_at = std::chrono::steady_clock::now();
    ASSERT_NO_FATAL_FAILURE(expect_runs(c, s));
    const pid_t second = zygote_of(daemon.pid());
    ASSERT_GT(second, 0) << "not restarted the first time: " << daemon.log();
    ASSERT_NE(second, zygote);

    ASSERT_EQ(::kill(second, SIGKILL), 0);
    ASSERT_TRUE(wait_until_dead(second));
    ASSERT_LT(std::chrono::steady_clock::now() - restarted_at, LaunchZygote::kRestartInterval / 2)
        << "too slow to be within the interval";
    for (int i = 0; i < 3; ++i) ASSERT_NO_FATAL_FAILURE(expect_runs(c, s));
    EXPECT_TRUE(children_named(daemon.pid(), "corrald-launch").empty())
        << "restarted again within the interval";
    auto health = c.get("/v1/health");
    ASSERT_EQ(health.status, 200u) << health.body;
    EXPECT_EQ(health.json()["layers"]["launchZygote"], "none") << health.body;

    std::this_thread::sleep_until(restarted_at + LaunchZygote::kRestartInterval + 1s);
    ASSERT_NO_FATAL_FAILURE(expect_runs(c, s));
    const pid_t third = zygote_of(daemon.pid());
    EXPECT_GT(third, 0) << "not restarted once the interval was over: " << daemon.log();
    health = c.get("/v1/health");
    ASSERT_EQ(health.status, 200u) << health.body;
    EXPECT_EQ(health.json()["layers"]["launchZygote"], "executed") << health.body;
    EXPECT_EQ(c.del(s).status, 200u);
}

/// The holder of session `id` (the one process in its holder cgroup), -1 when not exactly one.
pid_t holder_of(const CorraldProcess& daemon, const std::string& id) {
    std::ifstream procs(daemon.instance_cgroup() + "/sessions/" + id + "/holder/cgroup.procs");
    std::vector<pid_t> pids;
    for (pid_t pid; procs >> pid;) pids.push_back(pid);
    return pids.size() == 1 ? pids[0] : -1;
}

size_t line_count(const std::string& text) {
    return static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
}

// Issue 18: every command of a `default` session and every holder is a clone of the zygote, and a
// clone copies the mappings of what it clones. corrald's zygote is the small program corrald
// carries, executed from a sealed memfd: a handful of mappings (corrald has over a hundred, with
// its shared libraries) and none of corrald's environment; the session's holder, cloned there,
// is as small and keeps corrald's name.
TEST_F(DaemonZygote, RunsTheProgramCorraldCarriesNotACopyOfCorrald) {
    CorraldProcess daemon;
    ASSERT_TRUE(daemon.ready()) << daemon.log();
    const pid_t zygote = zygote_of(daemon.pid());
    ASSERT_GT(zygote, 0) << daemon.log();
    std::error_code error;
    const auto exe =
        std::filesystem::read_symlink("/proc/" + std::to_string(zygote) + "/exe", error);
    EXPECT_EQ(exe.string().rfind("/memfd:corrald-launch", 0), 0u) << exe << "\n" << daemon.log();
    const std::string maps = proc_text(zygote, "maps");
    EXPECT_LT(line_count(maps), 30u) << maps;
    EXPECT_LT(line_count(maps), line_count(proc_text(daemon.pid(), "maps")) / 2);
    EXPECT_EQ(proc_text(zygote, "environ"), "");
    HttpClient c = daemon.client();
    auto made = c.post("/v1/sessions", {{"policy", "default"}});
    ASSERT_EQ(made.status, 201u) << made.body;
    const std::string id = made.json()["id"].get<std::string>();
    auto ran = c.post("/v1/sessions/" + id + "/run", {{"command", "cat /proc/1/comm"}});
    ASSERT_EQ(ran.status, 200u) << ran.body;
    EXPECT_EQ(ran.json()["exitCode"], 0) << ran.body;
    EXPECT_EQ(ran.json()["stdout"], proc_text(daemon.pid(), "comm")) << "the holder's name";
    const pid_t holder = holder_of(daemon, id);
    ASSERT_GT(holder, 0) << daemon.log();
    EXPECT_LT(line_count(proc_text(holder, "maps")), 30u) << proc_text(holder, "maps");
}

/// The "SigBlk/SigIgn/SigCgt" lines of a /proc/<pid>/status text.
std::string signal_lines(const std::string& status) {
    std::istringstream lines(status);
    std::string out;
    for (std::string line; std::getline(lines, line);)
        if (line.rfind("SigBlk:", 0) == 0 || line.rfind("SigIgn:", 0) == 0 ||
            line.rfind("SigCgt:", 0) == 0)
            out += line + "\n";
    return out;
}

// A daemon's ignored and handled signals must not reach what it starts (an ignored SIGPIPE
// survives execve: CPython's bpo-1652, and why systemd resets every disposition before exec). The
// zygote sets them all to the default once, so its children skip that step (issue 18): what a
// command starts with is the same as when every child reset them itself.
TEST_F(DaemonZygote, ACommandStartsWithEverySignalDispositionAtTheDefault) {
    // Started as `nohup corrald` would be: SIGHUP ignored, which corrald inherits through execve.
    struct IgnoreHangupWhileStarting {
        struct sigaction before {};
        IgnoreHangupWhileStarting() {
            struct sigaction ignore {};
            ignore.sa_handler = SIG_IGN;
            ::sigaction(SIGHUP, &ignore, &before);
        }
        ~IgnoreHangupWhileStarting() { ::sigaction(SIGHUP, &before, nullptr); }
    };
    std::optional<IgnoreHangupWhileStarting> nohup;
    nohup.emplace();
    CorraldProcess daemon;
    ASSERT_TRUE(daemon.ready()) << daemon.log();
    nohup.reset();
    const pid_t zygote = zygote_of(daemon.pid());
    ASSERT_GT(zygote, 0) << daemon.log();
    const std::string clean =
        "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\nSigCgt:\t0000000000000000\n";
    // Meaningful only because corrald ignores a signal (SIGHUP) and handles others itself.
    const std::string daemon_signals = signal_lines(proc_text(daemon.pid(), "status"));
    ASSERT_EQ(daemon_signals.find("SigIgn:\t0000000000000000"), std::string::npos)
        << "corrald ignores no signal: this test would show nothing";
    ASSERT_EQ(daemon_signals.find("SigCgt:\t0000000000000000"), std::string::npos)
        << "corrald handles no signal: this test would show nothing";
    // The zygote itself keeps every signal blocked (as the worker's thread did).
    EXPECT_NE(signal_lines(proc_text(zygote, "status"))
                  .find("SigIgn:\t0000000000000000\nSigCgt:\t0000000000000000\n"),
              std::string::npos)
        << proc_text(zygote, "status");
    HttpClient c = daemon.client();
    for (const char* policy : {"default", "strict", "none"}) {
        SCOPED_TRACE(policy);
        auto made = c.post("/v1/sessions", {{"policy", policy}});
        ASSERT_EQ(made.status, 201u) << made.body;
        const std::string s = "/v1/sessions/" + made.json()["id"].get<std::string>();
        // cat: it handles no signal itself (grep, for one, handles SIGSEGV).
        auto ran = c.post(s + "/run", {{"argv", {"cat", "/proc/self/status"}}});
        ASSERT_EQ(ran.status, 200u) << ran.body;
        EXPECT_EQ(signal_lines(ran.json()["stdout"]), clean) << ran.body;
        EXPECT_EQ(c.del(s).status, 200u);
    }
}

// Before the zygote every launch was a fork of corrald: a copy of every session's token until
// its execve (issue 10.1, CVE-2019-5736: a sandboxed process reaching the memory of the runtime
// that started it). The zygote is forked before corrald knows any session, also after a restart
// that re-adopts sessions from the journal, so neither it nor what it starts holds a token.
TEST_F(DaemonZygote, HoldsNoSessionsTokenBeforeOrAfterARestart) {
    CorraldProcess daemon;
    ASSERT_TRUE(daemon.ready()) << daemon.log();
    HttpClient c = daemon.client();
    auto made = c.post("/v1/sessions", {{"policy", "default"}});
    ASSERT_EQ(made.status, 201u) << made.body;
    const std::string token = made.json()["token"];
    const std::string id = made.json()["id"];
    ASSERT_GE(token.size(), 32u);
    auto ran = c.post("/v1/sessions/" + id + "/run", {{"command", "true"}});
    ASSERT_EQ(ran.status, 200u) << ran.body;
    auto spawned = c.post("/v1/sessions/" + id + "/processes", {{"command", "sleep 600"}});
    ASSERT_EQ(spawned.status, 201u) << spawned.body;

    for (int start = 0; start < 2; ++start) {
        SCOPED_TRACE(start == 0 ? "first start" : "after a restart that re-adopted the session");
        const pid_t zygote = zygote_of(daemon.pid());
        ASSERT_GT(zygote, 0);
        // The scan works: corrald itself holds the session's id.
        EXPECT_EQ(memory_holds(daemon.pid(), id), std::optional<bool>(true));
        EXPECT_EQ(memory_holds(zygote, token), std::optional<bool>(false));
        EXPECT_EQ(memory_holds(zygote, id), std::optional<bool>(false));
        if (start == 0) {
            daemon.kill_hard();
            ASSERT_TRUE(daemon.start()) << daemon.log();
            c = daemon.client();
            auto listed = c.get("/v1/sessions/" + id);
            ASSERT_EQ(listed.status, 200u) << "not re-adopted: " << listed.body << daemon.log();
            auto again = c.post("/v1/sessions/" + id + "/run", {{"command", "true"}});
            ASSERT_EQ(again.status, 200u) << again.body;
        }
    }
}

/// Freezes a cgroup v2 directory (cgroup.freeze) while it lives: what is cloned into a cgroup
/// below it is frozen at birth. Thawed however the test ends.
class FrozenCgroup {
  public:
    explicit FrozenCgroup(std::string dir) : dir_(std::move(dir)) { frozen_ = set("1"); }
    ~FrozenCgroup() { thaw(); }
    bool frozen() const { return frozen_; }
    void thaw() {
        if (frozen_) frozen_ = !set("0");
    }

  private:
    bool set(const char* value) {
        std::ofstream out(dir_ + "/cgroup.freeze");
        out << value;
        out.flush();
        return static_cast<bool>(out);
    }
    std::string dir_;
    bool frozen_ = false;
};

/// A session below `sessions` not among `known` whose holder cgroup has one process: that
/// process; -1 when there is none (yet).
pid_t new_holder(const std::string& sessions, const std::vector<std::string>& known,
                 std::string& id) {
    for (const auto& name : subdirectory_names(sessions)) {
        if (std::find(known.begin(), known.end(), name) != known.end()) continue;
        std::ifstream procs(sessions + "/" + name + "/holder/cgroup.procs");
        std::vector<pid_t> pids;
        for (pid_t pid; procs >> pid;) pids.push_back(pid);
        if (pids.size() == 1) {
            id = name;
            return pids[0];
        }
    }
    return -1;
}

// Issue 18, CVE-2019-5736 (a sandboxed process reaching the runtime's memory) and warm-pool
// reuse bugs (one tenant's secrets left in what the next one is given): a session's namespace
// holder, its sandbox's PID 1 for the session's life, was a copy of corrald with every session's
// token (its heap copy dropped only once set up). Cloned in the zygote, a new session's holder
// holds none of the sessions made before it: seen as it is born (frozen there, before it runs a
// step) and once it has settled.
TEST_F(DaemonZygote, ANewSessionsHolderHoldsNoEarlierSessionsToken) {
    CorraldProcess daemon;
    ASSERT_TRUE(daemon.ready()) << daemon.log();
    HttpClient c = daemon.client();
    std::vector<std::string> tokens, ids;
    // And what their launches went through the zygote with: an environment value short enough
    // for a string to hold it inline (a copy of it can outlive the request's wipe), and a long one.
    std::vector<std::string> secrets;
    for (int i = 0; i < 3; ++i) {
        auto made = c.post("/v1/sessions", {{"policy", "default"}});
        ASSERT_EQ(made.status, 201u) << made.body;
        tokens.push_back(made.json()["token"]);
        ids.push_back(made.json()["id"]);
        ASSERT_GE(tokens.back().size(), 32u);
        const std::string suffix = tokens.back().substr(tokens.back().size() - 8);
        secrets.push_back("pw" + suffix);
        secrets.push_back("long-secret-" + tokens.back().substr(0, 24));
        auto ran = c.post("/v1/sessions/" + ids.back() + "/run",
                          {{"command", "true"},
                           {"env", {{"SHORT", secrets[secrets.size() - 2]},
                                    {"LONG", secrets.back()}}}});
        ASSERT_EQ(ran.status, 200u) << ran.body;
    }
    // The scan works: corrald holds them.
    for (const auto& token : tokens)
        EXPECT_EQ(memory_holds(daemon.pid(), token), std::optional<bool>(true));

    const std::string sessions = daemon.instance_cgroup() + "/sessions";
    FrozenCgroup frozen(sessions);
    if (!frozen.frozen()) GTEST_SKIP() << "cannot freeze " << sessions << " (cgroup.freeze)";
    HttpResponse made;
    std::thread create([&] {
        HttpClient other = daemon.client();
        made = other.post("/v1/sessions", {{"policy", "default"}});
    });
    std::string id;
    pid_t holder = -1;
    for (int i = 0; i < 250 && holder < 0; ++i) {  // corrald gives a frozen holder 10 s
        holder = new_holder(sessions, ids, id);
        if (holder < 0) std::this_thread::sleep_for(20ms);
    }
    if (holder > 0) {
        SCOPED_TRACE("as born");
        for (size_t i = 0; i < tokens.size(); ++i)
            EXPECT_EQ(memory_holds(holder, tokens[i]), std::optional<bool>(false))
                << "session " << ids[i] << "'s token is in the new session's holder";
        for (const auto& secret : secrets)
            EXPECT_EQ(memory_holds(holder, secret), std::optional<bool>(false))
                << "an earlier launch's environment (" << secret << ") is in the new holder";
    }
    frozen.thaw();
    create.join();
    ASSERT_GT(holder, 0) << "no holder appeared for the new session";
    ASSERT_EQ(made.status, 201u) << made.body;
    EXPECT_EQ(made.json()["id"], id);
    // It lets go of what it inherited (and its heap copy) just after its ready report.
    for (int i = 0; i < 200; ++i) {
        size_t fds = 0;
        for ([[maybe_unused]] const auto& entry :
             std::filesystem::directory_iterator("/proc/" + std::to_string(holder) + "/fd"))
            ++fds;
        if (fds <= 7) break;
        std::this_thread::sleep_for(20ms);
    }
    SCOPED_TRACE("settled");
    EXPECT_EQ(proc_text(holder, "comm"), proc_text(daemon.pid(), "comm"))
        << "named as corrald's holders are, not as its zygote";
    for (size_t i = 0; i < tokens.size(); ++i)
        EXPECT_EQ(memory_holds(holder, tokens[i]), std::optional<bool>(false))
            << "session " << ids[i] << "'s token is in the new session's holder";
    for (const auto& secret : secrets)
        EXPECT_EQ(memory_holds(holder, secret), std::optional<bool>(false))
            << "an earlier launch's environment (" << secret << ") is in the new holder";
}

}  // namespace
}  // namespace corral
