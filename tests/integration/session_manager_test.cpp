// The session manager against the real kernel (root), driven through a real io_context: sessions
// from presets, commands and their output, daemons that double-fork away and are still gone after
// the session ends, per-process kill that spares siblings, bounded output, timeouts, many sessions
// at once, and nothing left in the cgroup tree or the state dir afterwards.
#include "sessions/session_manager.hpp"

#include "isolation/cgroup_placement.hpp"
#include "isolation/systemd_scope.hpp"

#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/integration/support/test_helpers.hpp"

namespace corral {
namespace {

using test_support::drain;
using test_support::exists;
using test_support::unique_name;

using namespace std::chrono_literals;

std::string unique_instance() {
    static std::atomic<int> counter{0};
    return "corral-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
}

/// Subdirectories of a cgroup directory (child cgroups).
std::vector<std::string> child_cgroups(const std::string& dir) {
    std::vector<std::string> names;
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) return names;
    while (dirent* entry = ::readdir(d)) {
        if (entry->d_type == DT_DIR && entry->d_name[0] != '.') names.push_back(entry->d_name);
    }
    ::closedir(d);
    return names;
}

uint64_t resident_kib() {
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line)) {
        if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6));
    }
    return 0;
}

bool pid_alive(pid_t pid) {
    return ::kill(pid, 0) == 0;
}

class SessionManagerTest : public ::testing::Test {
  protected:
    void SetUp() override {
        if (::geteuid() != 0) GTEST_SKIP() << "needs root";
        // Placed as corrald is (issue 11.5): from a login shell's scope, below the root.
        auto host = discover_placed_cgroup_host(PlacementOptions{false, "corral-test", scope_requester()});
        ASSERT_TRUE(host) << host.error().describe();
        char tmpl[] = "/tmp/corral-sm-test-XXXXXX";
        ASSERT_NE(::mkdtemp(tmpl), nullptr);
        state_dir_ = tmpl;
        SessionManagerConfig config;
        config.state_dir = state_dir_;
        config.instance_name = unique_instance();
        config.port_first = static_cast<uint16_t>(10000 + (::getpid() % 500) * 10);  // 10000-14999
        config.port_last = static_cast<uint16_t>(config.port_first + 9);
        config.ended_retention = 200ms;
        instance_path_ = host->v2_own + "/" + config.instance_name;
        auto manager = SessionManager::create(io_, config, *host);
        ASSERT_TRUE(manager) << manager.error().describe();
        manager_ = std::move(*manager);
    }

    void TearDown() override {
        manager_.reset();
        if (!instance_path_.empty()) {
            EXPECT_FALSE(exists(instance_path_)) << instance_path_ << " left behind";
        }
        if (!state_dir_.empty()) {
            EXPECT_TRUE(child_cgroups(state_dir_ + "/sessions").empty()) << "session dirs left";
            std::filesystem::remove_all(state_dir_);
        }
    }

    /// A manager of a test's own beside the fixture's, for settings the fixture's lacks
    /// (`adjust`), in a state dir of its own (`*state_dir`, the test removes it); nullptr with a
    /// failure when it cannot be made.
    std::unique_ptr<SessionManager> own_manager(
        const std::function<void(SessionManagerConfig&)>& adjust, std::string* state_dir,
        std::string* instance = nullptr) {
        auto host =
            discover_placed_cgroup_host(PlacementOptions{false, "corral-test", scope_requester()});
        EXPECT_TRUE(host) << host.error().describe();
        if (!host) return nullptr;
        char tmpl[] = "/tmp/corral-sm-own-XXXXXX";
        EXPECT_NE(::mkdtemp(tmpl), nullptr);
        *state_dir = tmpl;
        SessionManagerConfig config;
        config.state_dir = *state_dir;
        config.instance_name = unique_instance();
        config.port_first = static_cast<uint16_t>(10000 + (::getpid() % 500) * 10);
        config.port_last = static_cast<uint16_t>(config.port_first + 9);
        adjust(config);
        if (instance) *instance = host->v2_own + "/" + config.instance_name;
        auto created = SessionManager::create(io_, config, *host);
        EXPECT_TRUE(created) << created.error().describe();
        if (!created) return nullptr;
        return std::move(*created);
    }

    /// A `none` session named `id` created on `manager` through the loop, as corrald creates.
    Result<CreatedSession> create_named(SessionManager& manager, const std::string& id) {
        CreateSessionRequest request;
        request.policy = "none";
        request.id = id;
        std::optional<Result<CreatedSession>> result;
        manager.async_create_session(
            request, [&](Result<CreatedSession> r) { result.emplace(std::move(r)); });
        EXPECT_TRUE(run_until([&] { return result.has_value(); }));
        return result.value_or(Result<CreatedSession>(sys_error(EIO, "no answer")));
    }

    /// Runs the loop until `done` or a generous hang bound.
    bool run_until(const std::function<bool()>& done, std::chrono::milliseconds bound = 30s) {
        const auto deadline = std::chrono::steady_clock::now() + bound;
        io_.restart();
        while (!done()) {
            if (std::chrono::steady_clock::now() > deadline) return false;
            io_.run_one_for(20ms);
        }
        return true;
    }

    CreatedSession create(const std::string& policy, const std::string& yaml = "") {
        CreateSessionRequest request;
        request.policy = policy;
        request.policy_yaml = yaml;
        auto created = manager_->create_session(request);
        EXPECT_TRUE(created) << created.error().describe();
        return created ? *created : CreatedSession{};
    }

    ProcessInfo wait(const std::string& sid, const std::string& proc) {
        std::optional<ProcessInfo> result;
        auto handle = manager_->async_wait_process(sid, proc, std::nullopt,
                                                   [&](Result<ProcessInfo> info, bool finished) {
                                                       EXPECT_TRUE(info) << info.error().describe();
                                                       EXPECT_TRUE(finished);
                                                       result = info ? *info : ProcessInfo{};
                                                   });
        EXPECT_TRUE(run_until([&] { return result.has_value(); }))
            << "wait for " << proc << " hung";
        return result.value_or(ProcessInfo{});
    }

