// corrald survives its own crash (issue 12 items 2 and 5, DESIGN.md "Surviving the daemon"):
// after kill -9 and a start with the same arguments, every journalled session whose cgroup still
// holds processes is back — same id, tokens, env, ports, namespaces — with its running processes
// killable and waitable, its finished records as they ended, and its timers counting from the
// original start; sessions with nothing left end with endReason daemon-restart.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "support/corrald_process.hpp"
#include "support/http_client.hpp"

namespace corral {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using testing::bearer;
using testing::corrald_can_run;
using testing::CorraldProcess;
using testing::HttpClient;

json process_of(const json& session, const std::string& id) {
    for (const auto& p : session["processes"])
        if (p["id"] == id) return p;
    return nullptr;
}

/// Waits (bounded, only to catch hangs) for the record of `proc` to be final.
json wait_final(HttpClient& c, const std::string& s, const std::string& proc) {
    auto waited = c.get(s + "/processes/" + proc + "/wait?timeoutMs=30000");
    EXPECT_EQ(waited.status, 200u) << waited.body;
    return waited.json();
}

/// Whether `pid` still runs (a zombie waiting for whoever it was reparented to has ended).
bool alive(pid_t pid) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!std::getline(stat, line)) return false;
    const size_t close = line.rfind(')');
    return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z' &&
           line[close + 2] != 'X';
}

