// corrald under load and faults (issue 12): many sessions ended at once must never hang the
// event loop, a crash must never stop the next start nor leave anything of corral's unowned.

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <thread>

#include "base/directory_listing.hpp"
#include "base/file_io.hpp"
#include "support/corrald_process.hpp"
#include "support/crash_workload.hpp"
#include "support/http_client.hpp"

namespace corral {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using testing::corrald_can_run;
using testing::CorraldProcess;
using testing::crash_workload;
using testing::CrashLedger;
using testing::HttpClient;
using testing::orphaned_processes;
using testing::populated_sessions;
using testing::unowned;

/// How many descriptors `pid` has open.
size_t open_descriptors(pid_t pid) {
    size_t n = 0;
    std::error_code error;
    for (auto it =
             std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", error);
         !error && it != std::filesystem::directory_iterator(); it.increment(error))
        ++n;
    return n;
}

/// Runs `work(t, progress)` on `threads` threads, each calling `progress()` after every request
/// it got an answer to. Returns false when they are not all done and none made progress for
/// `stall`: a hang, told apart from a slow machine (an emulated kernel takes minutes for what
/// takes seconds natively, so no bound on the whole run can say which it is). Then the daemon is
/// killed, which makes every blocked request fail, and the threads are joined.
bool run_unless_stalled(CorraldProcess& daemon, size_t threads, std::chrono::seconds stall,
                        const std::function<void(size_t, const std::function<void()>&)>& work) {
    std::mutex mutex;
    std::condition_variable cv;
    size_t done = 0;
    uint64_t answers = 0;
    const std::function<void()> progress = [&] {
        std::lock_guard lock(mutex);
        ++answers;
        cv.notify_all();
    };
    std::vector<std::thread> pool;
    for (size_t i = 0; i < threads; ++i) {
        pool.emplace_back([&, i] {
            try {
                work(i, progress);
            } catch (const std::exception&) {
                // A request failed (the daemon was killed below): the thread just ends.
            }
            std::lock_guard lock(mutex);
            ++done;
            cv.notify_all();
        });
    }
    bool finished = false;
    {
        std::unique_lock lock(mutex);
        for (;;) {
            const uint64_t seen = answers;
            const bool moved =
                cv.wait_for(lock, stall, [&] { return done == threads || answers != seen; });
            if (done == threads) {
                finished = true;
                break;
            }
            if (!moved) break;
        }
    }
    if (!finished) daemon.kill_hard();
    for (auto& thread : pool) thread.join();
    return finished;
}

// Issue 12.1: with a pid namespace, the holder (PID 1) exits only once every process of the
// namespace is reaped, and the session's main processes are corrald's children, reaped on its
// event loop. A blocking wait for the holder on that loop deadlocked the daemon (4 of 5 runs of
// 500 mixed sessions ended by 8 parallel DELETEs). Each round here creates sessions of both
// kinds with a running process each (a zombie of corrald's inside the namespace when it ends),
// ends them from 8 threads at once while a ninth keeps asking /v1/health, and checks everything
// ended and nothing is left.
//
// A round creates 160 sessions where the machine is quick (natively ~10 s a round at a host load
// of 10: the count the deadlock was found and fixed with); where it is slow (the pure-v2 VM's
// emulated kernel takes ~1 s a session, and three rounds of 160 overran ctest's 600 s) creation
// stops once a round has spent kCreationBudget and holds at least kMinSessions (48 there, three
// rounds in ~230 s): the measured rate sets the count, the property checked (every DELETE
// answered, /v1/health answering meanwhile, nothing left, the descriptors flat) stays whole.
// Each round prints how many it ended.
TEST(DaemonRobust, HundredsOfMixedSessionsEndedInParallelNeverHang) {
    std::string why;
    if (!corrald_can_run(why)) GTEST_SKIP() << why;
    CorraldProcess daemon;
    ASSERT_TRUE(daemon.ready()) << "corrald did not start:\n" << daemon.log();
    constexpr size_t kRounds = 3;
    constexpr size_t kSessions = 160;
    constexpr size_t kDeleters = 8;
    constexpr size_t kCreators = 4;
    // At least 6 sessions for each deleting thread, ending concurrently with the others.
    constexpr size_t kMinSessions = 6 * kDeleters;
    constexpr auto kCreationBudget = 40s;
    const size_t fds_at_start = open_descriptors(daemon.pid());
    for (size_t round = 0; round < kRounds; ++round) {
        std::vector<std::string> ids(kSessions);
        std::atomic<size_t> created_failures{0};
        const auto creation_ends = std::chrono::steady_clock::now() + kCreationBudget;
        // Created from 4 threads too, so creation interleaves with the loop's other work.
        ASSERT_TRUE(run_unless_stalled(
            daemon, kCreators, 60s,
            [&](size_t t, const auto& progress) {
                HttpClient c = daemon.client();
                for (size_t i = t; i < kSessions; i += kCreators) {
                    // Thread t's next index is i: below kMinSessions it always creates.
                    if (i >= kMinSessions && std::chrono::steady_clock::now() > creation_ends)
                        break;
                    const char* policy = i % 2 == 0 ? "none" : "default";
                    auto res = c.post("/v1/sessions", {{"policy", policy}});
                    progress();
                    if (res.status != 201) {
                        ++created_failures;
                        continue;
                    }
                    ids[i] = res.json()["id"];
                    // A background job and a foreground one: the main process and an orphan.
                    auto spawned = c.post("/v1/sessions/" + ids[i] + "/processes",
                                          {{"command", "sleep 600 & exec sleep 600"}});
                    progress();
                    if (spawned.status != 201) ++created_failures;
                }
            }))
            << "creating sessions hung (round " << round << "):\n"
            << daemon.log();
        ASSERT_EQ(created_failures.load(), 0u) << daemon.log();
        const size_t sessions = static_cast<size_t>(
            std::count_if(ids.begin(), ids.end(), [](const auto& id) { return !id.empty(); }));
        ASSERT_GE(sessions, kMinSessions);
        std::printf("round %zu: %zu sessions, ended by %zu threads at once\n", round, sessions,
                    kDeleters);

        std::atomic<bool> deleting{true};
        std::atomic<size_t> health_answers{0};
        std::atomic<size_t> delete_failures{0};
        std::thread health([&] {
            try {
                HttpClient c = daemon.client();
                while (deleting) {
                    if (c.get("/v1/health").status == 200) ++health_answers;
                    std::this_thread::sleep_for(5ms);
                }
            } catch (const std::exception&) {
            }
        });
        const bool ended =
            run_unless_stalled(daemon, kDeleters, 60s, [&](size_t t, const auto& progress) {
                HttpClient c = daemon.client();
                for (size_t i = t; i < kSessions; i += kDeleters) {
                    if (ids[i].empty()) continue;  // not created: the creation budget was spent
                    auto res = c.del("/v1/sessions/" + ids[i]);
                    progress();
                    if (res.status != 200 || res.json()["alreadyEnded"] != false) ++delete_failures;
                }
            });
        deleting = false;
        health.join();
        ASSERT_TRUE(ended) << "corrald hung ending " << sessions << " sessions (round " << round
                           << "):\n"
                           << daemon.log();
        EXPECT_EQ(delete_failures.load(), 0u);
        EXPECT_GT(health_answers.load(), 0u) << "/v1/health never answered while ending";
        HttpClient c = daemon.client();
        auto listed = c.get("/v1/sessions");
        ASSERT_EQ(listed.status, 200u);
        EXPECT_TRUE(listed.json()["sessions"].empty()) << listed.body;
        const auto left = daemon.footprint();
        EXPECT_TRUE(left.empty()) << "round " << round << " left " << left.describe();
        // Every holder, process and orphan reaped: holders and launches are children of the
        // launch worker's thread, which the orphan walk does not look at (child_reaper.hpp), so
        // one nobody handed over would stay a zombie for corrald's life.
        const auto reaped_by = std::chrono::steady_clock::now() + 5s;
        while (daemon.zombie_children() != 0 && std::chrono::steady_clock::now() < reaped_by)
            std::this_thread::sleep_for(20ms);
        EXPECT_EQ(daemon.zombie_children(), 0u) << "round " << round << ": unreaped children";
        // Ended sessions stay readable for a minute, but hold no descriptors meanwhile: each
        // kept its id-range lock and its file service's root open, ~1.5 per session (found by
        // tests/bench/daemon_stress.cpp: 18 descriptors before 500 sessions, 771 after them).
        // The slack is for the test's own connections.
        EXPECT_LE(open_descriptors(daemon.pid()), fds_at_start + 16)
            << "round " << round << ": corrald holds descriptors of ended sessions";
    }
    const int status = daemon.stop(60s);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << daemon.log();
}

// Issue 12.2 and 12.7: kill -9 at random points of a scripted workload (creation, spawn, run,
// upload, DELETE, idle), then start again with the same arguments. Every start must work (a
// stale socket and instance cgroup are not in the way). Every session a client was told about
// whose cgroup still held processes comes back (unless a DELETE of it was under way): same id,
// its full token works, its running processes are killable, and a DELETE of it leaves nothing.
// Every other one is listed truthfully (ended, "daemon-restart") or gone, and nothing of
// corral's on the host belongs to no listed session.
TEST(DaemonRobust, KilledAtRandomPointsRestartsAndLeavesNothingUnowned) {
    std::string why;
    if (!corrald_can_run(why)) GTEST_SKIP() << why;
    CorraldProcess daemon;
    ASSERT_TRUE(daemon.ready()) << "corrald did not start:\n" << daemon.log();
    const unsigned seed = std::random_device{}();
    std::mt19937 random(seed);
    SCOPED_TRACE("seed " + std::to_string(seed));
    constexpr size_t kRounds = 12;
    constexpr size_t kWorkers = 3;
    size_t adopted_total = 0;
    for (size_t round = 0; round < kRounds; ++round) {
        SCOPED_TRACE("round " + std::to_string(round));
        CrashLedger ledger;
        std::vector<std::thread> workers;
        for (size_t w = 0; w < kWorkers; ++w) {
            workers.emplace_back([&, w] {
                try {
                    crash_workload(daemon, w, round, ledger);
                } catch (const std::exception&) {
                    // the daemon was killed under this client
                }
            });
        }
        // The crash comes at a random moment after the workload has a session that was not
        // being ended: a slow kernel (the pure-v2 VM) may take longer than the whole random span
        // to create the first one, and then no round crashed with a session running.
        const auto bound = std::chrono::steady_clock::now() + 120s;
        for (;;) {
            {
                std::lock_guard lock(ledger.mutex);
                if (ledger.ids.size() > ledger.deleting.size()) break;
            }
            if (std::chrono::steady_clock::now() > bound) break;  // the checks below say why
            std::this_thread::sleep_for(5ms);
        }
        std::this_thread::sleep_for(
            std::chrono::milliseconds(std::uniform_int_distribution<int>(20, 700)(random)));
        daemon.kill_hard();
        for (auto& worker : workers) worker.join();
        const std::set<std::string> live = populated_sessions(daemon);

        ASSERT_TRUE(daemon.start()) << "restart " << round << " failed:\n" << daemon.log();
        HttpClient c = daemon.client();
        auto listed = c.get("/v1/sessions");
        ASSERT_EQ(listed.status, 200u) << listed.body;
        std::set<std::string> active;
        const json listing = listed.json();
        for (const auto& s : listing["sessions"]) active.insert(s["id"].get<std::string>());
        const auto stray = unowned(daemon, active);
        EXPECT_TRUE(stray.empty()) << "owned by no listed session: " << stray.front() << "\n"
                                   << daemon.log();
        // A process anywhere on the host in this instance's cgroups that no listed session holds
        // (in a dead session's cgroup, or the old daemon's own) is an orphan.
        const auto orphans = orphaned_processes(daemon, active);
        EXPECT_TRUE(orphans.empty()) << orphans.size() << " orphaned processes, the first "
                                     << orphans.front().pid << " in " << orphans.front().where;
        std::vector<std::string> restart_ended;
        for (const auto& id : ledger.ids) {
            SCOPED_TRACE(id);
            auto got = c.get("/v1/sessions/" + id);
            if (live.count(id) && !ledger.deleting.count(id)) {
                EXPECT_EQ(got.status, 200u) << got.body;
                EXPECT_EQ(got.json()["state"], "active") << got.body << "\n" << daemon.log();
            }
            if (got.status == 404) continue;  // ended and removed before the crash
            ASSERT_EQ(got.status, 200u) << got.body;
            if (got.json()["state"] == "ended") {
                EXPECT_EQ(got.json()["endReason"], "daemon-restart") << got.body;
                restart_ended.push_back(id);
                continue;
            }
            ASSERT_TRUE(active.count(id)) << got.body;
            // The same full token; running processes are killable; DELETE leaves nothing.
            const std::string s = "/v1/sessions/" + id;
            auto with_token = c.get(s, testing::bearer(ledger.tokens[id]));
            EXPECT_EQ(with_token.status, 200u) << with_token.body;
            const json record = got.json();
            for (const auto& p : record["processes"]) {
                if (!p["running"].get<bool>()) continue;
                const std::string proc = p["id"];
                EXPECT_EQ(c.del(s + "/processes/" + proc + "?force=true").status, 200u);
                auto waited = c.get(s + "/processes/" + proc + "/wait?timeoutMs=30000");
                EXPECT_EQ(waited.json()["finished"], true) << waited.body;
                EXPECT_EQ(waited.json()["status"], "killed") << waited.body;
            }
            auto ended = c.del(s, testing::bearer(ledger.tokens[id]));
            EXPECT_EQ(ended.status, 200u) << ended.body;
            ++adopted_total;
            active.erase(id);
        }
        // A session whose 201 the crash swallowed was journalled all the same (the record is
        // written before the answer): it is back, though no client knows it. It ends too.
        for (const auto& id : active) {
            auto ended = c.del("/v1/sessions/" + id);
            EXPECT_EQ(ended.status, 200u) << ended.body;
        }
        const auto left = daemon.footprint();
        EXPECT_TRUE(left.empty()) << "after the adopted sessions ended corral still has "
                                  << left.describe() << "\n"
                                  << daemon.log();
        if (!restart_ended.empty()) {
            // The id of a session the restart ended is free again, and the session it names works.
            const std::string id = restart_ended.back();
            auto again = c.post("/v1/sessions", {{"id", id}, {"policy", "none"}});
            ASSERT_EQ(again.status, 201u) << again.body;
            auto ran = c.post("/v1/sessions/" + id + "/run", {{"argv", {"/bin/true"}}});
            EXPECT_EQ(ran.status, 200u) << ran.body;
            EXPECT_EQ(c.del("/v1/sessions/" + id).status, 200u);
        }
    }
    EXPECT_GT(adopted_total, 0u) << "no round crashed with a session running";
    const int status = daemon.stop(60s);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << daemon.log();
    EXPECT_TRUE(daemon.footprint().empty()) << daemon.footprint().describe();
}

// Issue 12.3: finished process records are kept up to a per-session cap, oldest dropped first;
// a dropped id answers 410 Gone with a message saying why, and the session record stays small.
TEST(DaemonRobust, FinishedRecordsBeyondTheCapAnswer410AndTheSessionStaysSmall) {
    std::string why;
    if (!corrald_can_run(why)) GTEST_SKIP() << why;
    constexpr size_t kCap = 16;
    CorraldProcess daemon({"--max-process-records", std::to_string(kCap)});
    ASSERT_TRUE(daemon.ready()) << "corrald did not start:\n" << daemon.log();
    HttpClient c = daemon.client();
    auto created = c.post("/v1/sessions", {{"policy", "none"}});
    ASSERT_EQ(created.status, 201u) << created.body;
    const std::string s = "/v1/sessions/" + created.json()["id"].get<std::string>();
    constexpr size_t kRuns = 4 * kCap;
    for (size_t i = 0; i < kRuns; ++i) {
        auto ran = c.post(s + "/run", {{"argv", {"/bin/echo", std::string(512, 'o')}}});
        ASSERT_EQ(ran.status, 200u) << ran.body;
    }
    auto listed = c.get(s + "/processes");
    ASSERT_EQ(listed.status, 200u);
    const auto processes = listed.json()["processes"];
    EXPECT_EQ(processes.size(), kCap) << listed.body;
    EXPECT_EQ(processes.back()["id"], "p" + std::to_string(kRuns));  // the newest are kept
    auto oldest = c.get(s + "/processes/p1");
    EXPECT_EQ(oldest.status, 410u) << oldest.body;
    EXPECT_EQ(oldest.error_code(), "gone");
    EXPECT_NE(oldest.error_message().find("dropped"), std::string::npos) << oldest.body;
    EXPECT_EQ(c.get(s + "/processes/p1/logs").status, 410u);
    EXPECT_EQ(c.get(s + "/processes/p" + std::to_string(kRuns)).status, 200u);
    EXPECT_EQ(c.get(s + "/processes/p" + std::to_string(kRuns + 1)).status, 404u);  // never was
    auto session = c.get(s);
    ASSERT_EQ(session.status, 200u);
    EXPECT_EQ(session.json()["processes"].size(), kCap);
    EXPECT_LT(session.body.size(), kCap * 4096) << "GET session grows with the runs";
    EXPECT_EQ(c.del(s).status, 200u);
}

// Issue 12.6: `sh -c CMD` forks CMD right after its exec; a DELETE at that moment used to SIGTERM
// the shell but miss the child it was forking, and the session then waited the whole grace
// period for it. The grace here is 30 s, so a miss shows as a DELETE of 30 s; the bound is half.
TEST(DaemonRobust, DeleteRightAfterSpawnDoesNotWaitTheGraceForAChildForkedMeanwhile) {
    std::string why;
    if (!corrald_can_run(why)) GTEST_SKIP() << why;
    CorraldProcess daemon;
    ASSERT_TRUE(daemon.ready()) << "corrald did not start:\n" << daemon.log();
    HttpClient c = daemon.client();
    for (int i = 0; i < 20; ++i) {
        auto created = c.post(
            "/v1/sessions", {{"policyYaml", "name: g\nextends: none\ntimeouts: { grace: 30s }\n"}});
        ASSERT_EQ(created.status, 201u) << created.body;
        const std::string s = "/v1/sessions/" + created.json()["id"].get<std::string>();
        ASSERT_EQ(c.post(s + "/processes", {{"command", "sleep 600"}}).status, 201u);
        auto ended = c.del(s);
        ASSERT_EQ(ended.status, 200u) << ended.body;
        EXPECT_LT(ended.json()["durationMs"].get<uint64_t>(), 15000u) << ended.body;
    }
}

// Issue 12 item 1: a spawn waited on corrald's loop for the child's exec report for as long as it
// took, so a child stopped or frozen before execve froze every session's API (first for ever,
// then for the 10 s setup limit of each such spawn). Here the test freezes one session's cgroup
// (corral's own, made for this test's daemon), so the child is born frozen and never reaches
// execve. While that spawn is outstanding, another session's run and /v1/health are answered (the
// loop is not waiting: process_launch.cpp); the spawn itself fails once the setup limit (10 s
// without CPU) has passed, as a `setup-failed` record naming the reason, with the child killed
// and its leaf gone. On the previous corrald (a bounded but blocking wait) the other requests are
// answered only after the spawn: the ordering checks fail.
TEST(DaemonRobust, ASpawnOfAChildFrozenBeforeExecNeverHoldsOtherRequestsAndFailsAfterItsLimit) {
    std::string why;
    if (!corrald_can_run(why)) GTEST_SKIP() << why;
    CorraldProcess daemon;
    ASSERT_TRUE(daemon.ready()) << "corrald did not start:\n" << daemon.log();
    HttpClient c = daemon.client();
    c.set_idle_timeout(120s);
    auto stuck_session = c.post("/v1/sessions", {{"policy", "none"}});
    ASSERT_EQ(stuck_session.status, 201u) << stuck_session.body;
    auto other_session = c.post("/v1/sessions", {{"policy", "none"}});
    ASSERT_EQ(other_session.status, 201u) << other_session.body;
    const std::string sid = stuck_session.json()["id"].get<std::string>();
    const std::string other = "/v1/sessions/" + other_session.json()["id"].get<std::string>();
    const std::string cgroup = daemon.instance_cgroup() + "/sessions/" + sid;
    ASSERT_TRUE(write_file(cgroup + "/cgroup.freeze", "1"));

    std::atomic<bool> spawn_answered{false};
    std::atomic<bool> answered_during_spawn{false};
    std::string other_output;
    std::thread prober([&] {
        // Once the spawn is outstanding: its child exists in a leaf of the frozen session.
        const auto give_up = std::chrono::steady_clock::now() + 60s;
        while (!spawn_answered && std::chrono::steady_clock::now() < give_up &&
               !std::filesystem::exists(cgroup + "/p1"))
            std::this_thread::sleep_for(10ms);
        HttpClient h = daemon.client();
        h.set_idle_timeout(120s);
        const bool healthy = h.get("/v1/health").status == 200u;
        auto ran = h.post(other + "/run", {{"argv", {"/bin/echo", "fine"}}});
        if (ran.status == 200u) other_output = ran.json()["stdout"].get<std::string>();
        answered_during_spawn = healthy && ran.status == 200u && !spawn_answered;
    });
    auto spawned = c.post("/v1/sessions/" + sid + "/processes", {{"argv", {"/bin/true"}}});
    spawn_answered = true;
    prober.join();
    EXPECT_TRUE(answered_during_spawn)
        << "another session's run and /v1/health were not answered while the spawn was stuck";
    EXPECT_EQ(other_output, "fine\n");
    // A setup failure is a record, as for any other step (status setup-failed, the step in error).
    ASSERT_EQ(spawned.status, 201u) << spawned.body;
    EXPECT_EQ(spawned.json()["status"], "setup-failed") << spawned.body;
    EXPECT_NE(
        spawned.json()["error"].get<std::string>().find("did not reach execve within 10000 ms"),
        std::string::npos)
        << spawned.body;

    // Nothing of the child is left: no process and no leaf in the session's cgroup but the
    // session's own `holder` leaf (a `none` session's output keeper lives there: --keep-output).
    auto procs = read_file(cgroup + "/cgroup.procs");
    ASSERT_TRUE(procs) << procs.error().describe();
    EXPECT_EQ(*procs, "");
    size_t leaves = 0;
    for (const auto& entry : std::filesystem::directory_iterator(cgroup))
        leaves += entry.is_directory() && entry.path().filename() != "holder" ? 1 : 0;
    EXPECT_EQ(leaves, 0u) << "the failed spawn's leaf cgroup is left in " << cgroup;
    ASSERT_TRUE(write_file(cgroup + "/cgroup.freeze", "0"));
    EXPECT_EQ(c.get("/v1/health").status, 200u);
    EXPECT_EQ(c.del("/v1/sessions/" + sid).status, 200u);
    EXPECT_EQ(c.del(other).status, 200u);
}

/// The first pid listed in `procs` (a cgroup.procs file), once there is one: waits until then,
/// or until `given_up` is set or 60 s passed (-1).
pid_t first_pid_in(const std::string& procs, const std::atomic<bool>& given_up) {
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (!given_up && std::chrono::steady_clock::now() < deadline) {
        if (auto listed = read_file(procs); listed && !listed->empty()) return std::stoi(*listed);
        std::this_thread::sleep_for(5ms);
    }
    return -1;
}

/// Whether `pid` is gone, or at least no longer a process of session `sid`'s cgroup.
bool gone_from_session(pid_t pid, const std::string& sid) {
    auto cgroup = read_file("/proc/" + std::to_string(pid) + "/cgroup");
    return !cgroup || cgroup->find("/sessions/" + sid + "/") == std::string::npos;
}

// Issue 12 item 1: creating a session waited on corrald's loop for its namespace holder's setup
// report (Sandbox::wait_until_ready, a blocking poll of up to the 10 s setup limit, longer while
// the holder used CPU), so a holder stopped, frozen or stuck in a mount froze every session's API
// for that long. Here the holder is born frozen (the sessions cgroup is frozen while the creation
// starts, so the new session's cgroups are born frozen; once the holder is in its leaf, the freeze
// moves to that session's own cgroup and every other session runs again). While the creation is
// stuck, /v1/health and another session's run are answered, the session is neither listed nor
// reachable, and its id is taken (409); after its limit the creation fails naming the step, and
// nothing of it is left: no cgroup, no holder, no state directory, no journal record, and the id
// can be used again. On the previous corrald the other requests are answered only after the
// creation failed: the ordering check fails.
TEST(DaemonRobust, ASessionWhoseHolderIsFrozenBeforeReadyNeverHoldsOtherRequestsAndLeavesNothing) {
    std::string why;
    if (!corrald_can_run(why)) GTEST_SKIP() << why;
    CorraldProcess daemon;
    ASSERT_TRUE(daemon.ready()) << "corrald did not start:\n" << daemon.log();
    HttpClient c = daemon.client();
    c.set_idle_timeout(120s);
    auto other_session = c.post("/v1/sessions", {{"policy", "none"}});
    ASSERT_EQ(other_session.status, 201u) << other_session.body;
    const std::string other = "/v1/sessions/" + other_session.json()["id"].get<std::string>();
    const testing::CorralFootprint before = daemon.footprint();
    const std::string sessions = daemon.instance_cgroup() + "/sessions";
    const std::string stuck = sessions + "/stuck";
    ASSERT_TRUE(write_file(sessions + "/cgroup.freeze", "1"));

    std::atomic<bool> create_answered{false};
    testing::HttpResponse created;
    std::thread creator([&] {
        HttpClient h = daemon.client();
        h.set_idle_timeout(120s);
        created = h.post("/v1/sessions", {{"id", "stuck"}, {"policy", "default"}});
        create_answered = true;
    });
    const pid_t holder = first_pid_in(stuck + "/holder/cgroup.procs", create_answered);
    const bool moved = holder > 0 && write_file(stuck + "/cgroup.freeze", "1").ok();
    (void)write_file(sessions + "/cgroup.freeze", "0");

    const bool healthy = c.get("/v1/health").status == 200u;
    auto ran = c.post(other + "/run", {{"argv", {"/bin/echo", "fine"}}});
    auto listed = c.get("/v1/sessions");
    auto looked_up = c.get("/v1/sessions/stuck");
    auto run_in_stuck = c.post("/v1/sessions/stuck/run", {{"argv", {"/bin/true"}}});
    auto same_id = c.post("/v1/sessions", {{"id", "stuck"}, {"policy", "none"}});
    auto metrics = c.get("/metrics");
    const bool answered_meanwhile = !create_answered;
    creator.join();

    ASSERT_GT(holder, 0) << "the holder never appeared in its leaf: " << created.body;
    ASSERT_TRUE(moved);
    EXPECT_TRUE(answered_meanwhile)
        << "/v1/health and another session's requests were not answered while a creation was stuck";
    EXPECT_TRUE(healthy);
    ASSERT_EQ(ran.status, 200u) << ran.body;
    EXPECT_EQ(ran.json()["stdout"], "fine\n") << ran.body;
    // Starting is not half-usable: not listed, not found, takes no work, its id is taken.
    ASSERT_EQ(listed.status, 200u) << listed.body;
    const json listing = listed.json();
    for (const auto& session : listing["sessions"]) EXPECT_NE(session["id"], "stuck");
    EXPECT_EQ(looked_up.status, 404u) << looked_up.body;
    EXPECT_NE(looked_up.error_message().find("still being created"), std::string::npos)
        << looked_up.body;
    EXPECT_EQ(run_in_stuck.status, 404u) << run_in_stuck.body;
    EXPECT_EQ(same_id.status, 409u) << same_id.body;
    // ... but /metrics counts it, as starting (it used to count only active and ending ones).
    ASSERT_EQ(metrics.status, 200u) << metrics.body;
    EXPECT_NE(metrics.body.find("corral_sessions{state=\"starting\"} 1\n"), std::string::npos)
        << metrics.body;
    EXPECT_NE(metrics.body.find("corral_sessions{state=\"active\"} 1\n"), std::string::npos)
        << metrics.body;
    auto after = c.get("/metrics");
    EXPECT_NE(after.body.find("corral_sessions{state=\"starting\"} 0\n"), std::string::npos)
        << after.body;

    // The creation fails after its limit, naming the step.
    EXPECT_EQ(created.status, 504u) << created.body;
    EXPECT_NE(created.error_message().find("create session stuck: set up: namespaces: namespace "
                                           "holder (killed)"),
              std::string::npos)
        << created.body;
    EXPECT_NE(created.error_message().find("setup report did not come within 10000 ms"),
              std::string::npos)
        << created.body;
    // Nothing is left by the time the error is answered.
    EXPECT_FALSE(std::filesystem::exists(stuck)) << "its cgroup is left";
    EXPECT_TRUE(gone_from_session(holder, "stuck")) << "its holder " << holder << " is left";
    EXPECT_FALSE(std::filesystem::exists(daemon.state_dir() + "/sessions/stuck"));
    EXPECT_EQ(daemon.footprint().describe(), before.describe());
    auto journal = read_file(daemon.state_dir() + "/journal");
    ASSERT_TRUE(journal) << journal.error().describe();
    EXPECT_EQ(journal->find("\"stuck\""), std::string::npos) << *journal;
    // The id is free again, for a session that works.
    auto again = c.post("/v1/sessions", {{"id", "stuck"}, {"policy", "default"}});
    ASSERT_EQ(again.status, 201u) << again.body;
    auto works = c.post("/v1/sessions/stuck/run", {{"argv", {"/bin/echo", "fine"}}});
    ASSERT_EQ(works.status, 200u) << works.body;
    EXPECT_EQ(works.json()["stdout"], "fine\n") << works.body;
    EXPECT_EQ(c.del("/v1/sessions/stuck").status, 200u);
    EXPECT_EQ(c.del(other).status, 200u);
}

// The registry reserves the id of a session being created: of two creations with one id that
// overlap (the first one's holder is held frozen until the second was answered), one gets 201 and
// the other 409 at once, not after the first one settled. On the previous corrald the second
// request was answered only after the first creation's setup limit (it failed, 504) and was then
// itself created into the frozen sessions cgroup (504 again): never 409.
TEST(DaemonRobust, TwoOverlappingCreationsWithOneIdGiveOne201AndOne409) {
    std::string why;
    if (!corrald_can_run(why)) GTEST_SKIP() << why;
    CorraldProcess daemon;
    ASSERT_TRUE(daemon.ready()) << "corrald did not start:\n" << daemon.log();
    HttpClient c = daemon.client();
    c.set_idle_timeout(120s);
    const std::string sessions = daemon.instance_cgroup() + "/sessions";
    ASSERT_TRUE(write_file(sessions + "/cgroup.freeze", "1"));
    std::atomic<bool> first_answered{false};
    testing::HttpResponse first;
    std::thread creator([&] {
        HttpClient h = daemon.client();
        h.set_idle_timeout(120s);
        first = h.post("/v1/sessions", {{"id", "twin"}, {"policy", "default"}});
        first_answered = true;
    });
    const pid_t holder = first_pid_in(sessions + "/twin/holder/cgroup.procs", first_answered);
    auto second = c.post("/v1/sessions", {{"id", "twin"}, {"policy", "default"}});
    const bool answered_while_first_pending = !first_answered;
    (void)write_file(sessions + "/cgroup.freeze", "0");
    creator.join();

    ASSERT_GT(holder, 0) << "the first creation's holder never appeared: " << first.body;
    EXPECT_EQ(second.status, 409u) << second.body;
    EXPECT_EQ(second.error_code(), "exists") << second.body;
    EXPECT_TRUE(answered_while_first_pending) << "the second creation waited for the first";
    ASSERT_EQ(first.status, 201u) << first.body;
    EXPECT_EQ(first.json()["id"], "twin");
    auto listed = c.get("/v1/sessions");
    ASSERT_EQ(listed.status, 200u) << listed.body;
    size_t twins = 0;
    const json listing = listed.json();
    for (const auto& session : listing["sessions"]) twins += session["id"] == "twin" ? 1 : 0;
    EXPECT_EQ(twins, 1u) << listed.body;
    auto ran = c.post("/v1/sessions/twin/run", {{"argv", {"/bin/echo", "one"}}});
    ASSERT_EQ(ran.status, 200u) << ran.body;
    EXPECT_EQ(ran.json()["stdout"], "one\n");
    EXPECT_EQ(c.del("/v1/sessions/twin").status, 200u);
}

/// The bits of a "SigBlk:"-style line of /proc/<pid>/status; nullopt when it cannot be read.
std::optional<uint64_t> signal_mask(pid_t pid, const std::string& field) {
    std::ifstream status("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(status, line)) {
        if (line.rfind(field + ":", 0) == 0) return std::stoull(line.substr(field.size() + 1), nullptr, 16);
    }
    return std::nullopt;
}

// Until execve a launched child is a copy of corrald, signal handlers included; from the moment
// it is in the session's user namespace a same-session process may signal it (and stop it there:
// its pid is in the session's pid namespace). A SIGTERM that reached corrald's handler in that
// copy would be written into asio's signal pipe, which the copy shares with corrald: corrald
// would shut down, ending every session. The reason posix_spawn implementations (glibc's
// spawni.c, musl's posix_spawn.c) block every signal across the clone and reset the handlers
// before unblocking. Here the child is born frozen (its session's cgroup is frozen), so it is
// held at its first instruction: its mask must block SIGTERM there; then it gets SIGTERM and is
// thawed, and corrald must still be serving (on the previous launcher the mask was corrald's own,
// SIGTERM ran corrald's handler, and corrald shut down).
TEST(DaemonRobust, ASignalSentToAChildBeforeExecNeverRunsCorraldsHandlers) {
    std::string why;
    if (!corrald_can_run(why)) GTEST_SKIP() << why;
    CorraldProcess daemon;
    ASSERT_TRUE(daemon.ready()) << "corrald did not start:\n" << daemon.log();
    HttpClient c = daemon.client();
    c.set_idle_timeout(120s);
    auto session = c.post("/v1/sessions", {{"policy", "none"}});
    ASSERT_EQ(session.status, 201u) << session.body;
    const std::string sid = session.json()["id"].get<std::string>();
    const std::string cgroup = daemon.instance_cgroup() + "/sessions/" + sid;
    ASSERT_TRUE(write_file(cgroup + "/cgroup.freeze", "1"));

    std::optional<uint64_t> blocked;
    bool signalled = false;
    std::thread attacker([&] {
        const auto give_up = std::chrono::steady_clock::now() + 60s;
        pid_t child = -1;
        while (child <= 0 && std::chrono::steady_clock::now() < give_up) {
            if (auto procs = read_file(cgroup + "/p1/cgroup.procs"); procs && !procs->empty())
                child = std::stoi(*procs);
            else
                std::this_thread::sleep_for(10ms);
        }
        if (child <= 0) return;
        // Frozen: the mask is the one it was born with, before any of its own code ran.
        for (int i = 0; i < 500 && !blocked; ++i) {
            if (auto state = read_file("/proc/" + std::to_string(child) + "/stat");
                state && state->find(") S ") != std::string::npos)
                blocked = signal_mask(child, "SigBlk");
            else
                std::this_thread::sleep_for(10ms);
        }
        signalled = ::kill(child, SIGTERM) == 0;
        (void)write_file(cgroup + "/cgroup.freeze", "0");
    });
    auto spawned = c.post("/v1/sessions/" + sid + "/processes", {{"argv", {"/bin/sleep", "1000"}}});
    attacker.join();
    ASSERT_TRUE(blocked) << "the child was not seen frozen before execve";
    EXPECT_TRUE(*blocked & (uint64_t{1} << (SIGTERM - 1)))
        << "the child was born with SIGTERM unblocked: SigBlk " << std::hex << *blocked;
    EXPECT_TRUE(signalled);
    ASSERT_EQ(spawned.status, 201u) << spawned.body << daemon.log();
    const std::string proc = spawned.json()["id"].get<std::string>();
    auto waited = c.get("/v1/sessions/" + sid + "/processes/" + proc + "/wait?timeoutMs=60000");
    ASSERT_EQ(waited.status, 200u) << waited.body;
    EXPECT_FALSE(waited.json()["running"].get<bool>()) << waited.body;
    // corrald is still serving: the SIGTERM killed the child (default action), nothing else.
    EXPECT_EQ(::kill(daemon.pid(), 0), 0) << daemon.log();
    EXPECT_EQ(c.get("/v1/health").status, 200u) << daemon.log();
    EXPECT_EQ(daemon.log().find("ending all sessions"), std::string::npos) << daemon.log();
    EXPECT_EQ(c.del("/v1/sessions/" + sid).status, 200u);
}

/// corrald's resident memory (VmRSS) in MiB.
double rss_mib(pid_t pid) {
    std::ifstream status("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(status, line)) {
        if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
    }
    return -1;
}

/// A raw client that sends one request and then reads nothing, with a small receive buffer
/// so little of the answer fits in the socket.
int send_and_never_read(const std::string& socket_path, const std::string& request) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    const int small = 4096;
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::snprintf(address.sun_path, sizeof address.sun_path, "%s", socket_path.c_str());
    if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
        ::send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
            static_cast<ssize_t>(request.size())) {
        ::close(fd);
        return -1;
    }
    return fd;
}