    ProcessInfo run(const std::string& sid, ProcessRequest request) {
        auto started = manager_->start_process(sid, request);
        EXPECT_TRUE(started) << started.error().describe();
        if (!started) return {};
        return wait(sid, started->id);
    }

    ProcessInfo run(const std::string& sid, const std::string& command) {
        ProcessRequest request;
        request.command = command;
        return run(sid, request);
    }

    std::string output(const std::string& sid, const std::string& proc,
                       OutputStream stream = OutputStream::out) {
        auto chunk = manager_->read_output(sid, proc, stream, 0, 64 << 20);
        EXPECT_TRUE(chunk) << chunk.error().describe();
        return chunk ? chunk->data : "";
    }

    EndSessionReport end(const std::string& sid) {
        std::optional<Result<EndSessionReport>> result;
        manager_->end_session(sid,
                              [&](Result<EndSessionReport> report) { result = std::move(report); });
        EXPECT_TRUE(run_until([&] { return result.has_value(); })) << "end_session hung";
        if (!result) return {};
        EXPECT_TRUE(*result) << result->error().describe();
        return *result ? result->value() : EndSessionReport{};
    }

    std::string session_cgroup(const std::string& sid) {
        return manager_->sessions_cgroup_path() + "/" + sid;
    }

    boost::asio::io_context io_;
    std::unique_ptr<SessionManager> manager_;
    std::string state_dir_;
    std::string instance_path_;
};

TEST_F(SessionManagerTest, SessionManager_CreatesSessionsFromPresetsWithTokensAndCgroups) {
    for (const std::string preset : {"none", "default"}) {
        CreatedSession session = create(preset);
        ASSERT_FALSE(session.info.id.empty()) << preset;
        EXPECT_EQ(session.info.state, SessionState::active);
        EXPECT_EQ(session.info.policy_name, preset);
        // Only a session with namespaces has a holder, and a cgroup for it.
        EXPECT_EQ(exists(session_cgroup(session.info.id) + "/holder"), preset != "none");
        EXPECT_TRUE(exists(session.info.root));
        EXPECT_NE(session.full_token, session.restricted_token);
        auto full = manager_->check_token(session.full_token);
        ASSERT_TRUE(full);
        EXPECT_EQ(full->session_id, session.info.id);
        EXPECT_EQ(full->rights, TokenRights::full);
        auto restricted = manager_->check_token(session.restricted_token);
        ASSERT_TRUE(restricted);
        EXPECT_EQ(restricted->rights, TokenRights::restricted);
        EXPECT_FALSE(manager_->check_token(session.full_token + "x"));
        if (preset == "default") {
            EXPECT_EQ(session.info.workdir, "/workspace");
            EXPECT_FALSE(session.info.namespaces.empty());
        }
        end(session.info.id);
        EXPECT_FALSE(exists(session_cgroup(session.info.id)));
        EXPECT_FALSE(exists(session.info.root));
        EXPECT_FALSE(manager_->check_token(session.full_token)) << "token of an ended session";
    }
}

// Issue 12 item 1: async_create_session never waits for the holder's setup. Until the holder has
// reported, the session is nowhere to be found, takes no work and its id is taken; once the loop
// has seen the report, the handler gets it active and it is an ordinary session.
TEST_F(SessionManagerTest, SessionManager_AsyncCreationIsReachableOnlyOnceReadyAndReservesItsId) {
    for (const std::string preset : {"none", "default"}) {
        const std::string sid = "async-" + preset;
        CreateSessionRequest request;
        request.policy = preset;
        request.id = sid;
        std::optional<Result<CreatedSession>> created;
        manager_->async_create_session(
            request, [&](Result<CreatedSession> result) { created.emplace(std::move(result)); });
        EXPECT_FALSE(created) << "answered inside the call";
        for (const auto& info : manager_->list_sessions()) EXPECT_NE(info.id, sid);
        auto looked_up = manager_->get_session(sid);
        ASSERT_FALSE(looked_up);
        EXPECT_EQ(looked_up.error().code, ENOENT);
        EXPECT_NE(looked_up.error().describe().find("still being created"), std::string::npos);
        ProcessRequest command;
        command.argv = {"/bin/true"};
        auto started = manager_->start_process(sid, command);
        ASSERT_FALSE(started);
        EXPECT_EQ(started.error().code, ENOENT);
        auto twin = manager_->create_session(request);
        ASSERT_FALSE(twin);
        EXPECT_EQ(twin.error().code, EEXIST) << twin.error().describe();

        ASSERT_TRUE(run_until([&] { return created.has_value(); }));
        ASSERT_TRUE(*created) << created->error().describe();
        EXPECT_EQ((*created)->info.id, sid);
        EXPECT_EQ((*created)->info.state, SessionState::active);
        auto full = manager_->check_token((*created)->full_token);
        ASSERT_TRUE(full);
        EXPECT_EQ(full->session_id, sid);
        ProcessRequest echo;
        echo.argv = {"/bin/echo", "ready"};
        const ProcessInfo echoed = run(sid, echo);
        EXPECT_EQ(output(sid, echoed.id), "ready\n");
        end(sid);
        EXPECT_FALSE(exists(session_cgroup(sid)));
    }
}

