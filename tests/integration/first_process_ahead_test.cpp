// A prepared session's first process started ahead (isolation/launch_ahead.hpp, issue 18): the
// child waits in p1's leaf, inside the session's namespaces, and the first launch hands it its
// command. In a real corrald with a pool: the first run *is* that child, nothing of it outlives a
// session that never ran anything, it holds nothing of corrald's, a process with the session's
// credentials cannot reach it, and a first run still works when it is gone.

#include <gtest/gtest.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <linux/capability.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <optional>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/file_io.hpp"
#include "isolation/launch_ahead.hpp"
#include "isolation/seccomp_listing.hpp"
#include "policies/syscall_numbers.hpp"
#include "support/corrald_process.hpp"
#include "support/http_client.hpp"
#include "support/prepared_pool.hpp"
#include "support/test_helpers.hpp"

namespace corral {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using test_support::proc_text;
using test_support::status_field;
using testing::CorraldProcess;
using testing::gone_within;
using testing::HttpClient;
using testing::pids_in;
using testing::running;

/// What a process with session `holder`'s root identity gets when it opens /proc/<target>/mem
/// and PTRACE_ATTACHes to `target` (host pids): 0 when allowed, else the errno. Run in a fork
/// that enters the holder's user namespace and becomes its root, as a session's own process is.
std::pair<int, int> reach_as_session_root(pid_t holder, pid_t target) {
    int results[2];
    if (::pipe(results) != 0) return {-1, -1};
    const pid_t child = ::fork();
    if (child == 0) {
        ::close(results[0]);
        int answer[2] = {-1, -1};
        const int ns = ::open(("/proc/" + std::to_string(holder) + "/ns/user").c_str(), O_RDONLY);
        if (ns >= 0 && ::setns(ns, CLONE_NEWUSER) == 0 && ::setresgid(0, 0, 0) == 0 &&
            ::setresuid(0, 0, 0) == 0) {
            const int mem =
                ::open(("/proc/" + std::to_string(target) + "/mem").c_str(), O_RDONLY);
            answer[0] = mem >= 0 ? 0 : errno;
            if (::ptrace(PTRACE_ATTACH, target, nullptr, nullptr) == 0) {
                answer[1] = 0;
                ::ptrace(PTRACE_DETACH, target, nullptr, nullptr);
            } else {
                answer[1] = errno;
            }
        }
        (void)!::write(results[1], answer, sizeof answer);
        ::_exit(0);
    }
    ::close(results[1]);
    int answer[2] = {-1, -1};
    (void)!::read(results[0], answer, sizeof answer);
    ::close(results[0]);
    if (child > 0) ::waitpid(child, nullptr, 0);
    return {answer[0], answer[1]};
}

/// The capability lines of /proc/self/status as a session's command sees them.
std::string capabilities_seen_by_a_run(HttpClient& c, const std::string& id) {
    auto ran = c.post("/v1/sessions/" + id + "/run", {{"command", "grep ^Cap /proc/self/status"}});
    EXPECT_EQ(ran.status, 200u) << ran.body;
    return ran.status == 200 ? ran.json()["stdout"].get<std::string>() : std::string();
}

/// A /proc/<pid>/status capability mask as a number.
uint64_t capability_mask(pid_t pid, const std::string& field) {
    return std::stoull(status_field(pid, field), nullptr, 16);
}

class FirstProcessAhead : public testing::PreparedPoolTest {
  protected:
    void TearDown() override {
        if (!policy_dir_.empty()) std::filesystem::remove_all(policy_dir_);
    }
    /// corrald with a pool of `pool` sessions of a policy of the test's own, `name`, whose YAML
    /// is `yaml` (in a directory of the test's, removed with it).
    void start_with_policy(const std::string& name, const std::string& yaml, size_t pool = 1) {
        char pattern[] = "/tmp/corral-ahead-policy-XXXXXX";
        ASSERT_NE(::mkdtemp(pattern), nullptr);
        policy_dir_ = pattern;
        std::ofstream(policy_dir_ + "/" + name + ".yaml") << yaml;
        ASSERT_NO_FATAL_FAILURE(start_with({"--policy-dir", policy_dir_}, name, pool));
    }
    /// The seccomp lines of /proc/self/status and what the policy refused, as a run in session
    /// `id` sees and reports them (it tries a mount, which every filter here refuses).
    std::pair<std::string, json> filter_seen_by_a_run(HttpClient& c, const std::string& id) {
        auto ran = c.post("/v1/sessions/" + id + "/run",
                          {{"command",
                            "grep -E '^(NoNewPrivs|Seccomp)' /proc/self/status; "
                            "mount -t tmpfs none /mnt 2>/dev/null; exit 0"}});
        EXPECT_EQ(ran.status, 200u) << ran.body;
        if (ran.status != 200) return {};
        EXPECT_EQ(ran.json()["exitCode"], 0) << ran.body;
        return {ran.json()["stdout"].get<std::string>(), ran.json()["seccomp"]["refused"]};
    }