// Issue 12.3: "A client that asks for a large response and does not read it holds ~50 MB per
// request (40 clients took RSS to 2 GB, and 695 MB stayed after they closed)". Before responses
// were streamed, GET .../logs built the 16 MiB read, its 22 MiB base64, the JSON tree and its
// dump and the response body at once and sat in async_write with all of it: 40 such clients
// left corrald at 1,552 MiB after they closed, from 41 MiB at the start (main's build, measured
// here; no client was dropped either: main has no write timeout).
// Now each holds one piece (64 KiB) and what the socket takes, a pass over the range decides
// text or base64 without a copy, and a client that takes nothing for --write-timeout is dropped.
// Measured natively: 25.8 MiB at the start, 30.8 MiB with 40 stalled clients, 31.4 MiB after.
TEST(DaemonRobust, ClientsThatDoNotReadLargeResponsesHoldBoundedMemoryAndAreDropped) {
    std::string why;
    if (!corrald_can_run(why)) GTEST_SKIP() << why;
    CorraldProcess daemon({"--write-timeout", "20s"});
    ASSERT_TRUE(daemon.ready()) << "corrald did not start:\n" << daemon.log();
    HttpClient c = daemon.client();
    auto created = c.post("/v1/sessions", {{"policy", "none"}});
    ASSERT_EQ(created.status, 201u) << created.body;
    const std::string s = "/v1/sessions/" + created.json()["id"].get<std::string>();
    // 16 MiB of random bytes (the output cap of `none`): the log goes as base64, its largest form.
    auto spawned = c.post(s + "/processes", {{"command", "head -c 16777216 /dev/urandom"}});
    ASSERT_EQ(spawned.status, 201u) << spawned.body;
    const std::string p = s + "/processes/" + spawned.json()["id"].get<std::string>();
    auto waited = c.get(p + "/wait?timeoutMs=120000");
    ASSERT_EQ(waited.status, 200u) << waited.body;
    ASSERT_EQ(waited.json()["output"]["stdout"]["bytes"], 16777216) << waited.body;
    // A client that reads gets the whole log, as before.
    auto read = c.get(p + "/logs?limit=16777216");
    ASSERT_EQ(read.status, 200u);
    ASSERT_EQ(read.json()["dataBase64"].get<std::string>().size(), 16777216u / 3 * 4 + 4);
    EXPECT_EQ(read.json()["nextOffset"], 16777216);
    EXPECT_EQ(read.json()["eof"], true);
    read = {};

    const double start = rss_mib(daemon.pid());
    const std::string request =
        "GET " + p + "/logs?limit=16777216 HTTP/1.1\r\nHost: corral\r\n\r\n";
    std::vector<int> stalled;
    for (int i = 0; i < 40; ++i) {
        const int fd = send_and_never_read(daemon.socket_path(), request);
        ASSERT_GE(fd, 0) << "connect/send: " << std::strerror(errno);
        stalled.push_back(fd);
    }
    // Another client is answered at once meanwhile: nothing waits on the stalled ones.
    const auto asked = std::chrono::steady_clock::now();
    auto health = c.get("/v1/health");
    EXPECT_EQ(health.status, 200u);
    EXPECT_LT(std::chrono::steady_clock::now() - asked, 10s);
    // Give every request time to be taken up and stall in its write (each GET is answered by a
    // piece at a time, so that is at once; the wait covers a slow machine).
    double peak = 0;
    for (int i = 0; i < 30; ++i) {
        std::this_thread::sleep_for(100ms);
        peak = std::max(peak, rss_mib(daemon.pid()));
    }
    std::printf("corrald VmRSS: %.1f MiB at start, %.1f MiB peak with 40 stalled clients\n", start,
                peak);
    EXPECT_LT(peak, start + 200) << "40 clients that do not read hold the whole response";
    EXPECT_EQ(c.get("/v1/health").status, 200u);

    // The write timeout drops a client that takes nothing: the daemon closes its end.
    pollfd watch{stalled.front(), POLLRDHUP, 0};
    const int ready = ::poll(&watch, 1, 120000);
    EXPECT_EQ(ready, 1) << "a client that never reads was not dropped after the write timeout";
    EXPECT_TRUE(watch.revents & (POLLRDHUP | POLLHUP)) << watch.revents;

    for (int fd : stalled) ::close(fd);
    double after = rss_mib(daemon.pid());
    for (int i = 0; i < 100 && after > start + 50; ++i) {
        std::this_thread::sleep_for(100ms);
        after = rss_mib(daemon.pid());
    }
    std::printf("corrald VmRSS: %.1f MiB after they closed\n", after);
    EXPECT_LT(after, start + 50) << "memory stayed after the clients closed";
    EXPECT_EQ(c.del(s).status, 200u);
}