// Issue 18: prepared sessions (SessionManagerConfig::prepared, corrald --prepare) never make a
// client's creation fail. They do not count against max_sessions for clients; at the limit one
// is ended to make room, the pool is not refilled while there is no room, and it refills once
// clients' sessions are gone. A claim moves a prepared session to the clients' count.
TEST_F(SessionManagerTest, SessionManager_PreparedSessionsGiveWayToClientsAtTheSessionLimit) {
    std::string state_dir, instance;
    std::unique_ptr<SessionManager> manager = own_manager(
        [](SessionManagerConfig& config) {
            config.ended_retention = 200ms;
            config.max_sessions = 3;
            config.prepared = {{"none", 2}};
        },
        &state_dir, &instance);
    ASSERT_TRUE(manager);
    auto pool = [&] { return manager->prepared_pools().at("none"); };
    ASSERT_TRUE(run_until([&] { return pool().ready == 2 && pool().preparing == 0; }));
    auto create_async = [&](const std::string& id) { return create_named(*manager, id); };
    // Three clients' sessions (ids of their own: not from the pool) all succeed.
    for (const std::string id : {"client-1", "client-2", "client-3"}) {
        auto made = create_async(id);
        EXPECT_TRUE(made) << id << ": " << made.error().describe();
    }
    // The limit is the clients': a fourth is refused, and the pool has made room and stays empty.
    auto fourth = create_async("client-4");
    ASSERT_FALSE(fourth);
    EXPECT_EQ(fourth.error().code, EBUSY);
    run_until([] { return false; }, 300ms);  // a refill would have come by now
    EXPECT_EQ(pool().ready + pool().preparing, 0u);
    EXPECT_EQ(manager->list_sessions().size(), 3u);
    // Room again: the pool refills, and a claim counts as a client's session.
    for (const std::string id : {"client-1", "client-2", "client-3"}) {
        std::optional<Result<EndSessionReport>> ended;
        manager->end_session(id, [&](Result<EndSessionReport> r) { ended.emplace(std::move(r)); });
        ASSERT_TRUE(run_until([&] { return ended.has_value(); }));
    }
    ASSERT_TRUE(run_until([&] { return pool().ready == 2; }));
    CreateSessionRequest from_pool;
    from_pool.policy = "none";
    std::optional<Result<CreatedSession>> claimed;
    manager->async_create_session(from_pool,
                                  [&](Result<CreatedSession> r) { claimed.emplace(std::move(r)); });
    ASSERT_TRUE(run_until([&] { return claimed.has_value(); }));
    ASSERT_TRUE(*claimed) << claimed->error().describe();
    EXPECT_EQ(manager->list_sessions().size(), 1u);
    bool shut_down = false;
    manager->shutdown([&] { shut_down = true; });
    ASSERT_TRUE(run_until([&] { return shut_down; }));
    manager.reset();
    EXPECT_FALSE(exists(instance)) << instance << " left behind";
    EXPECT_TRUE(child_cgroups(state_dir + "/sessions").empty()) << "session dirs left";
    std::filesystem::remove_all(state_dir);
}

// The session limit counts live sessions only, exactly, however sessions end: ended ones still
// readable (the retention window) and ones forgotten after it. The count is kept as sessions end
// and are forgotten (issue 18: no walk over every session per creation), so a count that drifted
// by one would show here as a refusal too early or a creation past the limit.
TEST_F(SessionManagerTest, SessionManager_TheSessionLimitCountsLiveSessionsThroughEndsAndRetention) {
    std::string state_dir;
    std::unique_ptr<SessionManager> manager = own_manager(
        [](SessionManagerConfig& config) {
            config.ended_retention = 100ms;
            config.max_sessions = 2;
        },
        &state_dir);
    ASSERT_TRUE(manager);
    auto create = [&](const std::string& id) {  // 0, or the error's code
        auto made = create_named(*manager, id);
        return made ? 0 : made.error().code;
    };
    auto end = [&](const std::string& id) {
        std::optional<Result<EndSessionReport>> ended;
        manager->end_session(id, [&](Result<EndSessionReport> r) { ended.emplace(std::move(r)); });
        ASSERT_TRUE(run_until([&] { return ended.has_value(); }));
        ASSERT_TRUE(*ended) << id << ": " << ended->error().describe();
    };
    // Past the retention window an ended session is forgotten (a tombstone, off the registry).
    auto past_retention = [&] { run_until([] { return false; }, 400ms); };
    EXPECT_EQ(create("a"), 0);
    EXPECT_EQ(create("b"), 0);
    EXPECT_EQ(create("c"), EBUSY);
    end("a");  // ended, still readable: not live
    EXPECT_EQ(manager->session_count(), 1u);
    EXPECT_EQ(create("c"), 0);
    EXPECT_EQ(create("d"), EBUSY);
    past_retention();
    EXPECT_EQ(create("d"), EBUSY) << "a forgotten ended session was taken off the live count";
    end("b");
    end("c");
    EXPECT_EQ(manager->session_count(), 0u);
    past_retention();
    EXPECT_EQ(manager->session_count(), 0u);
    EXPECT_EQ(create("e"), 0);
    EXPECT_EQ(create("f"), 0);
    EXPECT_EQ(create("g"), EBUSY);
    EXPECT_EQ(manager->session_count(), 2u);
    bool shut_down = false;
    manager->shutdown([&] { shut_down = true; });
    ASSERT_TRUE(run_until([&] { return shut_down; }));
    manager.reset();
    std::filesystem::remove_all(state_dir);
}

// A shutdown while a creation waits for its holder fails the creation (ESHUTDOWN) and ends what
// it made; the shutdown completes, and TearDown finds nothing left.
TEST_F(SessionManagerTest, SessionManager_ShutdownDuringAnAsyncCreationFailsItAndLeavesNothing) {
    CreateSessionRequest request;
    request.policy = "default";
    request.id = "interrupted";
    std::optional<Result<CreatedSession>> created;
    manager_->async_create_session(
        request, [&](Result<CreatedSession> result) { created.emplace(std::move(result)); });
    bool shut_down = false;
    manager_->shutdown([&] { shut_down = true; });
    ASSERT_TRUE(run_until([&] { return shut_down && created.has_value(); }));
    ASSERT_FALSE(*created) << "created during a shutdown";
    EXPECT_EQ(created->error().code, ESHUTDOWN) << created->error().describe();
    EXPECT_NE(created->error().describe().find("create session interrupted"), std::string::npos)
        << created->error().describe();
    EXPECT_FALSE(exists(session_cgroup("interrupted")));
    EXPECT_FALSE(exists(state_dir_ + "/sessions/interrupted"));
}