TEST(DaemonRestart, ReadoptsSessionsWithLiveProcessesWithTheirIdsTokensEnvAndPorts) {
    std::string why;
    if (!corrald_can_run(why)) GTEST_SKIP() << why;
    CorraldProcess daemon;
    ASSERT_TRUE(daemon.ready()) << daemon.log();
    HttpClient c = daemon.client();
    struct Created {
        std::string id, full, restricted;
        std::vector<uint16_t> ports;
    };
    std::vector<Created> created;
    // `default` has a pid/mount/user namespace holder; `none` has none.
    for (const char* policy : {"default", "none"}) {
        auto made = c.post("/v1/sessions",
                           {{"policy", policy}, {"env", {{"GREETING", "hello"}}}, {"ports", 1}});
        ASSERT_EQ(made.status, 201u) << made.body;
        Created one{made.json()["id"], made.json()["token"], made.json()["restrictedToken"], {}};
        const std::string s = "/v1/sessions/" + one.id;
        const json before = c.get(s).json();
        for (const auto& p : before["ports"]) one.ports.push_back(p["port"].get<uint16_t>());
        ASSERT_EQ(one.ports.size(), 1u);
        auto patched = c.request("PATCH", s + "/env", json({{"set", {{"LATER", "yes"}}}}).dump());
        ASSERT_EQ(patched.status, 200u) << patched.body;
        if (std::string(policy) == "default") {
            // Egress rules a client set survive: a restart must not fall back to the policy's.
            auto narrowed =
                c.request("PATCH", s + "/network",
                          json({{"mode", "custom"}, {"allowedHosts", {"example.com"}}}).dump());
            ASSERT_EQ(narrowed.status, 200u) << narrowed.body;
        }
        auto ran = c.post(s + "/run", {{"command", "exit 7"}});
        ASSERT_EQ(ran.status, 200u) << ran.body;
        auto spawned = c.post(s + "/processes", {{"command", "sleep 600 & sleep 600"}});
        ASSERT_EQ(spawned.status, 201u) << spawned.body;
        created.push_back(one);
    }
    daemon.kill_hard();
    ASSERT_TRUE(daemon.start()) << daemon.log();
    EXPECT_NE(daemon.log().find("re-adopted 2 sessions"), std::string::npos) << daemon.log();

    auto listed = c.get("/v1/sessions");
    ASSERT_EQ(listed.status, 200u);
    EXPECT_EQ(listed.json()["sessions"].size(), 2u) << listed.body;
    for (const auto& one : created) {
        SCOPED_TRACE(one.id);
        const std::string s = "/v1/sessions/" + one.id;
        // The full token still works, and is still held to its own session.
        auto got = c.get(s, bearer(one.full));
        ASSERT_EQ(got.status, 200u) << got.body;
        const json session = got.json();
        EXPECT_EQ(session["state"], "active");
        EXPECT_EQ(session["env"]["GREETING"], "hello");
        EXPECT_EQ(session["env"]["LATER"], "yes");
        ASSERT_EQ(session["ports"].size(), 1u);
        EXPECT_EQ(session["ports"][0]["port"].get<uint16_t>(), one.ports[0]);
        if (session.contains("egress")) {
            EXPECT_EQ(session["egress"]["mode"], "custom") << session["egress"];
            EXPECT_EQ(session["egress"]["allowedHosts"], json({"example.com"}));
        }
        const json ran = process_of(session, "p1");
        EXPECT_EQ(ran["status"], "exited") << ran;
        EXPECT_EQ(ran["exitCode"], 7) << ran;
        const json spawned = process_of(session, "p2");
        EXPECT_EQ(spawned["status"], "running") << spawned;
        // Its holder (a keeper for `none`) kept its pipes: reading goes on (--keep-output=on).
        EXPECT_EQ(spawned["outputResumed"], true) << spawned;
        EXPECT_FALSE(spawned.contains("outputLost")) << spawned;
        EXPECT_NE(spawned.value("note", "").find("daemon-restart"), std::string::npos);
        // The restricted token may run but not end the session.
        auto refused = c.del(s, bearer(one.restricted));
        EXPECT_EQ(refused.status, 403u) << refused.body;
        // The session works: env comes back into new processes, through its namespaces.
        auto echoed =
            c.post(s + "/run", {{"command", "echo $GREETING-$LATER"}}, bearer(one.restricted));
        ASSERT_EQ(echoed.status, 200u) << echoed.body;
        EXPECT_EQ(echoed.json()["stdout"], "hello-yes\n");
        EXPECT_EQ(echoed.json()["id"], "p3");  // ids go on from where they were
        // A running adopted process is killable; its end comes through its leaf cgroup.
        const pid_t pid = spawned["pid"].get<pid_t>();
        auto killed = c.del(s + "/processes/p2?force=true");
        ASSERT_EQ(killed.status, 200u) << killed.body;
        const json final_record = wait_final(c, s, "p2");
        EXPECT_EQ(final_record["finished"], true) << final_record;
        EXPECT_EQ(final_record["status"], "killed") << final_record;
        EXPECT_FALSE(alive(pid));
    }
    // DELETE of an adopted session kills its tree and leaves nothing behind.
    for (const auto& one : created) {
        auto spawned = c.post("/v1/sessions/" + one.id + "/processes", {{"command", "sleep 600"}});
        ASSERT_EQ(spawned.status, 201u) << spawned.body;
        auto ended = c.del("/v1/sessions/" + one.id, bearer(one.full));
        EXPECT_EQ(ended.status, 200u) << ended.body;
    }
    EXPECT_TRUE(daemon.footprint().empty()) << daemon.footprint().describe();
    const int status = daemon.stop(60s);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << daemon.log();
}