// Issue 12.3 (review of the bounded responses): the write timeout bounds each write, so a client
// that took each piece just inside it held a 16 MiB response (and the one copy of a run's output
// it is made from) for hours. A response of known extent must now average --min-write-rate after
// its first write timeout. This client takes up to 256 KiB every 300 ms (about 850 KiB/s), so no
// write waits near the 2 s write timeout: the corrald before this rule served it the whole
// response; with a minimum of 4 MiB/s it is dropped after a few seconds.
TEST(DaemonRobust, AClientThatTakesAResponseBelowTheMinimumRateIsDropped) {
    std::string why;
    if (!corrald_can_run(why)) GTEST_SKIP() << why;
    CorraldProcess daemon({"--write-timeout", "2s", "--min-write-rate", "4Mi"});
    ASSERT_TRUE(daemon.ready()) << "corrald did not start:\n" << daemon.log();
    HttpClient c = daemon.client();
    auto created = c.post("/v1/sessions", {{"policy", "none"}});
    ASSERT_EQ(created.status, 201u) << created.body;
    const std::string s = "/v1/sessions/" + created.json()["id"].get<std::string>();
    auto spawned = c.post(s + "/processes", {{"command", "head -c 8388608 /dev/urandom"}});
    ASSERT_EQ(spawned.status, 201u) << spawned.body;
    const std::string p = s + "/processes/" + spawned.json()["id"].get<std::string>();
    auto waited = c.get(p + "/wait?timeoutMs=120000");
    ASSERT_EQ(waited.status, 200u) << waited.body;
    // A client that reads at full speed still gets all of it (about 11 MiB of base64).
    auto whole = c.get(p + "/logs?limit=8388608");
    ASSERT_EQ(whole.status, 200u);
    ASSERT_EQ(whole.json()["nextOffset"], 8388608);
    const size_t body_size = whole.body.size();
    whole = {};

    const int fd = send_and_never_read(
        daemon.socket_path(), "GET " + p + "/logs?limit=8388608 HTTP/1.1\r\nHost: corral\r\n\r\n");
    ASSERT_GE(fd, 0) << "connect/send: " << std::strerror(errno);
    std::vector<char> piece(64 * 1024);
    size_t taken = 0;
    bool ended = false;
    const auto start = std::chrono::steady_clock::now();
    while (!ended && std::chrono::steady_clock::now() - start < 30s) {
        for (size_t this_turn = 0; this_turn < 256 * 1024;) {
            const ssize_t n = ::recv(fd, piece.data(), piece.size(), MSG_DONTWAIT);
            if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) ended = true;
            if (n <= 0) break;
            this_turn += static_cast<size_t>(n);
            taken += static_cast<size_t>(n);
        }
        std::this_thread::sleep_for(300ms);
    }
    ::close(fd);
    std::printf("slow client took %zu of %zu bytes before the end\n", taken, body_size);
    EXPECT_TRUE(ended) << "a client below the minimum rate was still served after 30 s";
    EXPECT_LT(taken, body_size) << "the slow client got the whole response";
    EXPECT_EQ(c.get("/v1/health").status, 200u);
    EXPECT_EQ(c.del(s).status, 200u);
}