TEST_F(SessionManagerTest, SessionManager_RunsEchoAndCapturesStdoutInBothPresets) {
    for (const std::string preset : {"none", "default"}) {
        CreatedSession session = create(preset);
        const std::string sid = session.info.id;
        ProcessInfo info = run(sid, "echo hi; echo err >&2");
        EXPECT_EQ(info.status(), "exited") << preset << ": " << info.error;
        EXPECT_EQ(info.exit_code, 0);
        EXPECT_EQ(output(sid, info.id), "hi\n");
        EXPECT_EQ(output(sid, info.id, OutputStream::err), "err\n");
        EXPECT_TRUE(info.stdout_stats.eof);
        EXPECT_TRUE(run_until([&] { return !exists(session_cgroup(sid) + "/" + info.id); }))
            << "leaf of a finished process";

        ProcessInfo failing = run(sid, "exit 3");
        EXPECT_EQ(failing.status(), "exited");
        EXPECT_EQ(failing.exit_code, 3);
        ProcessInfo pwd = run(sid, "pwd");
        EXPECT_EQ(output(sid, pwd.id), session.info.workdir + "\n");
        end(sid);
    }
}

TEST_F(SessionManagerTest, SessionManager_SetupFailureIsARecordNotAnError) {
    CreatedSession session = create("none");
    ProcessRequest request;
    request.argv = {"/nonexistent/binary"};
    ProcessInfo info = run(session.info.id, request);
    EXPECT_EQ(info.status(), "setup-failed");
    EXPECT_NE(info.error.find("/nonexistent/binary"), std::string::npos) << info.error;
    // Issue 17, item 8: the exit code a shell gives for a missing (127) or non-executable (126)
    // program, while the status still says it never ran.
    EXPECT_EQ(info.exit_code, 127);
    EXPECT_NE(info.error.find("execve"), std::string::npos) << info.error;
    request.argv = {"/proc/version"};  // mode 0444
    ProcessInfo not_executable = run(session.info.id, request);
    EXPECT_EQ(not_executable.status(), "setup-failed");
    EXPECT_EQ(not_executable.exit_code, 126);
    EXPECT_NE(not_executable.error.find("EACCES"), std::string::npos) << not_executable.error;
    end(session.info.id);
}

TEST_F(SessionManagerTest, SessionManager_EnvLayersAndPatchApplyToLaterCommands) {
    CreateSessionRequest request;
    request.policy = "default";
    request.env = {{"FOO", "session"}, {"BAR", "kept"}};
    auto created = manager_->create_session(request);
    ASSERT_TRUE(created) << created.error().describe();
    const std::string sid = created->info.id;
    ProcessInfo first = run(sid, "echo $FOO-$BAR");
    EXPECT_EQ(output(sid, first.id), "session-kept\n");
    auto patched = manager_->patch_env(sid, EnvPatch{{{"FOO", "patched"}}, {"BAR"}});
    ASSERT_TRUE(patched);
    ProcessInfo second = run(sid, "echo $FOO-$BAR");
    EXPECT_EQ(output(sid, second.id), "patched-\n");
    ProcessRequest with_env;
    with_env.command = "echo $FOO";
    with_env.env = {{"FOO", "request"}};
    ProcessInfo third = run(sid, with_env);
    EXPECT_EQ(output(sid, third.id), "request\n");
    // The session's environment is built once per change (issue 18): a request's own variables
    // never stay in it.
    ProcessInfo fourth = run(sid, "echo $FOO-$BAR");
    EXPECT_EQ(output(sid, fourth.id), "patched-\n");
    end(sid);
}

TEST_F(SessionManagerTest, SessionManager_StdinDataAndStreamedStdinReachTheProcess) {
    CreatedSession session = create("none");
    const std::string sid = session.info.id;
    ProcessRequest given;
    given.command = "cat";
    given.stdin_data = "hello";
    ProcessInfo first = run(sid, given);
    EXPECT_EQ(output(sid, first.id), "hello");

    ProcessRequest open;
    open.command = "cat";
    open.stdin_open = true;
    auto started = manager_->start_process(sid, open);
    ASSERT_TRUE(started);
    int writes_done = 0;
    manager_->write_stdin(sid, started->id, "one ", false, [&](Status s) {
        EXPECT_TRUE(s) << s.error().describe();
        ++writes_done;
    });
    manager_->write_stdin(sid, started->id, "two", true, [&](Status s) {
        EXPECT_TRUE(s) << s.error().describe();
        ++writes_done;
    });
    ProcessInfo second = wait(sid, started->id);
    EXPECT_EQ(writes_done, 2);
    EXPECT_EQ(output(sid, second.id), "one two");
    EXPECT_EQ(second.exit_code, 0);
    end(sid);
}

TEST_F(SessionManagerTest, SessionManager_EndKillsDaemonizedBackgroundProcess) {
    CreatedSession session = create("none");
    const std::string sid = session.info.id;
    // The subshell forks a setsid'd sleep and exits: the sleep is reparented away from the
    // process the API started (to us, the subreaper) — only the cgroup still knows it.
    ProcessInfo info =
        run(sid, "( setsid sleep 1000 >/dev/null 2>&1 < /dev/null & echo $! > bg.pid )");
    EXPECT_EQ(info.status(), "exited");
    std::ifstream pid_file(session.info.root + "/bg.pid");
    pid_t daemon_pid = 0;
    pid_file >> daemon_pid;
    ASSERT_GT(daemon_pid, 0);
    EXPECT_TRUE(pid_alive(daemon_pid));
    EXPECT_TRUE(exists(session_cgroup(sid) + "/" + info.id)) << "leaf with a live descendant";

    EndSessionReport report = end(sid);
    EXPECT_FALSE(report.already_ended);
    EXPECT_GE(report.processes_killed, 1u);
    EXPECT_TRUE(run_until([&] { return !pid_alive(daemon_pid); }, 10s)) << "daemon survived";
    EXPECT_FALSE(exists(session_cgroup(sid))) << "session cgroup left";
}

TEST_F(SessionManagerTest, SessionManager_DaemonInPidNamespaceGoneAfterEnd) {
    CreatedSession session = create("default");
    const std::string sid = session.info.id;
    ProcessInfo info = run(sid, "( setsid sleep 1000 >/dev/null 2>&1 < /dev/null & )");
    EXPECT_EQ(info.status(), "exited");
    auto populated = [&] {
        std::ifstream events(session_cgroup(sid) + "/cgroup.events");
        std::string line;
        while (std::getline(events, line)) {
            if (line == "populated 1") return true;
        }
        return false;
    };
    EXPECT_TRUE(populated());
    EndSessionReport report = end(sid);
    EXPECT_GE(report.processes_killed, 1u);
    EXPECT_FALSE(exists(session_cgroup(sid)));
}