// A process that ended while the daemon was down has no knowable exit status: the record says
// so (status unknown, exitCode null, a note); a session left with nothing running ends.
TEST(DaemonRestart, WhatEndedWhileTheDaemonWasDownIsUnknownAndEmptySessionsEnd) {
    std::string why;
    if (!corrald_can_run(why)) GTEST_SKIP() << why;
    CorraldProcess daemon;
    ASSERT_TRUE(daemon.ready()) << daemon.log();
    HttpClient c = daemon.client();
    auto kept = c.post("/v1/sessions", {{"policy", "none"}});
    ASSERT_EQ(kept.status, 201u);
    const std::string k = "/v1/sessions/" + kept.json()["id"].get<std::string>();
    ASSERT_EQ(c.post(k + "/processes", {{"argv", {"/bin/sleep", "600"}}}).status, 201u);
    auto doomed = c.post(k + "/processes", {{"argv", {"/bin/sleep", "600"}}});
    ASSERT_EQ(doomed.status, 201u);
    const pid_t doomed_pid = doomed.json()["pid"].get<pid_t>();
    auto idle = c.post("/v1/sessions", {{"policy", "none"}});
    ASSERT_EQ(idle.status, 201u);
    const std::string idle_id = idle.json()["id"];

    daemon.kill_hard();
    ASSERT_EQ(::kill(doomed_pid, SIGKILL), 0);  // ends while nobody watches
    for (int i = 0; i < 500 && alive(doomed_pid); ++i) std::this_thread::sleep_for(10ms);
    ASSERT_TRUE(daemon.start()) << daemon.log();

    auto got = c.get(k);
    ASSERT_EQ(got.status, 200u) << got.body;
    EXPECT_EQ(got.json()["state"], "active");
    const json ended = process_of(got.json(), "p2");
    EXPECT_EQ(ended["status"], "unknown") << ended;
    EXPECT_TRUE(ended["exitCode"].is_null()) << ended;
    EXPECT_NE(ended.value("note", "").find("ended while the daemon was down"), std::string::npos)
        << ended;
    EXPECT_EQ(process_of(got.json(), "p1")["status"], "running");

    auto gone = c.get("/v1/sessions/" + idle_id);
    ASSERT_EQ(gone.status, 200u) << gone.body;
    EXPECT_EQ(gone.json()["state"], "ended");
    EXPECT_EQ(gone.json()["endReason"], "daemon-restart");
    // Its id is free again.
    EXPECT_EQ(c.post("/v1/sessions", {{"id", idle_id}, {"policy", "none"}}).status, 201u);
    EXPECT_EQ(c.del("/v1/sessions/" + idle_id).status, 200u);
    EXPECT_EQ(c.del(k).status, 200u);
    EXPECT_TRUE(daemon.footprint().empty()) << daemon.footprint().describe();
}

// A named policy is resolved again on restart. One that asked for no namespaces (the session has
// a keeper, not a holder) and now asks for some must not have the keeper taken for the holder:
// every new process would setns into corrald's own mount, pid and network namespaces while the
// record says it is isolated (review of issue 12's keepers). The session ends instead, its process
// killed, as any session whose policy no longer fits what is left of it.
TEST(DaemonRestart, AKeeperIsNeverTakenForTheHolderOfAPolicyThatNowAsksForNamespaces) {
    std::string why;
    if (!corrald_can_run(why)) GTEST_SKIP() << why;
    char dir_template[] = "/tmp/corral-test-policies-XXXXXX";
    ASSERT_NE(::mkdtemp(dir_template), nullptr);
    const std::filesystem::path policies(dir_template);
    struct RemoveDir {
        std::filesystem::path path;
        ~RemoveDir() { std::filesystem::remove_all(path); }
    } remove_dir{policies};
    std::ofstream(policies / "agent.yaml") << "name: agent\nextends: none\n";

    CorraldProcess daemon({"--policy-dir", policies.string()});
    ASSERT_TRUE(daemon.ready()) << daemon.log();
    HttpClient c = daemon.client();
    auto made = c.post("/v1/sessions", {{"policy", "agent"}});
    ASSERT_EQ(made.status, 201u) << made.body;
    const std::string s = "/v1/sessions/" + made.json()["id"].get<std::string>();
    auto sleeper = c.post(s + "/processes", {{"argv", {"/bin/sleep", "600"}}});
    ASSERT_EQ(sleeper.status, 201u) << sleeper.body;
    const pid_t sleeper_pid = sleeper.json()["pid"].get<pid_t>();

    daemon.kill_hard();
    // Namespaces without a user namespace: the identity check of a user namespace cannot catch it.
    std::ofstream(policies / "agent.yaml", std::ios::trunc)
        << "name: agent\nextends: default\nnamespaces: { user: false }\n";
    ASSERT_TRUE(daemon.start()) << daemon.log();

    auto got = c.get(s);
    ASSERT_EQ(got.status, 200u) << got.body;
    EXPECT_EQ(got.json()["state"], "ended") << got.body;
    EXPECT_EQ(got.json()["endReason"], "daemon-restart") << got.body;
    for (int i = 0; i < 500 && alive(sleeper_pid); ++i) std::this_thread::sleep_for(10ms);
    EXPECT_FALSE(alive(sleeper_pid)) << "the session's process was left running";
    EXPECT_TRUE(daemon.footprint().empty()) << daemon.footprint().describe();
}