// Issue 12.4 (review of the bounded responses): terminal WebSocket frames had no write timeout,
// so a client that attached to a busy terminal and never read held its connection (one of
// --max-connections) and a frame for ever: the write waited on a full socket without end. Frames
// are now bounded by --write-timeout as every HTTP write is.
TEST(DaemonRobust, ATerminalClientThatNeverReadsIsDroppedAfterTheWriteTimeout) {
    std::string why;
    if (!corrald_can_run(why)) GTEST_SKIP() << why;
    CorraldProcess daemon({"--write-timeout", "1s"});
    ASSERT_TRUE(daemon.ready()) << "corrald did not start:\n" << daemon.log();
    HttpClient c = daemon.client();
    auto created = c.post("/v1/sessions", {{"policy", "none"}});
    ASSERT_EQ(created.status, 201u) << created.body;
    const std::string s = "/v1/sessions/" + created.json()["id"].get<std::string>();
    auto started = c.post(s + "/terminals", {{"command", "yes"}, {"cols", 80}, {"rows", 24}});
    ASSERT_EQ(started.status, 201u) << started.body;
    const std::string proc = started.json()["id"];
    const int fd = send_and_never_read(daemon.socket_path(),
                                       "GET " + s + "/terminals/" + proc +
                                           "/ws HTTP/1.1\r\nHost: corral\r\nUpgrade: websocket\r\n"
                                           "Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                                           "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n");
    ASSERT_GE(fd, 0) << "connect/send: " << std::strerror(errno);
    pollfd watch{fd, POLLRDHUP, 0};
    const int ready = ::poll(&watch, 1, 60000);
    EXPECT_EQ(ready, 1) << "a terminal client that never reads was not dropped in 60 s";
    EXPECT_TRUE(watch.revents & (POLLRDHUP | POLLHUP)) << watch.revents;
    ::close(fd);
    // The terminal itself goes on, and the daemon answers.
    auto info = c.get(s + "/processes/" + proc);
    EXPECT_EQ(info.status, 200u);
    EXPECT_EQ(info.json()["status"], "running") << info.body;
    EXPECT_EQ(c.del(s).status, 200u);
}

/// Names in `dir` that start with corral's mark for discarded directories.
std::vector<std::string> discarded_in(const std::string& dir) {
    std::vector<std::string> found;
    for (const auto& name : subdirectory_names(dir))
        if (name.rfind(".corral-discarded-", 0) == 0) found.push_back(name);
    return found;
}

/// Creates (or replaces) the file `path` with `content`.
bool make_file(const std::string& path, const std::string& content) {
    std::ofstream out(path, std::ios::trunc);
    out << content;
    return static_cast<bool>(out);
}

/// Waits (bounded, only to catch hangs) until `done()`; its last answer.
bool eventually(const std::function<bool()>& done, std::chrono::seconds bound = 120s) {
    const auto deadline = std::chrono::steady_clock::now() + bound;
    while (!done()) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(20ms);
    }
    return true;
}