TEST_F(SessionManagerTest, SessionManager_KillProcessKillsDescendantsButNotSibling) {
    CreatedSession session = create("none");
    const std::string sid = session.info.id;
    ProcessRequest tree;
    tree.command = "sleep 1000 & sleep 1000 & wait";
    auto victim = manager_->start_process(sid, tree);
    ASSERT_TRUE(victim);
    ProcessRequest single;
    single.command = "sleep 1000";
    auto sibling = manager_->start_process(sid, single);
    ASSERT_TRUE(sibling);
    const std::string victim_leaf = session_cgroup(sid) + "/" + victim->id;
    ASSERT_TRUE(run_until([&] {
        std::ifstream procs(victim_leaf + "/cgroup.procs");
        int lines = 0;
        std::string line;
        while (std::getline(procs, line)) ++lines;
        return lines >= 3;
    })) << "tree did not start";

    auto killed = manager_->kill_process(sid, victim->id);
    ASSERT_TRUE(killed) << killed.error().describe();
    ProcessInfo victim_info = wait(sid, victim->id);
    EXPECT_EQ(victim_info.status(), "killed");
    // The leaf goes once its cgroup.events says empty, on the loop, not inside wait(): on a slow
    // kernel (pure-v2 under TCG) that can come after the record is final.
    EXPECT_TRUE(run_until([&] { return !exists(victim_leaf); })) << "victim's leaf left";

    auto sibling_info = manager_->get_process(sid, sibling->id);
    ASSERT_TRUE(sibling_info);
    EXPECT_TRUE(sibling_info->running);
    EXPECT_TRUE(pid_alive(sibling_info->pid));
    EndSessionReport report = end(sid);
    EXPECT_EQ(report.killed_process_ids, std::vector<std::string>{sibling->id});
    auto final_sibling = manager_->get_process(sid, sibling->id);
    ASSERT_TRUE(final_sibling);
    EXPECT_EQ(final_sibling->status(), "killed");
}

// Issue 12.6, for a graceful stop of one process (DELETE .../processes/{proc} without force): a
// `sh -c` forking its command just as the SIGTERM comes dies and used to leave the child running,
// unsignalled, for the whole grace period. The grace here is 30 s, so a miss shows as a leaf that
// outlives the 15 s bound.
TEST_F(SessionManagerTest, SessionManager_GracefulStopRightAfterStartReachesAChildForkedMeanwhile) {
    CreatedSession session = create("", "name: g\nextends: none\ntimeouts: { grace: 30s }\n");
    const std::string sid = session.info.id;
    for (int i = 0; i < 20; ++i) {
        ProcessRequest request;
        request.command = "sleep 600; true";  // the `; true` makes the shell fork, not exec
        auto started = manager_->start_process(sid, request);
        ASSERT_TRUE(started) << started.error().describe();
        auto stopped = manager_->stop_process(sid, started->id, false);
        ASSERT_TRUE(stopped) << stopped.error().describe();
        const std::string leaf = session_cgroup(sid) + "/" + started->id;
        EXPECT_TRUE(run_until([&] { return !exists(leaf); }, 15s))
            << "round " << i << ": a child of " << started->id << " waited for the grace period";
        EXPECT_EQ(wait(sid, started->id).status(), "killed");
    }
    end(sid);
}

TEST_F(SessionManagerTest, SessionManager_TwentySessionsAtOnce) {
    std::vector<std::string> ids;
    std::vector<std::string> procs;
    for (int i = 0; i < 20; ++i) {
        CreatedSession session = create(i % 2 ? "default" : "none");
        ASSERT_FALSE(session.info.id.empty());
        ids.push_back(session.info.id);
    }
    for (int i = 0; i < 20; ++i) {
        ProcessRequest request;
        request.command = "echo session-" + std::to_string(i);
        auto started = manager_->start_process(ids[i], request);
        ASSERT_TRUE(started) << started.error().describe();
        procs.push_back(started->id);
    }
    EXPECT_EQ(manager_->list_sessions().size(), 20u);
    for (int i = 0; i < 20; ++i) {
        ProcessInfo info = wait(ids[i], procs[i]);
        EXPECT_EQ(info.exit_code, 0) << info.error;
        EXPECT_EQ(output(ids[i], procs[i]), "session-" + std::to_string(i) + "\n");
    }
    int ended = 0;
    for (const auto& sid : ids) {
        manager_->end_session(sid, [&](Result<EndSessionReport> report) {
            EXPECT_TRUE(report);
            ++ended;
        });
    }
    EXPECT_TRUE(run_until([&] { return ended == 20; }));
    EXPECT_TRUE(child_cgroups(manager_->sessions_cgroup_path()).empty());
}

TEST_F(SessionManagerTest, SessionManager_OutputIsCappedAndDaemonMemoryStaysBounded) {
    CreatedSession session = create("", "name: capped\nextends: none\nlimits: { output: 1Mi }\n");
    const std::string sid = session.info.id;
    const uint64_t rss_before = resident_kib();
    ProcessInfo info = run(sid, "head -c 50M /dev/zero");
    const uint64_t rss_after = resident_kib();
    EXPECT_EQ(info.exit_code, 0);
    EXPECT_EQ(info.stdout_stats.total_bytes, 50ull << 20);
    EXPECT_TRUE(info.stdout_stats.truncated);
    EXPECT_EQ(info.stdout_stats.dropped_bytes, 49ull << 20);
    auto chunk = manager_->read_output(sid, info.id, OutputStream::out, 0, 64 << 20);
    ASSERT_TRUE(chunk);
    EXPECT_EQ(chunk->data.size(), 1u << 20);
    EXPECT_EQ(chunk->skipped, 49ull << 20);
    EXPECT_TRUE(chunk->eof);
    // Generous bound: 50 MiB went through; the daemon may keep the 1 MiB cap plus read buffers.
    EXPECT_LT(rss_after, rss_before + 24 * 1024)
        << "RSS grew from " << rss_before << " KiB to " << rss_after << " KiB";
    end(sid);
}