// Issue 12.2: `--recover=reap` ends everything a previous run left instead of re-adopting.
TEST(DaemonRestart, RecoverReapEndsEverythingInstead) {
    std::string why;
    if (!corrald_can_run(why)) GTEST_SKIP() << why;
    CorraldProcess daemon;
    ASSERT_TRUE(daemon.ready()) << daemon.log();
    HttpClient c = daemon.client();
    auto made = c.post("/v1/sessions", {{"policy", "default"}});
    ASSERT_EQ(made.status, 201u);
    const std::string id = made.json()["id"];
    auto spawned = c.post("/v1/sessions/" + id + "/processes", {{"command", "sleep 600"}});
    ASSERT_EQ(spawned.status, 201u);
    const pid_t pid = spawned.json()["pid"].get<pid_t>();
    daemon.kill_hard();
    daemon.arguments().push_back("--recover=reap");
    ASSERT_TRUE(daemon.start()) << daemon.log();
    EXPECT_FALSE(alive(pid));
    EXPECT_TRUE(daemon.footprint().empty()) << daemon.footprint().describe();
    auto got = c.get("/v1/sessions/" + id);
    ASSERT_EQ(got.status, 200u);
    EXPECT_EQ(got.json()["state"], "ended");
    EXPECT_EQ(got.json()["endReason"], "daemon-restart");
    // And a journal reaped once does not bring it back on the next start.
    daemon.arguments().pop_back();
    daemon.kill_hard();
    ASSERT_TRUE(daemon.start()) << daemon.log();
    EXPECT_TRUE(c.get("/v1/sessions").json()["sessions"].empty());
}

// Timers survive too: a process's timeout and the session's count from their original start.
TEST(DaemonRestart, TimeoutsCountFromTheOriginalStart) {
    std::string why;
    if (!corrald_can_run(why)) GTEST_SKIP() << why;
    CorraldProcess daemon;
    ASSERT_TRUE(daemon.ready()) << daemon.log();
    HttpClient c = daemon.client();
    auto made = c.post("/v1/sessions", {{"policy", "none"}});
    ASSERT_EQ(made.status, 201u);
    const std::string s = "/v1/sessions/" + made.json()["id"].get<std::string>();
    auto spawned = c.post(s + "/processes", {{"argv", {"/bin/sleep", "600"}}, {"timeoutMs", 1500}});
    ASSERT_EQ(spawned.status, 201u);
    ASSERT_EQ(c.post(s + "/processes", {{"argv", {"/bin/sleep", "600"}}}).status, 201u);
    daemon.kill_hard();
    ASSERT_TRUE(daemon.start()) << daemon.log();
    const json waited = wait_final(c, s, "p1");
    EXPECT_EQ(waited["status"], "timeout") << waited;
    EXPECT_EQ(process_of(c.get(s).json(), "p2")["status"], "running");
    EXPECT_EQ(c.del(s).status, 200u);
}