    std::string policy_dir_;

    /// A pool of one, its session claimed: `id`, and the child waiting in its p1 (`waiting`).
    void claim_waiting(std::string& id, pid_t& waiting) {
        ASSERT_NO_FATAL_FAILURE(start(1));
        id = claim(*client_);
        ASSERT_FALSE(id.empty());
        waiting = waiting_child(id);
        ASSERT_NE(waiting, 0);
    }
    /// Claims a prepared session of `policy`, whose confinement keeps the capabilities of
    /// `kept`: its waiting child has dropped the rest of its bounding set already, and its first
    /// run (that child) sees the capability lines its second run sees, `kept` bounding and
    /// effective.
    void expect_bounding_set_dropped_ahead(const std::string& policy, uint64_t kept) {
        HttpClient& c = *client_;
        const std::string id = claim(c, policy);
        ASSERT_FALSE(id.empty());
        const pid_t waiting = waiting_child(id);
        ASSERT_NE(waiting, 0);
        EXPECT_EQ(capability_mask(waiting, "CapBnd"), kept) << proc_text(waiting, "status");
        EXPECT_NE(capability_mask(::getpid(), "CapBnd"), kept) << "control: ours is whole";
        const std::string first = capabilities_seen_by_a_run(c, id);
        EXPECT_TRUE(gone_within(waiting, 5s)) << "the first run was the waiting child";
        const std::string second = capabilities_seen_by_a_run(c, id);
        EXPECT_EQ(first, second);
        char mask[32];
        std::snprintf(mask, sizeof mask, "%016llx\n", static_cast<unsigned long long>(kept));
        EXPECT_NE(first.find(std::string("CapBnd:\t") + mask), std::string::npos) << first;
        EXPECT_NE(first.find(std::string("CapEff:\t") + mask), std::string::npos) << first;
        EXPECT_EQ(c.del("/v1/sessions/" + id).status, 200u);
    }
};

// The first run of a claimed session is the child that waited in p1: the same process (its pid
// inside the session is what `$$` says), with the run's own cwd and environment, and nothing else
// of corrald's waits beside it (the session's pid namespace holds the holder and the command).
TEST_F(FirstProcessAhead, TheFirstRunIsTheChildThatWaitedInItsLeaf) {
    ASSERT_NO_FATAL_FAILURE(start(1));
    HttpClient& c = *client_;
    const std::string id = claim(c);
    ASSERT_FALSE(id.empty());
    const pid_t w = waiting_child(id);
    ASSERT_NE(w, 0);
    EXPECT_EQ(proc_text(w, "comm"), "corrald-first\n");
    // Inside the session's pid namespace already: its pid there is the last of NSpid.
    std::istringstream nspid(status_field(w, "NSpid"));
    std::vector<std::string> levels{std::istream_iterator<std::string>(nspid), {}};
    ASSERT_GE(levels.size(), 2u) << status_field(w, "NSpid");

    auto ran = c.post("/v1/sessions/" + id + "/run",
                      {{"command", "echo $$ $FIRST; pwd; set -- /proc/[0-9]*; echo $#"},
                       {"env", {{"FIRST", "yes"}}},
                       {"cwd", "/tmp"}});
    ASSERT_EQ(ran.status, 200u) << ran.body;
    EXPECT_EQ(ran.json()["exitCode"], 0) << ran.body;
    // The holder (1) and the shell, which counts them itself (a glob: `ls | grep -c` raced, the
    // `ls` listing /proc before the shell had forked `grep` on a loaded host): 2.
    EXPECT_EQ(ran.json()["stdout"], levels.back() + " yes\n/tmp\n2\n") << ran.body;
    EXPECT_TRUE(gone_within(w, 5s)) << "the command ended and was reaped";
    // Later runs are launched as always.
    auto second = c.post("/v1/sessions/" + id + "/run", {{"argv", {"true"}}});
    EXPECT_EQ(second.json()["exitCode"], 0) << second.body;
    EXPECT_EQ(c.del("/v1/sessions/" + id).status, 200u);
}

// CVE-2024-21626 (runc leaked a host descriptor into the container) and issue 10.1: while it
// waits, the child holds stdio and its end of corrald's socket, nothing else of corrald's or the
// zygote's (no session's descriptors either: it closed the holder's pidfd once it had joined).
TEST_F(FirstProcessAhead, TheWaitingChildHoldsOnlyStdioAndItsSocket) {
    std::string id;
    pid_t waiting = 0;
    ASSERT_NO_FATAL_FAILURE(claim_waiting(id, waiting));
    HttpClient& c = *client_;
    std::set<std::string> fds;
    std::string socket_target;
    for (const auto& entry : std::filesystem::directory_iterator(
             "/proc/" + std::to_string(waiting) + "/fd")) {
        fds.insert(entry.path().filename());
        const auto target = std::filesystem::read_symlink(entry.path()).string();
        if (entry.path().filename() != "0" && entry.path().filename() != "1" &&
            entry.path().filename() != "2")
            socket_target = target;
    }
    EXPECT_EQ(fds.size(), 4u) << "stdio and one socket";
    EXPECT_EQ(socket_target.rfind("socket:", 0), 0u) << socket_target;
    EXPECT_EQ(proc_text(waiting, "environ"), "") << "the zygote's empty environment";
    EXPECT_EQ(c.del("/v1/sessions/" + id).status, 200u);
}

// CVE-2016-9962 (runc's process joining a container was dumpable, so the container's processes
// could ptrace it and take its descriptors): the waiting child is in the session's namespaces as
// the session's root, for as long as the session goes unused. A process with exactly those
// credentials can neither open its memory nor attach to it (non-dumpable, its memory the host's
// user namespace's). Control: the same process may do both to a command of another session's
// root (a dumpable process of the same identity), so a refusal here is the child's protection.
TEST_F(FirstProcessAhead, AProcessOfTheSessionCannotReachTheWaitingChild) {
    ASSERT_NO_FATAL_FAILURE(start(2));
    CorraldProcess& daemon = *daemon_;
    HttpClient& c = *client_;
    const std::string a = claim(c);
    const std::string b = claim(c);
    ASSERT_FALSE(a.empty());
    ASSERT_FALSE(b.empty());
    const auto a_holder = pids_in(daemon, a, "holder");
    const pid_t a_waiting = waiting_child(a);
    ASSERT_EQ(a_holder.size(), 1u);
    ASSERT_NE(a_waiting, 0);

    const auto [mem, attach] = reach_as_session_root(a_holder[0], a_waiting);
    EXPECT_NE(mem, 0) << "opened the waiting child's memory";
    EXPECT_NE(mem, -1) << "could not become the session's root";
    EXPECT_NE(attach, 0) << "attached to the waiting child";
    EXPECT_TRUE(running(a_waiting));

    // Control, in session b: its first process, a command now, of b's root.
    auto spawned = c.post("/v1/sessions/" + b + "/processes", {{"argv", {"sleep", "30"}}});
    ASSERT_EQ(spawned.status, 201u) << spawned.body;
    std::vector<pid_t> sleeping;
    for (int i = 0; i < 200 && sleeping.empty(); ++i) {
        for (pid_t pid : pids_in(daemon, b, "p1"))
            if (proc_text(pid, "comm") == "sleep\n") sleeping.push_back(pid);
        if (sleeping.empty()) std::this_thread::sleep_for(10ms);
    }
    ASSERT_EQ(sleeping.size(), 1u);
    const auto b_holder = pids_in(daemon, b, "holder");
    ASSERT_EQ(b_holder.size(), 1u);
    const auto [control_mem, control_attach] = reach_as_session_root(b_holder[0], sleeping[0]);
    EXPECT_EQ(control_mem, 0) << "the control could not open a command's memory: the test "
                                 "cannot tell protection from failure";
    EXPECT_EQ(control_attach, 0);
    EXPECT_EQ(c.del("/v1/sessions/" + a).status, 200u);
    EXPECT_EQ(c.del("/v1/sessions/" + b).status, 200u);
}

// CVE-2024-21626 at exec: what the first command holds is what every later command holds (stdio,
// and here `ls`'s own directory), not the waiting child's socket or its report channel.
TEST_F(FirstProcessAhead, TheFirstCommandHoldsWhatEveryCommandHolds) {
    ASSERT_NO_FATAL_FAILURE(start(1));
    HttpClient& c = *client_;
    const std::string id = claim(c);
    ASSERT_NE(waiting_child(id), 0);
    const json listing = {{"argv", {"ls", "/proc/self/fd"}}};
    auto first = c.post("/v1/sessions/" + id + "/run", listing);
    auto second = c.post("/v1/sessions/" + id + "/run", listing);
    ASSERT_EQ(first.status, 200u) << first.body;
    EXPECT_EQ(first.json()["stdout"], "0\n1\n2\n3\n") << first.body;
    EXPECT_EQ(first.json()["stdout"], second.json()["stdout"]);
    EXPECT_EQ(c.del("/v1/sessions/" + id).status, 200u);
}

// A first launch the waiting child cannot take (its spec larger than one message on its socket:
// ~300 KB of environment) is launched another way, and the child is ended first: one process
// runs, and the child is reaped, not left waiting beside it.
TEST_F(FirstProcessAhead, AFirstLaunchItCannotTakeEndsItAndRunsAnotherWay) {
    std::string id;
    pid_t waiting = 0;
    ASSERT_NO_FATAL_FAILURE(claim_waiting(id, waiting));
    HttpClient& c = *client_;
    std::istringstream nspid(status_field(waiting, "NSpid"));
    std::vector<std::string> levels{std::istream_iterator<std::string>(nspid), {}};
    ASSERT_GE(levels.size(), 2u);
    json env = json::object();
    for (const char* key : {"BIG1", "BIG2", "BIG3"}) env[key] = std::string(100 * 1024, 'x');
    auto ran = c.post(
        "/v1/sessions/" + id + "/run",
        {{"command", "echo $$; echo ${#BIG1} ${#BIG2} ${#BIG3}; set -- /proc/[0-9]*; echo $#"},
         {"env", env}});
    ASSERT_EQ(ran.status, 200u) << ran.body.substr(0, 500);
    EXPECT_EQ(ran.json()["exitCode"], 0);
    const std::string out = ran.json()["stdout"];
    // Not the waiting child: another process, launched as every other.
    EXPECT_NE(out.substr(0, out.find('\n')), levels.back()) << out;
    // The holder and the shell (counting with a glob, no child of its own): the waiting child is
    // not among them.
    EXPECT_EQ(out.substr(out.find('\n') + 1), "102400 102400 102400\n2\n");
    EXPECT_TRUE(gone_within(waiting, 5s)) << proc_text(waiting, "status");
    EXPECT_EQ(c.del("/v1/sessions/" + id).status, 200u);
}

// Issue 12 item 1: a child stopped before execve must stall nobody. A waiting child stopped
// (SIGSTOP from the host: nothing in the session can signal it before its first launch) takes its
// command and never reaches execve: the launch fails after the setup limit as any stuck child's
// does (a setup-failed record naming it), and meanwhile corrald answers everyone else.
TEST_F(FirstProcessAhead, AStoppedWaitingChildFailsItsLaunchAndStallsNobody) {
    ASSERT_NO_FATAL_FAILURE(start(2));
    CorraldProcess& daemon = *daemon_;
    HttpClient& c = *client_;
    c.set_idle_timeout(120s);
    const std::string stuck = claim(c);
    const std::string other = claim(c);
    const pid_t waiting = waiting_child(stuck);
    ASSERT_NE(waiting, 0);
    ASSERT_EQ(::kill(waiting, SIGSTOP), 0);  // this test's daemon's child, by its pid

    std::atomic<bool> spawn_answered{false};
    std::atomic<bool> answered_during_spawn{false};
    std::thread prober([&] {
        std::this_thread::sleep_for(500ms);  // the spawn below is outstanding by then
        HttpClient h = daemon.client();
        h.set_idle_timeout(120s);
        const bool healthy = h.get("/v1/health").status == 200u;
        auto ran = h.post("/v1/sessions/" + other + "/run", {{"argv", {"/bin/echo", "fine"}}});
        answered_during_spawn = healthy && ran.status == 200u &&
                                ran.json()["stdout"] == "fine\n" && !spawn_answered;
    });
    auto spawned =
        c.post("/v1/sessions/" + stuck + "/processes", {{"argv", {"/bin/true"}}});
    spawn_answered = true;
    prober.join();
    EXPECT_TRUE(answered_during_spawn) << "another session waited for the stuck launch";
    ASSERT_EQ(spawned.status, 201u) << spawned.body;
    EXPECT_EQ(spawned.json()["status"], "setup-failed") << spawned.body;
    EXPECT_NE(spawned.json()["error"].get<std::string>().find("did not reach execve"),
              std::string::npos)
        << spawned.body;
    EXPECT_TRUE(gone_within(waiting, 5s)) << "the stuck child was killed and reaped";
    EXPECT_EQ(c.del("/v1/sessions/" + stuck).status, 200u);
    EXPECT_EQ(c.del("/v1/sessions/" + other).status, 200u);
}

// Warm-pool reuse bugs (one tenant's secrets in what the next one is given; CWE-226) and
// CVE-2019-5736's class (a sandboxed process reaching the runtime's memory): the waiting child of
// a session prepared after other sessions' launches went through the zygote is a copy of the
// zygote's memory, and holds none of those launches' environment or tokens.
TEST_F(FirstProcessAhead, AWaitingChildHoldsNoEarlierLaunchsSecret) {
    ASSERT_NO_FATAL_FAILURE(start(1));
    CorraldProcess& daemon = *daemon_;
    HttpClient& c = *client_;
    auto made = c.post("/v1/sessions", {{"policy", "default"}});
    ASSERT_EQ(made.status, 201u) << made.body;
    const std::string id = made.json()["id"], token = made.json()["token"];
    ASSERT_GE(token.size(), 32u);
    const std::vector<std::string> secrets = {"pw" + token.substr(token.size() - 8),
                                              "long-secret-" + token.substr(0, 24)};
    // The first run takes the session's own waiting child; the next two go through the zygote.
    for (int i = 0; i < 3; ++i) {
        auto ran = c.post("/v1/sessions/" + id + "/run",
                          {{"command", "true"},
                           {"env", {{"SHORT", secrets[0]}, {"LONG", secrets[1]}}}});
        ASSERT_EQ(ran.status, 200u) << ran.body;
    }
    // The pool refills after the claim (a session whose child is cloned after those launches);
    // take it and look at its waiting child.
    ASSERT_TRUE(testing::wait_pool_ready(c, "default", 1)) << daemon.log();
    const std::string next = claim(c);
    const pid_t waiting = waiting_child(next);
    ASSERT_NE(waiting, 0);
    // The scan works: corrald itself holds the token.
    EXPECT_EQ(test_support::memory_holds(daemon.pid(), token), std::optional<bool>(true));
    EXPECT_EQ(test_support::memory_holds(waiting, token), std::optional<bool>(false));
    for (const auto& secret : secrets)
        EXPECT_EQ(test_support::memory_holds(waiting, secret), std::optional<bool>(false))
            << "an earlier launch's environment (" << secret << ") is in the waiting child";
    EXPECT_EQ(c.del("/v1/sessions/" + id).status, 200u);
    EXPECT_EQ(c.del("/v1/sessions/" + next).status, 200u);
}

// A session deleted before it ran anything takes its waiting child with it: killed with the
// session and reaped (a child of corrald's launch worker, which the orphan walk does not see: a
// zombie would stay for corrald's life), and p1's leaf removed.
TEST_F(FirstProcessAhead, AnUnusedOneEndsWithItsSessionAndIsReaped) {
    std::string id;
    pid_t waiting = 0;
    ASSERT_NO_FATAL_FAILURE(claim_waiting(id, waiting));
    CorraldProcess& daemon = *daemon_;
    HttpClient& c = *client_;
    EXPECT_EQ(c.del("/v1/sessions/" + id).status, 200u);
    EXPECT_TRUE(gone_within(waiting, 5s)) << proc_text(waiting, "status");
    EXPECT_FALSE(std::filesystem::exists(daemon.instance_cgroup() + "/sessions/" + id));
}

// The waiting child gone before the first run (killed from outside: the OOM killer, an
// operator): the run is launched as any other, in the same leaf, and succeeds.
TEST_F(FirstProcessAhead, AFirstRunStillWorksWhenTheWaitingChildIsGone) {
    std::string id;
    pid_t waiting = 0;
    ASSERT_NO_FATAL_FAILURE(claim_waiting(id, waiting));
    HttpClient& c = *client_;
    ASSERT_EQ(::kill(waiting, SIGKILL), 0);  // this test's daemon's child, by its pid
    for (int i = 0; i < 200 && running(waiting); ++i) std::this_thread::sleep_for(5ms);
    auto ran = c.post("/v1/sessions/" + id + "/run", {{"command", "echo still"}});
    ASSERT_EQ(ran.status, 200u) << ran.body;
    EXPECT_EQ(ran.json()["exitCode"], 0) << ran.body;
    EXPECT_EQ(ran.json()["stdout"], "still\n");
    EXPECT_TRUE(gone_within(waiting, 5s)) << "the killed child was reaped";
    EXPECT_EQ(c.del("/v1/sessions/" + id).status, 200u);
}

// A daemon stopped hard while a claimed session's child still waits: the session survives the
// restart (as every journalled session does), the child is gone (its socket's other end went
// with corrald), and the first run after the restart is launched as any other.
TEST_F(FirstProcessAhead, ARestartLeavesNoWaitingChildAndTheSessionRuns) {
    std::string id;
    pid_t waiting = 0;
    ASSERT_NO_FATAL_FAILURE(claim_waiting(id, waiting));
    CorraldProcess& daemon = *daemon_;
    daemon.kill_hard();
    for (int i = 0; i < 500 && running(waiting); ++i) std::this_thread::sleep_for(10ms);
    EXPECT_FALSE(running(waiting)) << "the waiting child outlived corrald";
    ASSERT_TRUE(daemon.start()) << daemon.log();
    HttpClient again = daemon.client();
    auto ran = again.post("/v1/sessions/" + id + "/run", {{"command", "echo after"}});
    ASSERT_EQ(ran.status, 200u) << ran.body << daemon.log();
    EXPECT_EQ(ran.json()["exitCode"], 0) << ran.body;
    EXPECT_EQ(ran.json()["stdout"], "after\n");
    EXPECT_EQ(again.del("/v1/sessions/" + id).status, 200u);
}

// The waiting child's start time is read while it waits (not on the first command's way), and
// that is what the journal keeps to know the process again: a first process still running when
// corrald is killed is adopted by the restart (its pid and start time must match: pid_ref.hpp),
// and stopped through corrald as any other.
TEST_F(FirstProcessAhead, AFirstProcessOutlivingCorraldIsAdoptedByTheRestart) {
    std::string id;
    pid_t waiting = 0;
    ASSERT_NO_FATAL_FAILURE(claim_waiting(id, waiting));
    CorraldProcess& daemon = *daemon_;
    HttpClient& c = *client_;
    auto started = c.post("/v1/sessions/" + id + "/processes", {{"argv", {"sleep", "600"}}});
    ASSERT_EQ(started.status, 201u) << started.body;
    const std::string proc = started.json()["id"];
    for (int i = 0; i < 500 && test_support::proc_text(waiting, "comm") != "sleep\n"; ++i)
        std::this_thread::sleep_for(10ms);
    ASSERT_EQ(test_support::proc_text(waiting, "comm"), "sleep\n") << "not the waiting child";
    daemon.kill_hard();
    ASSERT_TRUE(daemon.start()) << daemon.log();
    HttpClient again = daemon.client();
    auto back = again.get("/v1/sessions/" + id + "/processes/" + proc);
    ASSERT_EQ(back.status, 200u) << back.body << daemon.log();
    EXPECT_EQ(back.json()["status"], "running") << back.body << daemon.log();
    EXPECT_TRUE(running(waiting));
    // Known again by its pid and start time, not only by its leaf being populated.
    EXPECT_EQ(daemon.log().find("main process not taken"), std::string::npos) << daemon.log();
    auto stopped = again.del("/v1/sessions/" + id + "/processes/" + proc + "?force=true");
    EXPECT_EQ(stopped.status, 200u) << stopped.body;
    EXPECT_TRUE(gone_within(waiting, 5s)) << "the adopted process was not stopped";
    EXPECT_EQ(again.del("/v1/sessions/" + id).status, 200u);
}

// The waiting child drops the capability bounding set of its session's confinement while it
// waits (launch_ahead.hpp), and its command then skips that step: the first run must still see
// exactly what every later run sees (CVE-2022-0492 escaped through a capability a process should
// not have kept; a bounding set left whole would let a setuid-root file of the session's user
// namespace regain everything at exec). `default` keeps none.
TEST_F(FirstProcessAhead, TheWaitingChildDropsTheBoundingSetTheFirstRunWouldHaveDropped) {
    ASSERT_NO_FATAL_FAILURE(start(1));
    expect_bounding_set_dropped_ahead("default", 0);
}

// A policy that keeps a capability: dropped ahead is everything but it, and the first run has it
// in every set as later runs do (a drop ahead that took it too would leave the command short of
// what its policy grants; one that left more would be a bounding set wider than the policy's).
TEST_F(FirstProcessAhead, ACapabilityThePolicyKeepsIsKeptByTheFirstRunAsByLaterOnes) {
    ASSERT_NO_FATAL_FAILURE(start_with_policy(
        "keeper",
        "name: keeper\nextends: default\n"
        "capabilities: { inherit: false, keep: [CAP_NET_BIND_SERVICE] }\n"));
    expect_bounding_set_dropped_ahead("keeper", uint64_t{1} << CAP_NET_BIND_SERVICE);
}

// The waiting child installs its session's seccomp filter while it waits (with no_new_privs, as
// every command), and the first run is confined by exactly that filter: once (not stacked on a
// second copy, which would still confine it but would show two filters), with its refusals
// counted as a later run's are (issue 17.6), its listener having come ahead. Before, the first
// command installed it on its way to execve, ~0.1 ms of the kernel's (issue 18).
TEST_F(FirstProcessAhead, TheWaitingChildInstallsTheSessionsFilterAndTheFirstRunHasItOnce) {
    std::string id;
    pid_t waiting = 0;
    ASSERT_NO_FATAL_FAILURE(claim_waiting(id, waiting));
    EXPECT_EQ(status_field(waiting, "Seccomp"), "2") << proc_text(waiting, "status");
    EXPECT_EQ(status_field(waiting, "Seccomp_filters"), "1");
    EXPECT_EQ(status_field(waiting, "NoNewPrivs"), "1");
    HttpClient& c = *client_;
    const auto [first, first_refused] = filter_seen_by_a_run(c, id);
    EXPECT_EQ(c.get("/v1/sessions/" + id + "/processes/p1").json()["pid"], waiting)
        << "the first run was the waiting child, not another launch";
    const auto [second, second_refused] = filter_seen_by_a_run(c, id);
    EXPECT_EQ(first, "NoNewPrivs:\t1\nSeccomp:\t2\nSeccomp_filters:\t1\n");
    EXPECT_EQ(first, second);
    EXPECT_EQ(first_refused, json({{"mount", 1}})) << "counted through the listener sent ahead";
    EXPECT_EQ(first_refused, second_refused);
    EXPECT_EQ(c.del("/v1/sessions/" + id).status, 200u);
}

// A policy that refuses a call the waiting child still makes after its filter would be installed
// (chdir, into the command's working directory) keeps its filter for the command's way, as before:
// the child waits unfiltered, the first run starts, and the command is refused chdir as later ones
// are. Installed ahead, the filter would have failed the first run's set-up.
TEST_F(FirstProcessAhead, AFilterRefusingACallOfTheChildsWayIsInstalledAtTheCommand) {
    ASSERT_NO_FATAL_FAILURE(start_with_policy(
        "nochdir", "name: nochdir\nextends: default\nseccomp: { deny: [chdir] }\n"));
    HttpClient& c = *client_;
    const std::string id = claim(c, "nochdir");
    ASSERT_FALSE(id.empty());
    const pid_t waiting = waiting_child(id);
    ASSERT_NE(waiting, 0);
    EXPECT_EQ(status_field(waiting, "Seccomp"), "0") << proc_text(waiting, "status");
    for (int run = 0; run < 2; ++run) {
        auto ran = c.post("/v1/sessions/" + id + "/run",
                          {{"command", "cd / 2>/dev/null; echo $?; pwd"}});
        ASSERT_EQ(ran.status, 200u) << ran.body;
        EXPECT_EQ(ran.json()["status"], "exited") << ran.body;
        const std::string out = ran.json()["stdout"];
        EXPECT_TRUE(out.rfind("0\n", 0) != 0 && out.ends_with("\n/workspace\n"))
            << "chdir refused, in the working directory all the same, run " << run << ": "
            << ran.body;
        const json refused = ran.json()["seccomp"]["refused"];
        EXPECT_TRUE(refused.size() == 1 && refused.contains("chdir")) << ran.body;
    }
    EXPECT_TRUE(gone_within(waiting, 5s)) << "the first run was the waiting child";
    EXPECT_EQ(c.del("/v1/sessions/" + id).status, 200u);
}

// What makes the previous test's rule hold for every policy: calls_after_filter_ahead() must name
// every call the waiting child makes once its filter is in. A policy refusing every other call
// (but those /bin/true needs after its execve) still has its filter installed ahead, and its first
// run must still reach /bin/true: a call of the child's way missing from the list is refused
// here, and the run fails naming the step.
TEST_F(FirstProcessAhead, TheChildsWayAfterItsFilterMakesOnlyTheCallsItIsCheckedFor) {
    std::set<std::string> allowed;
    for (const auto& name : calls_after_filter_ahead()) allowed.insert(name);
    for (const char* name : {"access", "newfstatat", "pread64", "arch_prctl", "set_tid_address",
                             "set_robust_list", "rseq", "getrandom"})
        allowed.insert(name);  // /bin/true's own, after its execve
    std::string deny;
    for (int nr = 0; nr <= highest_x86_64_syscall(); ++nr) {
        const std::string name = syscall_name_of(nr);
        if (name.empty() || allowed.count(name) != 0) continue;
        deny += (deny.empty() ? "" : ", ") + name;
    }
    ASSERT_NO_FATAL_FAILURE(start_with_policy(
        "onlyahead",
        "name: onlyahead\nextends: default\nseccomp: { preset: none, deny: [" + deny + "] }\n"));
    HttpClient& c = *client_;
    const std::string id = claim(c, "onlyahead");
    ASSERT_FALSE(id.empty());
    const pid_t waiting = waiting_child(id);
    ASSERT_NE(waiting, 0);
    EXPECT_EQ(status_field(waiting, "Seccomp"), "2") << "installed ahead";
    auto ran = c.post("/v1/sessions/" + id + "/run", {{"argv", {"/bin/true"}}});
    ASSERT_EQ(ran.status, 200u) << ran.body;
    EXPECT_EQ(ran.json()["status"], "exited") << ran.body;
    EXPECT_EQ(ran.json()["exitCode"], 0) << ran.body;
    EXPECT_EQ(ran.json()["pid"], waiting) << "the first run was the waiting child, not another";
    EXPECT_EQ(c.del("/v1/sessions/" + id).status, 200u);
}

}  // namespace
}  // namespace corral