TEST_F(SessionManagerTest, SessionManager_CommandTimeoutGivesStatusTimeout) {
    CreatedSession session = create("", "name: quick\nextends: none\ntimeouts: { grace: 300ms }\n");
    const std::string sid = session.info.id;
    ProcessRequest polite;
    polite.command = "sleep 1000";
    polite.timeout = 200ms;
    ProcessInfo first = run(sid, polite);
    EXPECT_EQ(first.status(), "timeout");
    // A shell that ignores SIGTERM gets cgroup.kill after the grace period. The timeout may fire
    // before the shell has set its trap on a slow machine (the SIGTERM then ends it, still a
    // timeout): "armed" on stdout proves the trap came first, so the timeout doubles until the
    // SIGKILL path really ran, whatever the machine's speed.
    ProcessInfo second;
    bool trap_was_set = false;
    for (auto timeout = 200ms; !trap_was_set && timeout <= 20s; timeout *= 2) {
        ProcessRequest stubborn;
        stubborn.command = "trap '' TERM; echo armed; sleep 1000 & wait; wait";
        stubborn.timeout = timeout;
        second = run(sid, stubborn);
        EXPECT_EQ(second.status(), "timeout");
        // SIGKILL also proves it: a TERM that came between trap and echo was ignored.
        trap_was_set = output(sid, second.id) == "armed\n" || second.signal == SIGKILL;
        if (!trap_was_set) {
            EXPECT_EQ(second.signal, SIGTERM) << "timeout " << timeout.count();
        }
    }
    ASSERT_TRUE(trap_was_set) << "the shell never set its trap before the timeout";
    EXPECT_EQ(second.signal, SIGKILL);
    // A leaf is removed once empty; `sleep` may outlive its shell by a moment after SIGTERM.
    EXPECT_TRUE(run_until([&] { return child_cgroups(session_cgroup(sid)).empty(); }))
        << "left: " << testing::PrintToString(child_cgroups(session_cgroup(sid)));
    end(sid);
}

TEST_F(SessionManagerTest, SessionManager_FinishedRecordsHoldNoDescriptors) {
    CreatedSession session = create("none");
    const std::string sid = session.info.id;
    auto open_fds = [] {
        return std::distance(std::filesystem::directory_iterator("/proc/self/fd"),
                             std::filesystem::directory_iterator{});
    };
    EXPECT_EQ(run(sid, "true").status(), "exited");  // warm up whatever is created once
    const auto before = open_fds();
    for (int i = 0; i < 20; ++i) EXPECT_EQ(run(sid, "true").status(), "exited");
    EXPECT_LE(open_fds(), before + 2) << "finished records keep descriptors";
    end(sid);
}

TEST_F(SessionManagerTest, SessionManager_StalledStreamDoesNotHoldUpTheSessionsEnd) {
    CreatedSession session = create("", "name: small\nextends: none\nlimits: { output: 64Ki }\n");
    const std::string sid = session.info.id;
    ProcessRequest request;
    // It writes only once the follower exists: output read before that (starting the process
    // may already read some) is not held back by it, and under load that was more than the cap.
    request.command =
        "until [ -e go ]; do sleep 0.01; done; head -c 10000000 /dev/zero; sleep 1000";
    auto started = manager_->start_process(sid, request);
    ASSERT_TRUE(started) << started.error().describe();
    // A follower that never advances: the writer is held back on its pipe.
    auto follower = manager_->follow_output(sid, started->id, true, 0, true, 0);
    ASSERT_TRUE(follower) << follower.error().describe();
    std::ofstream(session.info.root + "/go").put('1');
    const auto read = [&] {
        return manager_->read_output(sid, started->id, OutputStream::out, 0, 1 << 20);
    };
    ASSERT_TRUE(run_until([&] {
        auto so_far = read();
        return so_far && so_far->next_offset >= (64u << 10);
    })) << "the writer never filled the buffer up to its cap";
    run_until([] { return false; }, 300ms);  // held back: nothing more may come meanwhile
    auto chunk = read();
    ASSERT_TRUE(chunk);
    EXPECT_EQ(chunk->skipped, 0u) << "nothing the follower has not had was dropped";
    EXPECT_LE(chunk->next_offset, 64u << 10) << "reading stopped at the cap";
    const auto before = std::chrono::steady_clock::now();
    EndSessionReport report = end(sid);
    EXPECT_LT(std::chrono::steady_clock::now() - before, 5s)
        << "the end waited for a stream that does not read";
    EXPECT_EQ(report.killed_process_ids.size(), 1u);
}

TEST_F(SessionManagerTest, SessionManager_AStartThatFollowsItsOutputHoldsEveryByteForALateReader) {
    // An exec's stream must see every byte from offset 0. Its reader turns up some turns of the
    // loop after the launch settled (the request's coroutine resumes, the response begins);
    // output a fast writer put out meanwhile beyond the cap was read and dropped before anything
    // held it back (DaemonApi.Exec_SlowReaderGetsEveryByteOfOutputBeyondTheCap failed rarely
    // under load: 1 MiB of 8 skipped). Here the reader comes as late as can be: once the writer
    // filled the buffer to its cap or ended, and the loop ran on a while after that.
    CreatedSession session = create("", "name: small\nextends: none\nlimits: { output: 64Ki }\n");
    const std::string sid = session.info.id;
    constexpr uint64_t kBytes = 4u << 20;  // beyond the cap and the 1 MiB pipe
    ProcessRequest request;
    request.command = "head -c " + std::to_string(kBytes) + " /dev/zero";
    std::optional<Result<SessionManager::StartedProcess>> started;
    auto handle = manager_->async_start_process(
        sid, request,
        [&](Result<SessionManager::StartedProcess> result) { started = std::move(result); },
        /*follow_output=*/true);
    ASSERT_TRUE(run_until([&] { return started.has_value(); })) << "the start never answered";
    ASSERT_TRUE(*started) << (*started).error().describe();
    const std::string proc = (*started)->info.id;
    const std::shared_ptr<OutputFollower> follower = (*started)->follower;
    ASSERT_TRUE(follower) << "the start took no hold";
    const auto record = [&] { return manager_->get_process(sid, proc); };
    ASSERT_TRUE(run_until([&] {
        auto info = record();
        return !info || !info->running || info->stdout_stats.total_bytes >= (64u << 10);
    })) << "the writer never filled the buffer";
    run_until([&] { return !record() || !record()->running; }, 300ms);  // the loop runs on
    uint64_t at = 0, skipped = 0;
    bool eof = false;
    ASSERT_TRUE(run_until([&] {
        auto chunk = manager_->read_output(sid, proc, OutputStream::out, at, 1 << 20);
        if (!chunk) return true;
        skipped += chunk->skipped;
        at = chunk->next_offset;
        eof = chunk->eof;
        follower->advance(at, 0);
        return eof;
    })) << "the reader never reached the end";
    EXPECT_TRUE(eof);
    EXPECT_EQ(skipped, 0u) << "output was dropped before the reader came";
    EXPECT_EQ(at, kBytes);
    end(sid);
}