// Issue 12.2/12.5: a client streaming a process when corrald died reconnects and gets the bytes
// still available and a final event that tells the truth, never a stream that just stops.
/// The pids in the leaf cgroup of `proc` of session `sid` (a daemon restart keeps them there).
std::vector<pid_t> leaf_pids(const CorraldProcess& daemon, const std::string& sid,
                             const std::string& leaf) {
    std::vector<pid_t> pids;
    std::ifstream procs(daemon.instance_cgroup() + "/sessions/" + sid + "/" + leaf +
                        "/cgroup.procs");
    for (pid_t pid; procs >> pid;) pids.push_back(pid);
    return pids;
}

std::string read_first_line(const std::string& path) {
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);
    return line;
}

/// Waits (bounded, only against hangs) until a process named `comm` in the leaf sleeps in
/// pipe_write (anon_pipe_write since 6.14): its pipe is full and nobody reads it.
bool wait_until_blocked_writing(const CorraldProcess& daemon, const std::string& sid,
                                const std::string& leaf, const std::string& comm) {
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (std::chrono::steady_clock::now() < deadline) {
        for (pid_t pid : leaf_pids(daemon, sid, leaf)) {
            const std::string dir = "/proc/" + std::to_string(pid);
            if (read_first_line(dir + "/comm") == comm &&
                read_first_line(dir + "/wchan").find("pipe_write") != std::string::npos)
                return true;
        }
        std::this_thread::sleep_for(20ms);
    }
    return false;
}

/// The whole retained stream `stream` of a process, read through GET .../logs.
std::string read_whole_stream(HttpClient& c, const std::string& s, const std::string& proc,
                              const std::string& stream) {
    std::string all;
    uint64_t offset = 0;
    for (int round = 0; round < 1000; ++round) {
        auto got = c.get(s + "/processes/" + proc + "/logs?stream=" + stream +
                         "&offset=" + std::to_string(offset) + "&limit=1048576");
        EXPECT_EQ(got.status, 200u) << got.body;
        if (got.status != 200u) break;
        const json chunk = got.json();
        EXPECT_EQ(chunk["skipped"], 0u) << chunk.dump().substr(0, 200);
        all += chunk["data"].get<std::string>();
        const uint64_t next = chunk["nextOffset"].get<uint64_t>();
        if (next == offset) break;
        offset = next;
    }
    return all;
}

std::string seq_output(unsigned last) {
    std::string expected;
    for (unsigned i = 1; i <= last; ++i) expected += std::to_string(i) + "\n";
    return expected;
}

// Issue 12.2: "output written while the daemon was down is not lost". The writer starts only once
// corrald is dead (it waits for a file the test makes then), writes ~3 MB — three times what its
// pipe holds — and blocks on the full pipe: kept by the session's holder (a keeper for `none`), so
// never SIGPIPE. After the restart every byte is read, byte-exact, in order.
TEST(DaemonRestart, OutputWrittenWhileTheDaemonWasDownIsReadByteExactAfterTheRestart) {
    std::string why;
    if (!corrald_can_run(why)) GTEST_SKIP() << why;
    constexpr unsigned kLast = 450000;  // seq 1 450000: 3,038,895 bytes
    const std::string expected = seq_output(kLast);
    ASSERT_GT(expected.size(), 2u << 20);  // more than twice what the 1 MiB pipe holds
    for (const char* policy : {"none", "default"}) {
        SCOPED_TRACE(policy);
        CorraldProcess daemon;
        ASSERT_TRUE(daemon.ready()) << daemon.log();
        HttpClient c = daemon.client();
        auto made = c.post("/v1/sessions", {{"policy", policy}});
        ASSERT_EQ(made.status, 201u) << made.body;
        const std::string sid = made.json()["id"];
        const std::string s = "/v1/sessions/" + sid;
        const std::string root = c.get(s).json()["root"];
        auto spawned = c.post(
            s + "/processes",
            {{"command", "while [ ! -e go ]; do sleep 0.02; done; seq 1 " + std::to_string(kLast) +
                             "; s=$?; echo seq-status=$s >&2; exit $s"}});
        ASSERT_EQ(spawned.status, 201u) << spawned.body;
        daemon.kill_hard();
        { std::ofstream(root + "/go") << "go"; }
        ASSERT_TRUE(wait_until_blocked_writing(daemon, sid, "p1", "seq"))
            << "seq never blocked on its full pipe";
        ASSERT_TRUE(daemon.start()) << daemon.log();

        const json record = process_of(c.get(s).json(), "p1");
        EXPECT_EQ(record["outputResumed"], true) << record;
        const json final_record = wait_final(c, s, "p1");
        EXPECT_EQ(final_record["finished"], true) << final_record;
        // Not our child after the restart: its exit status is unknown, but its stderr says how
        // seq ended (141 had it died of SIGPIPE).
        EXPECT_EQ(read_whole_stream(c, s, "p1", "stderr"), "seq-status=0\n");
        const std::string out = read_whole_stream(c, s, "p1", "stdout");
        EXPECT_EQ(out.size(), expected.size());
        EXPECT_TRUE(out == expected) << "stdout differs from seq 1 " << kLast;
        EXPECT_EQ(final_record["output"]["stdout"]["bytes"], expected.size());
        EXPECT_EQ(c.del(s).status, 200u);
    }
}

