// Every kind of first launch takes a prepared session's waiting child (issue 18; the child of
// isolation/launch_ahead.hpp that waits in the p1 leaf, comm `corrald-first`), and nothing of that
// child outlives the ways a prepared session ends. In a real corrald with a pool:
//
// - a terminal, a shell context's first command and a code context, each as the session's first
//   launch, *are* the waiting child (the same host pid) and work as they do without a pool: the
//   terminal on its own pty as its controlling terminal, the shell context's state carried over,
//   the interpreter answering; later launches work as always;
// - the first run's seccomp refusals are counted as a later run's are (the waiting child installs
//   the filter and hands corrald its listener the way every launch does);
// - a prepared session discarded because its policy changed, and a claimed one ended by its idle
//   timeout before it ran anything, take their waiting child with them (reaped, not a zombie)
//   and remove their cgroups;
// - a forced shutdown (a second SIGTERM) with a pool of 4 ends promptly, with no waiting child and
//   no cgroup of the instance left.
//
// The precedents for the cleanup checks: runc's CVE-2016-9962 (a process waiting half inside a
// container, reachable from it) is why a waiting child must never outlive its session, and the
// "warm pool" reuse bug (one tenant's pooled state reaching the next) is why a discarded prepared
// session must leave nothing behind that a later session could meet.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/corrald_process.hpp"
#include "support/http_client.hpp"
#include "support/prepared_pool.hpp"
#include "support/test_helpers.hpp"
#include "support/ws_client.hpp"

namespace corral {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using test_support::exists;
using test_support::proc_text;
using test_support::status_field;
using test_support::TempDir;
using testing::CorraldProcess;
using testing::gone_within;
using testing::HttpClient;
using testing::pids_in;
using testing::removed_within;
using testing::running;
using Counts = std::map<std::string, uint64_t>;

bool host_has(const char* program) {
    for (const char* dir : {"/usr/bin/", "/usr/local/bin/", "/bin/"})
        if (::access((std::string(dir) + program).c_str(), X_OK) == 0) return true;
    return false;
}

/// The pid of a process inside its session's pid namespace: the last of NSpid ("" if unknown).
std::string pid_inside(pid_t pid) {
    std::istringstream nspid(status_field(pid, "NSpid"));
    std::vector<std::string> levels{std::istream_iterator<std::string>(nspid), {}};
    return levels.size() >= 2 ? levels.back() : std::string();
}

/// Field `n` (1-based, as proc(5) numbers them) of /proc/<pid>/stat ("" if unknown).
std::string stat_field(pid_t pid, size_t n) {
    const std::string stat = proc_text(pid, "stat");
    const size_t end = stat.rfind(')');
    if (end == std::string::npos || n < 3) return {};
    std::istringstream rest(stat.substr(end + 1));
    std::string field;
    for (size_t i = 3; i <= n && rest >> field; ++i)
        if (i == n) return field;
    return {};
}

class FirstLaunchKinds : public testing::PreparedPoolTest {
  protected:
    json run(const std::string& id, const json& body) {
        auto ran = client_->post("/v1/sessions/" + id + "/run", body);
        EXPECT_EQ(ran.status, 200u) << ran.body;
        return ran.status == 200 ? ran.json() : json::object();
    }
    /// The session's record once it has ended (null after 60 s).
    json wait_ended(const std::string& id) {
        for (int i = 0; i < 3000; ++i) {
            auto got = client_->get("/v1/sessions/" + id);
            if (got.status == 200 && got.json()["state"] == "ended") return got.json();
            std::this_thread::sleep_for(20ms);
        }
        return nullptr;
    }
    std::string session_cgroup(const std::string& id) const {
        return daemon_->instance_cgroup() + "/sessions/" + id;
    }
    /// corrald with a pool of one: claims its session (id_) and finds its waiting child (its
    /// host pid waiting_, its pid inside the session inside_).
    void claim_first() {
        ASSERT_NO_FATAL_FAILURE(start(1));
        id_ = claim(*client_);
        ASSERT_FALSE(id_.empty());
        waiting_ = waiting_child(id_);
        ASSERT_NE(waiting_, 0);
        inside_ = pid_inside(waiting_);
        ASSERT_FALSE(inside_.empty()) << status_field(waiting_, "NSpid");
    }