// Issue 12 (review): a session's directory was deleted on corrald's event loop when it ended
// (unmount, then remove_all), so a session that made many files held every other request for as
// long as the deletion took. Now the directory is renamed out of the way (a `.corral-discarded-`
// name) and deleted on a thread. Here a session makes 200,000 files, a nested tree and a link to
// a directory outside; once its DELETE is answered, /v1/health and a new session are answered
// while the discarded directory still exists (the deletion is still under way: an ordering, not
// a timing, check). Then corrald is killed mid-deletion: the next start deletes the rest in the
// background, and the old id makes a new session while it does. In the end nothing is left, the
// outside directory untouched. On the previous corrald the DELETE was answered only after the
// files were gone: the first check fails.
TEST(DaemonRobust, AnEndedSessionsManyFilesAreDeletedOffTheLoopAndNothingIsLeft) {
    std::string why;
    if (!corrald_can_run(why)) GTEST_SKIP() << why;
    CorraldProcess daemon;
    ASSERT_TRUE(daemon.ready()) << "corrald did not start:\n" << daemon.log();
    HttpClient c = daemon.client();
    c.set_idle_timeout(300s);
    const std::string outside = daemon.state_dir() + "/../outside";
    std::filesystem::create_directories(outside);
    ASSERT_TRUE(make_file(outside + "/keep", "kept"));
    auto created = c.post("/v1/sessions", {{"id", "many"}, {"policy", "none"}});
    ASSERT_EQ(created.status, 201u) << created.body;
    const std::string command = "mkdir -p a/b/c && touch a/b/c/f && ln -s '" + outside +
                                "' link && seq 200000 | xargs touch && ls | wc -l";
    auto made = c.post("/v1/sessions/many/run", {{"command", command}, {"timeoutMs", 240000}});
    ASSERT_EQ(made.status, 200u) << made.body;
    ASSERT_EQ(made.json()["stdout"], "200002\n") << made.body;

    auto ended = c.del("/v1/sessions/many");
    ASSERT_EQ(ended.status, 200u) << ended.body;
    const bool healthy = c.get("/v1/health").status == 200u;
    auto another = c.post("/v1/sessions", {{"id", "another"}, {"policy", "none"}});
    const auto discarded = discarded_in(daemon.state_dir() + "/sessions");
    EXPECT_EQ(discarded.size(), 1u)
        << "the workspace was not being deleted while other requests were answered (it was "
           "deleted before the DELETE was answered: on the event loop)";
    EXPECT_TRUE(healthy);
    EXPECT_EQ(another.status, 201u) << another.body;
    EXPECT_FALSE(std::filesystem::exists(daemon.state_dir() + "/sessions/many"));
    EXPECT_EQ(c.del("/v1/sessions/another").status, 200u);

    // A crash in the middle of the deletion: the next start finds the discarded directory by its
    // mark and deletes the rest while it serves, and the old id makes a new session meanwhile.
    daemon.kill_hard();
    const bool crashed_mid_deletion = !discarded_in(daemon.state_dir() + "/sessions").empty();
    ASSERT_TRUE(daemon.start()) << "corrald did not start again:\n" << daemon.log();
    HttpClient again = daemon.client();
    auto same_id = again.post("/v1/sessions", {{"id", "many"}, {"policy", "none"}});
    const bool still_deleting = !discarded_in(daemon.state_dir() + "/sessions").empty();
    EXPECT_EQ(same_id.status, 201u) << same_id.body;
    EXPECT_TRUE(crashed_mid_deletion && still_deleting)
        << "the deletion was over before the crash or before the same id was taken again";
    EXPECT_EQ(again.del("/v1/sessions/many").status, 200u);

    EXPECT_TRUE(eventually([&] { return daemon.footprint().empty(); }))
        << daemon.footprint().describe();
    EXPECT_TRUE(discarded_in(daemon.state_dir() + "/sessions").empty());
    EXPECT_TRUE(std::filesystem::exists(outside + "/keep")) << "the link was followed";
}