// A slot the holder could not fill (its RLIMIT_NOFILE lowered, as a process of the session with
// CAP_SYS_RESOURCE in its user namespace could do with prlimit) means "not held": the restart
// adopts the process without its output and says so, and nothing crashes.
TEST(DaemonRestart, AHolderThatCouldNotKeepTheOutputMeansOutputNotResumed) {
    std::string why;
    if (!corrald_can_run(why)) GTEST_SKIP() << why;
    CorraldProcess daemon;
    ASSERT_TRUE(daemon.ready()) << daemon.log();
    HttpClient c = daemon.client();
    auto made = c.post("/v1/sessions", {{"policy", "default"}});
    ASSERT_EQ(made.status, 201u) << made.body;
    const std::string sid = made.json()["id"];
    const std::string s = "/v1/sessions/" + sid;
    const std::vector<pid_t> holder = leaf_pids(daemon, sid, "holder");
    ASSERT_EQ(holder.size(), 1u);
    const rlimit low{16, 16};  // every slot is 16 or above
    ASSERT_EQ(::prlimit(holder[0], RLIMIT_NOFILE, &low, nullptr), 0) << std::strerror(errno);
    // It writes nothing: an unkept pipe would give a writer SIGPIPE once the daemon is gone.
    auto spawned = c.post(s + "/processes", {{"argv", {"sleep", "600"}}});
    ASSERT_EQ(spawned.status, 201u) << spawned.body;
    daemon.kill_hard();
    ASSERT_TRUE(daemon.start()) << daemon.log();
    const json record = process_of(c.get(s).json(), "p1");
    EXPECT_EQ(record["status"], "running") << record;
    EXPECT_EQ(record["outputResumed"], false) << record;
    EXPECT_EQ(record["outputLost"], true) << record;
    EXPECT_NE(daemon.log().find("output not resumed"), std::string::npos) << daemon.log();
    // The session works on: a new process runs (and is simply not held).
    auto ran = c.post(s + "/run", {{"command", "echo after"}});
    ASSERT_EQ(ran.status, 200u) << ran.body;
    EXPECT_EQ(ran.json()["stdout"], "after\n");
    EXPECT_EQ(c.del(s).status, 200u);
}