    std::string id_;
    pid_t waiting_ = 0;
    std::string inside_;
};

// A terminal as the first launch: the waiting child becomes the terminal's process (its record's
// pid is the child's host pid), a session leader with the pty as its controlling terminal (the
// child entered the session before the pty existed; the pty's slave comes with its command), and
// typing and reading work. A run afterwards is launched as always.
TEST_F(FirstLaunchKinds, AFirstTerminalIsTheWaitingChildOnItsOwnPty) {
    ASSERT_NO_FATAL_FAILURE(claim_first());
    HttpClient& c = *client_;
    const std::string id = id_;
    const pid_t w = waiting_;
    const std::string inside = inside_;

    auto made = c.post("/v1/sessions/" + id + "/terminals", {{"cols", 80}, {"rows", 24}});
    ASSERT_EQ(made.status, 201u) << made.body;
    const json record = made.json();
    EXPECT_EQ(record["id"], "p1") << record;
    EXPECT_EQ(record["terminal"], true) << record;
    EXPECT_EQ(record["pid"], w) << "the terminal is not the child that waited in p1";
    ASSERT_TRUE(running(w));
    // proc(5): field 6 the session id, field 7 the controlling terminal (0: none).
    EXPECT_EQ(stat_field(w, 6), std::to_string(w))
        << "not a session leader: " << proc_text(w, "stat");
    EXPECT_NE(stat_field(w, 7), "0") << "no controlling terminal: " << proc_text(w, "stat");

    testing::TerminalSocket term(daemon_->socket_path(), "/v1/sessions/" + id + "/terminals/p1/ws");
    ASSERT_TRUE(term.read_until("# ")) << "no prompt: " << term.output;
    term.type("echo \"pid:$$ on:$(tty)\"\n");
    EXPECT_TRUE(term.read_until("pid:" + inside + " on:/dev/pts/")) << term.output;
    term.type("echo $((6*7))\n");
    EXPECT_TRUE(term.read_until("42\r\n")) << term.output;

    const json later = run(id, {{"command", "echo $$ later"}});
    EXPECT_EQ(later["exitCode"], 0) << later;
    EXPECT_NE(later["stdout"], inside + " later\n") << "a later run reused the terminal's pid";
    EXPECT_NE(later.value("stdout", std::string()).find(" later\n"), std::string::npos) << later;
    EXPECT_TRUE(running(w)) << "the terminal ended with the run";
    EXPECT_EQ(c.del("/v1/sessions/" + id).status, 200u);
    EXPECT_TRUE(gone_within(w, 10s)) << proc_text(w, "status");
}

// A shell context launches nothing when it is made; its first command is the session's first
// launch and takes the waiting child. The context's state (cwd, exports) comes back from that
// command through the descriptor the context hands every command (an extra fd the waiting child
// must receive with its command), so the next command of the context starts where it left off.
TEST_F(FirstLaunchKinds, AShellContextsFirstCommandIsTheWaitingChildAndKeepsItsState) {
    ASSERT_NO_FATAL_FAILURE(claim_first());
    HttpClient& c = *client_;
    const std::string id = id_;
    const pid_t w = waiting_;
    const std::string inside = inside_;

    auto shell = c.post("/v1/sessions/" + id + "/shells", {{"id", "ctx"}});
    ASSERT_EQ(shell.status, 201u) << shell.body;
    EXPECT_EQ(pids_in(*daemon_, id, "p1"), std::vector<pid_t>{w}) << "a context started something";

    const json first = run(
        id,
        {{"command", "echo $$; mkdir -p deep && cd deep && export MARK=kept"}, {"shell", "ctx"}});
    EXPECT_EQ(first["exitCode"], 0) << first;
    EXPECT_EQ(first["stdout"], inside + "\n") << "the first command is not the waiting child";
    EXPECT_TRUE(gone_within(w, 10s)) << "the command ended and was reaped";

    const json second = run(id, {{"command", "echo \"$(pwd) $MARK\""}, {"shell", "ctx"}});
    EXPECT_EQ(second["exitCode"], 0) << second;
    EXPECT_NE(second.value("stdout", std::string()).find("/deep kept\n"), std::string::npos)
        << "the context lost the state of its first command: " << second;
    auto state = c.get("/v1/sessions/" + id + "/shells/ctx");
    EXPECT_FALSE(state.json().contains("lastStateError")) << state.body;

    const json plain = run(id, {{"argv", {"echo", "plain"}}});
    EXPECT_EQ(plain["stdout"], "plain\n") << plain;
    EXPECT_EQ(c.del("/v1/sessions/" + id).status, 200u);
}

// A code context as the first launch: the interpreter is the waiting child (the context's pid is
// the child's host pid, os.getpid() its pid inside), it was handed its driver on stdin and its
// socket at fd 3 with its command, and it keeps state from run to run. A run afterwards works.
TEST_F(FirstLaunchKinds, AFirstCodeContextIsTheWaitingChild) {
    if (!host_has("python3")) GTEST_SKIP() << "python3 is not installed";
    ASSERT_NO_FATAL_FAILURE(claim_first());
    HttpClient& c = *client_;
    const std::string id = id_;
    const pid_t w = waiting_;
    const std::string inside = inside_;

    const std::string base = "/v1/sessions/" + id;
    auto made = c.post(base + "/contexts", {{"language", "python"}, {"id", "py"}});
    ASSERT_EQ(made.status, 201u) << made.body;
    const json context = made.json();
    EXPECT_EQ(context["status"], "idle") << context;
    EXPECT_EQ(context["process"], "p1") << context;
    EXPECT_EQ(context["pid"], w) << "the interpreter is not the child that waited in p1";

    auto ran = c.post(base + "/contexts/py/run", {{"code", "import os\nx = 6 * 7\nos.getpid()"}});
    ASSERT_EQ(ran.status, 200u) << ran.body;
    EXPECT_EQ(ran.json()["status"], "ok") << ran.body;
    EXPECT_EQ(ran.json()["results"][0]["text/plain"], inside) << ran.body;
    auto again = c.post(base + "/contexts/py/run", {{"code", "x"}});
    ASSERT_EQ(again.status, 200u) << again.body;
    EXPECT_EQ(again.json()["results"][0]["text/plain"], "42") << again.body;
    EXPECT_TRUE(running(w));

    const json plain = run(id, {{"argv", {"echo", "plain"}}});
    EXPECT_EQ(plain["stdout"], "plain\n") << plain;
    EXPECT_EQ(c.del(base).status, 200u);
    EXPECT_TRUE(gone_within(w, 10s)) << proc_text(w, "status");
}

// issue 17.6 (docs/SECCOMP.md "Refusals in reports"): a process's record counts exactly what its
// filter refused. The first run is the waiting child, which installs the filter after it was
// handed its command and passes corrald the listener on its report channel: its counts must be
// those of the same command run again (a listener lost on that way would count nothing, or a
// filter installed twice count twice). Precedent: seccomp_unotify(2) "Caveats"; the counting
// must never depend on which way a process was launched.
TEST_F(FirstLaunchKinds, TheFirstRunCountsItsRefusalsAsALaterRunDoes) {
    ASSERT_NO_FATAL_FAILURE(claim_first());
    HttpClient& c = *client_;
    const std::string id = id_;
    const pid_t w = waiting_;
    const std::string inside = inside_;
    // The probe goes in through the file API, which launches nothing.
    std::ifstream in(CORRAL_SYSCALL_PROBE, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), {});
    ASSERT_FALSE(bytes.empty());
    auto put = c.request("PUT", "/v1/sessions/" + id + "/files?path=sprobe", bytes);
    ASSERT_EQ(put.status, 200u) << put.body;
    ASSERT_EQ(pids_in(*daemon_, id, "p1"), std::vector<pid_t>{w});