// What a stopped daemon had discarded but not yet deleted is deleted by the next start (off its
// loop: it answers meanwhile), found by corral's mark only: a directory of another name in the
// state dir stays, and so does what a link in the discarded tree points to. The discarded tree
// nests deeper than the deletion holds directories open (64), so the deeper part is moved up.
// On the previous corrald every directory in <state>/sessions was taken for a session's and
// deleted: the foreign one was lost.
TEST(DaemonRobust, ADiscardedDirectoryIsDeletedAtTheNextStartAndNothingNotCorrals) {
    std::string why;
    if (!corrald_can_run(why)) GTEST_SKIP() << why;
    CorraldProcess daemon;
    ASSERT_TRUE(daemon.ready()) << "corrald did not start:\n" << daemon.log();
    daemon.stop(30s);
    const std::string sessions = daemon.state_dir() + "/sessions";
    const std::string discarded = sessions + "/.corral-discarded-gone-1-1";
    const std::string foreign = sessions + "/.not-corral";
    const std::string outside = daemon.state_dir() + "/../outside";
    std::string deep = discarded;
    for (int level = 0; level < 150; ++level) deep += "/d";
    std::filesystem::create_directories(deep);
    ASSERT_TRUE(make_file(deep + "/f", "x"));
    for (int i = 0; i < 1000; ++i)
        ASSERT_TRUE(make_file(discarded + "/f" + std::to_string(i), ""));
    std::filesystem::create_directories(foreign);
    ASSERT_TRUE(make_file(foreign + "/mine", "not corral's"));
    std::filesystem::create_directories(outside);
    ASSERT_TRUE(make_file(outside + "/keep", "kept"));
    std::filesystem::create_directory_symlink(outside, discarded + "/link");
    std::filesystem::create_directory_symlink(outside, deep + "/link");

    ASSERT_TRUE(daemon.start()) << "corrald did not start again:\n" << daemon.log();
    EXPECT_EQ(daemon.client().get("/v1/health").status, 200u);
    EXPECT_TRUE(eventually([&] { return !std::filesystem::exists(discarded); }))
        << "the discarded directory was not deleted";
    EXPECT_TRUE(std::filesystem::exists(foreign + "/mine")) << "a directory not corral's was deleted";
    EXPECT_TRUE(std::filesystem::exists(outside + "/keep")) << "a link was followed";
    auto listed = daemon.client().get("/v1/sessions");
    ASSERT_EQ(listed.status, 200u);
    EXPECT_TRUE(listed.json()["sessions"].empty()) << listed.body;
    std::filesystem::remove_all(foreign);
}