// A client that streamed a process before the restart and resumes after it gets the rest — what
// the process wrote while the daemon was down — and then a truthful end event. The resumed
// stream's start event says offsets start at 0 again.
TEST(DaemonRestart, AStreamResumedAfterTheRestartGetsTheRestAndATruthfulFinalEvent) {
    std::string why;
    if (!corrald_can_run(why)) GTEST_SKIP() << why;
    CorraldProcess daemon;
    ASSERT_TRUE(daemon.ready()) << daemon.log();
    HttpClient c = daemon.client();
    auto made = c.post("/v1/sessions", {{"policy", "none"}});
    ASSERT_EQ(made.status, 201u);
    const std::string s = "/v1/sessions/" + made.json()["id"].get<std::string>();
    const std::string root = c.get(s).json()["root"];
    auto spawned = c.post(s + "/processes", {{"command",
                                              "echo first; while [ ! -e go ]; do sleep 0.02; done; "
                                              "echo second; exec sleep 600"}});
    ASSERT_EQ(spawned.status, 201u);
    uint64_t offset = 0;
    HttpClient streamer = daemon.client();
    streamer.stream_lines("GET", s + "/processes/p1/stream", "", {}, [&](const std::string& line) {
        const json event = json::parse(line);
        if (event["type"] != "stdout") return true;
        offset = event["offset"].get<uint64_t>() + event["data"].get<std::string>().size();
        return false;  // mid-stream: the daemon dies under it
    });
    ASSERT_EQ(offset, 6u);
    daemon.kill_hard();
    { std::ofstream(root + "/go") << "go"; }  // "second" is written while the daemon is down
    ASSERT_TRUE(daemon.start()) << daemon.log();

    const json record = c.get(s + "/processes/p1").json();
    ASSERT_EQ(record["outputResumed"], true) << record;
    json start;
    std::string rest;
    HttpClient again = daemon.client();
    again.stream_lines("GET", s + "/processes/p1/stream?offset=0", "", {},
                       [&](const std::string& line) {
                           const json event = json::parse(line);
                           if (event["type"] == "start") start = event;
                           if (event["type"] == "stdout") rest += event["data"].get<std::string>();
                           return rest.size() < 7;
                       });
    EXPECT_EQ(start["outputResumed"], true) << start;
    EXPECT_EQ(rest, "second\n");
    ASSERT_EQ(c.del(s + "/processes/p1?force=true").status, 200u);
    wait_final(c, s, "p1");
    json last;
    again.stream_lines("GET", s + "/processes/p1/stream?offset=7", "", {},
                       [&](const std::string& line) {
                           last = json::parse(line);
                           return true;
                       });
    EXPECT_EQ(last["type"], "exit") << last;
    EXPECT_EQ(last["status"], "killed") << last;
    EXPECT_EQ(last["output"]["stdout"]["bytes"], 7u) << last;
    EXPECT_EQ(c.del(s).status, 200u);
}