    const json command = {{"command",
                           "echo pid $$; chmod 755 sprobe && ./sprobe repeat 3 ptrace && "
                           "./sprobe repeat 1 mount"}};
    const json first = run(id, command);
    const json second = run(id, command);
    EXPECT_NE(first.value("stdout", std::string()).find("pid " + inside + "\n"), std::string::npos)
        << "the first run is not the waiting child: " << first;
    for (const json* result : {&first, &second}) {
        EXPECT_EQ(result->value("exitCode", -1), 0) << *result;
        EXPECT_NE(result->value("stdout", std::string()).find("ptrace EPERM\n"), std::string::npos)
            << *result;
        const json seccomp = (*result)["seccomp"];
        ASSERT_TRUE(seccomp.is_object()) << *result;
        EXPECT_EQ(seccomp["counted"], true) << seccomp;
        EXPECT_EQ(seccomp["refused"].get<Counts>(), (Counts{{"mount", 1}, {"ptrace", 3}}))
            << (result == &first ? "first" : "second") << " run: " << seccomp;
        EXPECT_EQ(seccomp["refusedTotal"], 4) << seccomp;
    }
    EXPECT_EQ(first["seccomp"], second["seccomp"]);
    EXPECT_EQ(c.del("/v1/sessions/" + id).status, 200u);
}

// A prepared session whose policy file changed is discarded at the next claim (it was built from
// another policy than the client asks for: the "warm pool" precedent): its waiting child is
// killed and reaped (not left a zombie of corrald's) and its cgroup removed.
TEST_F(FirstLaunchKinds, APoolDiscardedForAChangedPolicyTakesItsWaitingChild) {
    const TempDir dir("corral-first-launch-policies");
    ASSERT_FALSE(dir.path().empty());
    const std::string file = dir.path() + "/agent.yaml";
    std::ofstream(file) << "name: agent\nextends: default\nenv: { set: { WHICH: first } }\n";
    ASSERT_NO_FATAL_FAILURE(start_with({"--policy-dir", dir.path()}, "agent", 1));
    HttpClient& c = *client_;
    const auto prepared = session_cgroups();
    ASSERT_EQ(prepared.size(), 1u);
    const std::string old = prepared[0];
    const pid_t w = waiting_child(old);
    ASSERT_NE(w, 0);

    std::ofstream(file, std::ios::trunc)
        << "name: agent\nextends: default\nenv: { set: { WHICH: second } }\n";
    const std::string id = claim(c, "agent");
    ASSERT_FALSE(id.empty());
    EXPECT_NE(id, old) << "a session prepared from the old file was handed out";
    EXPECT_TRUE(gone_within(w, 20s))
        << "the discarded session's waiting child is still there: " << proc_text(w, "status");
    EXPECT_TRUE(removed_within(session_cgroup(old), 20s)) << "its cgroup is left";
    EXPECT_EQ(run(id, {{"command", "echo $WHICH"}})["stdout"], "second\n");
    EXPECT_EQ(daemon_->zombie_children(), 0u);
}