TEST_F(SessionManagerTest, SessionManager_LeafOfAProcessGoesWhenItsLastDescendantExits) {
    CreatedSession session = create("none");
    const std::string sid = session.info.id;
    ProcessInfo info = run(sid, "sleep 0.3 >/dev/null 2>&1 & echo started");
    EXPECT_EQ(info.status(), "exited");
    EXPECT_FALSE(child_cgroups(session_cgroup(sid)).empty()) << "the background sleep keeps it";
    EXPECT_TRUE(run_until([&] { return child_cgroups(session_cgroup(sid)).empty(); }, 5s))
        << "left: " << testing::PrintToString(child_cgroups(session_cgroup(sid)));
    end(sid);
}

TEST_F(SessionManagerTest, SessionManager_EndingTwiceIsNotAnError) {
    CreatedSession session = create("none");
    const std::string sid = session.info.id;
    auto started = manager_->start_process(sid, ProcessRequest{.argv = {"sleep", "1000"}});
    ASSERT_TRUE(started);
    EndSessionReport first = end(sid);
    EXPECT_FALSE(first.already_ended);
    EXPECT_EQ(first.processes_killed, 1u);
    EndSessionReport second = end(sid);
    EXPECT_TRUE(second.already_ended);
    auto info = manager_->get_session(sid);
    ASSERT_TRUE(info);
    EXPECT_EQ(info->state, SessionState::ended);
    // After the retention window the session is a tombstone: still "already ended".
    run_until([] { return false; }, 400ms);
    EndSessionReport third = end(sid);
    EXPECT_TRUE(third.already_ended);
    auto unknown = manager_->get_session("never-existed");
    EXPECT_FALSE(unknown);
    EXPECT_EQ(unknown.error().code, ENOENT);
    EXPECT_FALSE(manager_->start_process(sid, ProcessRequest{.command = "true"}));
}

TEST_F(SessionManagerTest, SessionManager_EndWhileRunKeepsReportingTruth) {
    CreatedSession session = create("default");
    const std::string sid = session.info.id;
    auto started = manager_->start_process(sid, ProcessRequest{.command = "sleep 1000"});
    ASSERT_TRUE(started);
    std::optional<ProcessInfo> waited;
    auto handle = manager_->async_wait_process(sid, started->id, std::nullopt,
                                               [&](Result<ProcessInfo> info, bool finished) {
                                                   EXPECT_TRUE(finished);
                                                   if (info) waited = *info;
                                               });
    EndSessionReport report = end(sid);
    EXPECT_TRUE(run_until([&] { return waited.has_value(); }));
    ASSERT_TRUE(waited);
    EXPECT_EQ(waited->status(), "killed");
    EXPECT_EQ(report.killed_process_ids.size(), 1u);
}

TEST_F(SessionManagerTest, SessionManager_WaitTimesOutWhileProcessRuns) {
    CreatedSession session = create("none");
    const std::string sid = session.info.id;
    auto started = manager_->start_process(sid, ProcessRequest{.command = "sleep 1000"});
    ASSERT_TRUE(started);
    std::optional<bool> finished;
    auto handle = manager_->async_wait_process(sid, started->id, 100ms,
                                               [&](Result<ProcessInfo> info, bool done) {
                                                   EXPECT_TRUE(info);
                                                   finished = done;
                                               });
    EXPECT_TRUE(run_until([&] { return finished.has_value(); }));
    EXPECT_EQ(finished, false);
    end(sid);
}

TEST_F(SessionManagerTest, SessionManager_OutputWaitFiresOnNewOutputAndAtExit) {
    CreatedSession session = create("none");
    const std::string sid = session.info.id;
    ProcessRequest request;
    request.command = "cat";
    request.stdin_open = true;
    auto started = manager_->start_process(sid, request);
    ASSERT_TRUE(started);
    bool woke = false;
    auto handle = manager_->async_wait_output(sid, started->id, 0, 0, [&](Status s) {
        EXPECT_TRUE(s);
        woke = true;
    });
    manager_->write_stdin(sid, started->id, "ping\n", false, [](Status) {});
    EXPECT_TRUE(run_until([&] { return woke; }));
    EXPECT_EQ(output(sid, started->id), "ping\n");
    woke = false;
    handle = manager_->async_wait_output(sid, started->id, 5, 0, [&](Status) { woke = true; });
    manager_->write_stdin(sid, started->id, "", true, [](Status) {});
    EXPECT_TRUE(run_until([&] { return woke; }));
    auto info = manager_->get_process(sid, started->id);
    ASSERT_TRUE(info);
    EXPECT_FALSE(info->running);
    end(sid);
}