// Issue 12 (review): a client that left during POST /v1/sessions never got the new session's
// tokens, yet the session was created and ran on, owned by nobody, until its timeouts. Here the
// creation is held (the holder is born frozen), the client closes its connection, then the
// creation goes on: the session is created and then ended (endReason client-gone), and nothing
// of it is left. On the previous corrald it stayed active: the wait below times out.
TEST(DaemonRobust, ASessionWhoseCreatorLeftBeforeTheAnswerIsEndedAndLeavesNothing) {
    std::string why;
    if (!corrald_can_run(why)) GTEST_SKIP() << why;
    CorraldProcess daemon;
    ASSERT_TRUE(daemon.ready()) << "corrald did not start:\n" << daemon.log();
    HttpClient c = daemon.client();
    const std::string sessions = daemon.instance_cgroup() + "/sessions";
    ASSERT_TRUE(write_file(sessions + "/cgroup.freeze", "1"));
    struct Thaw {
        std::string path;
        ~Thaw() { (void)write_file(path, "0"); }
    } thaw{sessions + "/cgroup.freeze"};
    const std::string body = R"({"id": "left", "policy": "default"})";
    const int client = send_and_never_read(
        daemon.socket_path(), "POST /v1/sessions HTTP/1.1\r\nHost: corral\r\nContent-Type: "
                              "application/json\r\nContent-Length: " +
                                  std::to_string(body.size()) + "\r\n\r\n" + body);
    ASSERT_GE(client, 0);
    std::atomic<bool> given_up{false};
    const pid_t holder = first_pid_in(sessions + "/left/holder/cgroup.procs", given_up);
    ::close(client);
    ASSERT_GT(holder, 0) << "the creation never started";
    // The creation is still held: the daemon sees the client go before it has anything to say.
    EXPECT_EQ(c.get("/v1/sessions/left").status, 404u);
    ASSERT_TRUE(write_file(sessions + "/cgroup.freeze", "0"));

    json record;
    EXPECT_TRUE(eventually(
        [&] {
            auto got = c.get("/v1/sessions/left");
            if (got.status != 200u) return false;
            record = got.json();
            return record["state"] == "ended";
        },
        60s))
        << record.dump();
    EXPECT_EQ(record["endReason"], "client-gone") << record.dump();
    EXPECT_TRUE(eventually([&] { return daemon.footprint().empty(); }, 60s))
        << daemon.footprint().describe();
}

}  // namespace
}  // namespace corral