// Prepared sessions have no timers (docs/API.md "Prepared sessions"; corrald has no idle timeout
// for its pools), so the idle end a waiting child meets is a claimed session's: claimed, never
// used, ended by its policy's idle timeout. The child goes with it and the cgroup is removed.
TEST_F(FirstLaunchKinds, AClaimedSessionEndedIdleBeforeItRanAnythingTakesItsWaitingChild) {
    const TempDir dir("corral-first-launch-idle");
    ASSERT_FALSE(dir.path().empty());
    std::ofstream(dir.path() + "/brief.yaml")
        << "name: brief\nextends: default\ntimeouts: { idle: 2s }\n";
    ASSERT_NO_FATAL_FAILURE(start_with({"--policy-dir", dir.path()}, "brief", 1));
    HttpClient& c = *client_;
    const std::string id = claim(c, "brief");
    ASSERT_FALSE(id.empty());
    const pid_t w = waiting_child(id);
    ASSERT_NE(w, 0);

    // Watched from outside only: a request naming the session would count as activity.
    EXPECT_TRUE(gone_within(w, 60s))
        << "the idle session's waiting child is still there: " << proc_text(w, "status") << "\n"
        << daemon_->log();
    EXPECT_TRUE(removed_within(session_cgroup(id), 20s)) << "its cgroup is left";
    const json ended = wait_ended(id);
    ASSERT_FALSE(ended.is_null()) << "the session did not end\n" << daemon_->log();
    EXPECT_EQ(ended["endReason"], "idle") << ended;
    EXPECT_EQ(daemon_->zombie_children(), 0u);
}

// A forced shutdown (SIGTERM, then a second SIGTERM while sessions end: "stopping now") with a pool
// of 4 waiting children: corrald used to stall 10 s per pooled session there (its holder, as PID
// 1, waited for a waiting child nobody reaped). It must exit promptly, leave no waiting child, and
// remove its cgroups. The bound only catches that stall (4 x 10 s), not a slow host.
TEST_F(FirstLaunchKinds, AForcedShutdownWithAPoolOfFourLeavesNoWaitingChild) {
    ASSERT_NO_FATAL_FAILURE(start(4));
    CorraldProcess& daemon = *daemon_;
    std::vector<pid_t> waiting;
    for (const auto& id : session_cgroups())
        for (pid_t pid : pids_in(daemon, id, "p1")) waiting.push_back(pid);
    ASSERT_EQ(waiting.size(), 4u) << daemon.log();
    const std::string instance = daemon.instance_cgroup();

    ASSERT_EQ(::kill(daemon.pid(), SIGTERM), 0);  // this test's corrald, by its pid
    bool ending = false;
    for (int i = 0; i < 1000 && !ending; ++i) {
        ending = daemon.log().find("ending all sessions") != std::string::npos;
        if (!ending) std::this_thread::sleep_for(5ms);
    }
    ASSERT_TRUE(ending) << daemon.log();
    const auto forced = std::chrono::steady_clock::now();
    const int status = daemon.stop(60s);  // the second SIGTERM; SIGKILL only after 60 s
    const auto took = std::chrono::steady_clock::now() - forced;
    EXPECT_TRUE(WIFEXITED(status))
        << "corrald was killed or crashed (wait status " << status << "):\n"
        << daemon.log();
    EXPECT_LT(took, 20s) << "a forced shutdown took "
                         << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                         << " ms\n"
                         << daemon.log();
    if (daemon.log().find("second signal: stopping now") == std::string::npos)
        std::cerr << "note: the orderly shutdown finished before the second signal\n";
    for (pid_t pid : waiting)
        EXPECT_TRUE(gone_within(pid, 10s))
            << "waiting child " << pid << " outlived corrald: " << proc_text(pid, "status");
    EXPECT_FALSE(exists(instance)) << "the instance cgroup is left";
    EXPECT_TRUE(daemon.v1_cgroups().empty()) << "v1 cgroups of the instance are left";
    EXPECT_TRUE(daemon.footprint().empty()) << daemon.footprint().describe();
}

}  // namespace
}  // namespace corral