TEST_F(SessionManagerTest, SessionManager_PortsAreLeasedFromThePoolAndReleasedAtEnd) {
    CreatedSession session = create("", "name: ports\nextends: none\nnetwork: { ports: 2 }\n");
    const std::string sid = session.info.id;
    ASSERT_EQ(session.info.ports.size(), 2u);
    EXPECT_NE(session.info.ports[0].port, session.info.ports[1].port);
    auto extra = manager_->lease_port(sid);
    ASSERT_TRUE(extra) << extra.error().describe();
    auto url = manager_->port_endpoint(sid, extra->port, "ws");
    ASSERT_TRUE(url);
    EXPECT_EQ(*url, "ws://127.0.0.1:" + std::to_string(extra->port));
    EXPECT_TRUE(manager_->release_port(sid, extra->port));
    EXPECT_FALSE(manager_->release_port(sid, extra->port));
    auto ports = manager_->list_ports(sid);
    ASSERT_TRUE(ports);
    EXPECT_EQ(ports->size(), 2u);
    end(sid);
    // All of the pool is free again: a new session can take every port.
    CreatedSession next = create("", "name: all\nextends: none\nnetwork: { ports: 10 }\n");
    EXPECT_EQ(next.info.ports.size(), 10u);
    end(next.info.id);
}

TEST_F(SessionManagerTest, SessionManager_BadPolicyIsAnErrorWithDiagnostics) {
    CreateSessionRequest request;
    request.policy_yaml = "name: bad\nlimits: { memory: 12XB }\n";
    auto created = manager_->create_session(request);
    ASSERT_FALSE(created);
    EXPECT_EQ(created.error().code, EINVAL);
    EXPECT_NE(created.error().message.find("limits.memory"), std::string::npos)
        << created.error().message;
    EXPECT_TRUE(child_cgroups(manager_->sessions_cgroup_path()).empty());
    EXPECT_TRUE(child_cgroups(state_dir_ + "/sessions").empty());
}

TEST_F(SessionManagerTest, SessionManager_SessionAndIdleTimeoutsEndTheSession) {
    CreatedSession lifetime =
        create("", "name: short\nextends: none\ntimeouts: { session: 300ms, grace: 200ms }\n");
    CreatedSession idle = create("", "name: idle\nextends: none\ntimeouts: { idle: 300ms }\n");
    // A running process keeps an idle session alive; the absolute lifetime ends it regardless.
    auto busy =
        manager_->start_process(lifetime.info.id, ProcessRequest{.argv = {"sleep", "1000"}});
    ASSERT_TRUE(busy);
    auto state_of = [&](const std::string& sid) {
        auto info = manager_->get_session(sid);
        return info ? info->state : SessionState::active;
    };
    // get_session counts as activity, so poll the idle session through list_sessions instead.
    auto idle_listed = [&] {
        for (const auto& info : manager_->list_sessions()) {
            if (info.id == idle.info.id) return true;
        }
        return false;
    };
    EXPECT_TRUE(run_until([&] { return !idle_listed(); }, 10s)) << "idle session still active";
    EXPECT_TRUE(run_until([&] { return state_of(lifetime.info.id) == SessionState::ended; }, 10s));
    auto ended = manager_->get_session(lifetime.info.id);
    ASSERT_TRUE(ended);
    EXPECT_EQ(ended->end_reason, "timeout");
    ASSERT_EQ(ended->processes.size(), 1u);
    EXPECT_EQ(ended->processes[0].status(), "killed");
    auto idle_info = manager_->get_session(idle.info.id);
    ASSERT_TRUE(idle_info);
    EXPECT_EQ(idle_info->end_reason, "idle");
    EXPECT_TRUE(child_cgroups(manager_->sessions_cgroup_path()).empty());
}

TEST_F(SessionManagerTest, SessionManager_MemoryLimitKillReportsOom) {
    CreateSessionRequest request;
    request.policy_yaml = "name: small\nextends: none\nlimits: { memory: 32Mi }\n";
    auto created = manager_->create_session(request);
    if (!created)
        GTEST_SKIP() << "memory limit not enforceable here: " << created.error().describe();
    const std::string sid = created->info.id;
    // The shell holds 200 MB in a variable: far beyond the limit.
    ProcessInfo info = run(sid, "x=$(head -c 200M /dev/zero | tr '\\0' a); echo ${#x}");
    EXPECT_EQ(info.status(), "oom")
        << "exit " << info.exit_code.value_or(-1) << " signal " << info.signal.value_or(-1);
    end(sid);
}

// limits.oom_group: one OOM kill ends every process of the session, the sleeping sibling too.
TEST_F(SessionManagerTest, SessionManager_OomGroupEndsTheWholeSession) {
    CreateSessionRequest request;
    request.policy_yaml = "name: group\nextends: none\nlimits: { memory: 32Mi, oom_group: true }\n";
    auto created = manager_->create_session(request);
    if (!created)
        GTEST_SKIP() << "memory limit not enforceable here: " << created.error().describe();
    const std::string sid = created->info.id;
    ASSERT_TRUE(manager_->start_process(sid, ProcessRequest{.argv = {"sleep", "1000"}}));
    ASSERT_TRUE(manager_->start_process(
        sid, ProcessRequest{.command = "x=$(head -c 200M /dev/zero | tr '\\0' a)"}));
    // A hang bound only: under the pure-v2 harness (TCG, ~10x slower) filling 32 MiB through a
    // pipe took 15 s alone and more than 30 s beside other tests.
    EXPECT_TRUE(run_until(
        [&] {
            auto info = manager_->get_session(sid);
            return info && info->state == SessionState::ended;
        },
        180s))
        << "the session outlived an OOM kill";
    auto info = manager_->get_session(sid);
    ASSERT_TRUE(info);
    EXPECT_EQ(info->end_reason, "oom");
}

TEST_F(SessionManagerTest, SessionManager_DestructionEndsEverythingStillRunning) {
    CreatedSession plain = create("none");
    CreatedSession isolated = create("default");
    ASSERT_TRUE(manager_->start_process(
        plain.info.id, ProcessRequest{.command = "( setsid sleep 1000 & ) ; sleep 1000"}));
    ASSERT_TRUE(
        manager_->start_process(isolated.info.id, ProcessRequest{.argv = {"sleep", "1000"}}));
    run_until([] { return false; }, 200ms);
    const std::string root = plain.info.root;
    manager_.reset();  // TearDown checks the instance cgroup and the session dirs are gone
    EXPECT_FALSE(exists(root));
}

}  // namespace
}  // namespace corral