// A terminal's pty master is kept by the holder too: after the restart the terminal is the same
// terminal — what it printed while the daemon was down is there, and typing into it works.
TEST(DaemonRestart, ATerminalIsReattachedAfterTheRestart) {
    std::string why;
    if (!corrald_can_run(why)) GTEST_SKIP() << why;
    for (const char* policy : {"none", "default"}) {
        SCOPED_TRACE(policy);
        CorraldProcess daemon;
        ASSERT_TRUE(daemon.ready()) << daemon.log();
        HttpClient c = daemon.client();
        auto made = c.post("/v1/sessions", {{"policy", policy}});
        ASSERT_EQ(made.status, 201u) << made.body;
        const std::string s = "/v1/sessions/" + made.json()["id"].get<std::string>();
        const std::string root = c.get(s).json()["root"];
        auto started = c.post(s + "/terminals",
                              {{"command",
                                "while [ ! -e go ]; do sleep 0.02; done; echo written-while-down; "
                                ": > written; read line; echo got-$line; exec sleep 600"},
                               {"cols", 80},
                               {"rows", 24}});
        ASSERT_EQ(started.status, 201u) << started.body;
        const std::string proc = started.json()["id"];
        daemon.kill_hard();
        { std::ofstream(root + "/go") << "go"; }
        const auto deadline = std::chrono::steady_clock::now() + 60s;
        while (!std::filesystem::exists(root + "/written") &&
               std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(20ms);
        ASSERT_TRUE(std::filesystem::exists(root + "/written"));
        ASSERT_TRUE(daemon.start()) << daemon.log();

        const json record = c.get(s + "/processes/" + proc).json();
        EXPECT_EQ(record["terminal"], true) << record;
        EXPECT_EQ(record["outputResumed"], true) << record;
        EXPECT_NE(read_whole_stream(c, s, proc, "stdout").find("written-while-down"),
                  std::string::npos);
        auto typed = c.request("POST", s + "/processes/" + proc + "/stdin", "hello\n");
        ASSERT_EQ(typed.status, 200u) << typed.body;
        std::string seen;
        const auto answer_deadline = std::chrono::steady_clock::now() + 30s;
        while (seen.find("got-hello") == std::string::npos &&
               std::chrono::steady_clock::now() < answer_deadline) {
            std::this_thread::sleep_for(20ms);
            seen = read_whole_stream(c, s, proc, "stdout");
        }
        EXPECT_NE(seen.find("got-hello"), std::string::npos) << seen;
        EXPECT_EQ(c.del(s + "/processes/" + proc + "?force=true").status, 200u);
        EXPECT_EQ(c.del(s).status, 200u);
    }
}

// --keep-output=off is the old trade: no keeper, and a process adopted after a restart has no
// output any more; a stream says so and ends rather than hold the client.
TEST(DaemonRestart, WithKeepOutputOffAResumedStreamEndsWithDaemonRestart) {
    std::string why;
    if (!corrald_can_run(why)) GTEST_SKIP() << why;
    CorraldProcess daemon({"--keep-output=off"});
    ASSERT_TRUE(daemon.ready()) << daemon.log();
    HttpClient c = daemon.client();
    auto made = c.post("/v1/sessions", {{"policy", "none"}});
    ASSERT_EQ(made.status, 201u);
    const std::string sid = made.json()["id"];
    const std::string s = "/v1/sessions/" + sid;
    EXPECT_TRUE(leaf_pids(daemon, sid, "holder").empty()) << "a keeper with --keep-output=off";
    auto spawned = c.post(s + "/processes", {{"command", "echo first; exec sleep 600"}});
    ASSERT_EQ(spawned.status, 201u);
    uint64_t offset = 0;
    HttpClient streamer = daemon.client();
    streamer.stream_lines("GET", s + "/processes/p1/stream", "", {}, [&](const std::string& line) {
        const json event = json::parse(line);
        if (event["type"] != "stdout") return true;
        offset = event["offset"].get<uint64_t>() + event["data"].get<std::string>().size();
        return false;  // mid-stream: the daemon dies under it
    });
    ASSERT_EQ(offset, 6u);
    daemon.kill_hard();
    ASSERT_TRUE(daemon.start()) << daemon.log();

    auto final_event = [&] {
        json last;
        HttpClient again = daemon.client();
        const unsigned status =
            again.stream_lines("GET", s + "/processes/p1/stream?offset=" + std::to_string(offset),
                               "", {}, [&](const std::string& line) {
                                   last = json::parse(line);
                                   return true;
                               });
        EXPECT_EQ(status, 200u);
        return last;
    };
    EXPECT_EQ(c.get(s + "/processes/p1").json()["outputResumed"], false);
    json last = final_event();
    EXPECT_EQ(last["type"], "error") << last;
    EXPECT_EQ(last["code"], "daemon-restart") << last;
    EXPECT_EQ(last["running"], true) << last;
    ASSERT_EQ(c.del(s + "/processes/p1?force=true").status, 200u);
    wait_final(c, s, "p1");
    last = final_event();
    EXPECT_EQ(last["type"], "exit") << last;
    EXPECT_EQ(last["status"], "killed") << last;
    EXPECT_EQ(c.del(s).status, 200u);
}

}  // namespace
}  // namespace corral
