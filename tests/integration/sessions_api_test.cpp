// Sessions that behave the way agent SDK users expect (issue 13), driven over HTTP against a real
// corrald: shell contexts, bash as the command shell, kills that report 128+N, graceful and
// tree-wide stops, clients that disconnect, timeouts that spare background processes.

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "support/daemon_process.hpp"
#include "support/http_client.hpp"

namespace corral {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::DaemonProcess;
using testing::HttpClient;
using testing::HttpResponse;
using testing::url_encode;

constexpr uint16_t kPortBase = 5000;  // 5000-6999: below the other suites' ranges

class SessionsApi : public ::testing::Test {
  protected:
    void SetUp() override {
        if (::geteuid() != 0) GTEST_SKIP() << "needs root (cgroups, socket owner root)";
        if (!fs::exists(CORRAL_BINARY_DIR "/supervisor/corrald"))
            GTEST_SKIP() << "corrald is not built";
        daemon_ = std::make_unique<DaemonProcess>(kPortBase);
        ASSERT_TRUE(daemon_->ready()) << "corrald did not start:\n" << daemon_->log();
    }
    void TearDown() override {
        if (!daemon_) return;
        const int status = daemon_->stop(std::chrono::seconds(60));
        EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
            << "corrald did not exit cleanly (wait status " << status << "):\n"
            << daemon_->log();
        daemon_.reset();
    }
    HttpClient client() { return daemon_->client(); }

    json create_session(HttpClient& c, json body = json::object()) {
        if (!body.contains("policy") && !body.contains("policyYaml")) body["policy"] = "none";
        auto res = c.post("/v1/sessions", body);
        EXPECT_EQ(res.status, 201u) << res.body;
        return res.json();
    }
    static std::string s(const json& session) {
        return "/v1/sessions/" + session["id"].get<std::string>();
    }
    /// run in shell context `shell`; returns the record.
    static json run_in(HttpClient& c, const std::string& base, const std::string& shell,
                       const std::string& command, json extra = json::object()) {
        extra["command"] = command;
        extra["shell"] = shell;
        auto res = c.post(base + "/run", extra);
        EXPECT_EQ(res.status, 200u) << res.body;
        return res.json();
    }
    /// Polls until `done()` or 30 s (a bound that only catches hangs).
    template <class F>
    static bool eventually(F done) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        while (std::chrono::steady_clock::now() < deadline) {
            if (done()) return true;
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        return false;
    }

    std::unique_ptr<DaemonProcess> daemon_;
};

// --- the session's cwd ------------------------------------------------------------------------

// Stop 44's SDK probe: a session created with a cwd that is not there was a 201, and every command
// it ran then ended setup-failed (chdir ENOENT), which the clients showed as exit code -1 with no
// output; `../..` was kept as `/workspace/../..`. A missing cwd is made now (as `docker run -w`
// does), confined like the file API; one that cannot be made or is not a directory is refused,
// naming the key; `..` is resolved lexically.
TEST_F(SessionsApi, SessionCwd_IsMadeWhereMissingRefusedWhereItCannotBeAndDotDotIsResolved) {
    auto c = client();
    for (const char* policy : {"default", "none"}) {
        SCOPED_TRACE(policy);
        const json made = create_session(c, {{"policy", policy}, {"cwd", "build/out"}});
        EXPECT_TRUE(made["cwd"].get<std::string>().ends_with("/build/out")) << made.dump();
        auto pwd = c.post(s(made) + "/run", {{"command", "pwd"}});
        EXPECT_EQ(pwd.json()["stdout"], made["cwd"].get<std::string>() + "\n") << pwd.body;
        auto file = c.post("/v1/sessions", {{"policy", policy}, {"cwd", "/etc/hostname"}});
        EXPECT_EQ(file.status, 400u) << file.body;
        EXPECT_EQ(file.error_code(), "invalid") << file.body;
        EXPECT_NE(file.error_message().find("cwd `/etc/hostname`"), std::string::npos)
            << file.body;
    }
    // Where the sandbox cannot write, nothing is made: refused, naming the key.
    auto read_only = c.post("/v1/sessions", {{"policy", "default"}, {"cwd", "/usr/corral-no"}});
    EXPECT_EQ(read_only.status, 400u) << read_only.body;
    EXPECT_NE(read_only.error_message().find("cannot be made"), std::string::npos)
        << read_only.body;
    EXPECT_FALSE(fs::exists("/usr/corral-no"));
    // Without a mount namespace a host path outside the workspace must exist: a typo is not made
    // into a directory on the host.
    auto host_typo = c.post("/v1/sessions", {{"policy", "none"}, {"cwd", "/corral-no-such-dir"}});
    EXPECT_EQ(host_typo.status, 400u) << host_typo.body;
    EXPECT_FALSE(fs::exists("/corral-no-such-dir"));
    // Inside a mount namespace `..` stops at the root, as the file API's paths do.
    const json up = create_session(c, {{"policy", "default"}, {"cwd", "../.."}});
    EXPECT_EQ(up["cwd"], "/");
    const json dot = create_session(c, {{"policy", "default"}, {"cwd", "/workspace/./x/.."}});
    EXPECT_EQ(dot["cwd"], "/workspace");
    const json host = create_session(c, {{"policy", "none"}, {"cwd", "/usr/../tmp/"}});
    EXPECT_EQ(host["cwd"], "/tmp");
    // Nothing is left of the refused creations.
    auto listed = c.get("/v1/sessions");
    EXPECT_EQ(listed.json()["sessions"].size(), 5u) << listed.body;
}

// --- Landlock in a session -------------------------------------------------------------------

// Stop 44: a Landlock rule holds an inode, and corrald opened the policy's paths in its own mount
// namespace. examples/policies/ai-agent.yaml (landlock.write: /workspace, /tmp) could not create a
// session at all (the host has no /workspace: ENOENT), and a rule on the host's /tmp granted
// nothing in the sandbox's own /tmp. The paths are opened in the sandbox's root now.
TEST_F(SessionsApi, Landlock_RulesHoldTheSandboxsOwnPathsAsTheShippedAiAgentPolicyNeeds) {
    auto c = client();
    std::ifstream example(CORRAL_SOURCE_DIR "/examples/policies/ai-agent.yaml");
    const std::string yaml((std::istreambuf_iterator<char>(example)), {});
    ASSERT_FALSE(yaml.empty());
    const json session = create_session(c, {{"policyYaml", yaml}});
    ASSERT_TRUE(session.contains("id")) << session.dump();
    auto wrote = c.post(s(session) + "/run",
                        {{"command", "echo w > /workspace/a && echo t > /tmp/t && cat /workspace/a "
                                     "/tmp/t"}});
    EXPECT_EQ(wrote.json()["stdout"], "w\nt\n") << wrote.body;
    EXPECT_EQ(wrote.json()["exitCode"], 0) << wrote.body;
    // Outside the rules Landlock still denies (/root is not on the read list).
    auto denied = c.post(s(session) + "/run", {{"command", "ls /root"}});
    EXPECT_NE(denied.json()["exitCode"], 0) << denied.body;
    EXPECT_NE(denied.json()["stderr"].get<std::string>().find("Permission denied"),
              std::string::npos)
        << denied.body;
    // A path the sandbox does not have is the policy's mistake: 422 naming the key.
    auto missing = c.post(
        "/v1/sessions",
        {{"policyYaml", "name: ll\nextends: default\nlandlock: { read: [/usr, /bin, /lib, /lib64, "
                        "/etc], write: [/corral-no-such-dir] }\n"}});
    EXPECT_EQ(missing.status, 422u) << missing.body;
    EXPECT_NE(missing.error_message().find("landlock.write: `/corral-no-such-dir`"),
              std::string::npos)
        << missing.body;
}

// --- shell contexts ---------------------------------------------------------------------------

TEST_F(SessionsApi, ShellContext_CdExportUnsetFunctionAndAliasCarryToTheNextCommand) {
    auto c = client();
    const json session = create_session(c);
    const auto base = s(session);
    const std::string cwd = session["cwd"];
    auto created = c.post(base + "/shells", {{"id", "main"}, {"env", {{"DROP_ME", "x"}}}});
    ASSERT_EQ(created.status, 201u) << created.body;
    EXPECT_EQ(created.json()["cwd"], cwd);
    EXPECT_EQ(created.json()["env"]["DROP_ME"], "x");

    const json first =
        run_in(c, base, "main",
               "mkdir -p repo/sub && cd repo && export CARRIED=1 && unset DROP_ME; "
               "greet() { echo \"fn-$1\"; }; alias hi='echo alias-hi'; exit 3");
    EXPECT_EQ(first["exitCode"], 3) << first.dump();
    const json second = run_in(c, base, "main",
                               "pwd; echo \"$CARRIED\"; echo \"${DROP_ME-unset}\"; greet a; hi");
    EXPECT_EQ(second["exitCode"], 0) << second.dump();
    EXPECT_EQ(second["stdout"], cwd + "/repo\n1\nunset\nfn-a\nalias-hi\n") << second.dump();
    // Each command is its own process with its own record.
    EXPECT_NE(first["id"], second["id"]);
    EXPECT_NE(first["pid"], second["pid"]);

    // `cd sub` then a relative path: it really is the context's directory.
    run_in(c, base, "main", "cd sub && echo inside > here.txt");
    std::ifstream here(session["root"].get<std::string>() + "/repo/sub/here.txt");
    std::string text((std::istreambuf_iterator<char>(here)), {});
    EXPECT_EQ(text, "inside\n");

    auto shown = c.get(base + "/shells/main");
    ASSERT_EQ(shown.status, 200u) << shown.body;
    const json state = shown.json();
    EXPECT_EQ(state["cwd"], cwd + "/repo/sub");
    EXPECT_EQ(state["env"]["CARRIED"], "1");
    EXPECT_FALSE(state["env"].contains("DROP_ME"));
    EXPECT_FALSE(state["env"].contains("SHLVL")) << "bash's own counters do not pile up";
    EXPECT_EQ(state["functions"], json::array({"greet"}));
    EXPECT_EQ(state["aliases"], json::array({"hi"}));
    EXPECT_EQ(state["commands"], 3);
    EXPECT_FALSE(state.contains("lastStateError")) << state.dump();

    auto list = c.get(base + "/shells");
    ASSERT_EQ(list.json()["shells"].size(), 1u);
    EXPECT_EQ(c.post(base + "/shells", {{"id", "main"}}).status, 409u);
    EXPECT_EQ(c.post(base + "/shells", {{"id", "bad id"}}).status, 400u);
    EXPECT_EQ(c.post(base + "/run", {{"command", "true"}, {"shell", "nope"}}).status, 404u);
    EXPECT_EQ(c.del(base + "/shells/main").status, 200u);
    EXPECT_EQ(c.get(base + "/shells/main").status, 404u);
}

TEST_F(SessionsApi, ShellContext_PerCommandCwdAndEnvDoNotStick) {
    auto c = client();
    const json session = create_session(c);
    const auto base = s(session);
    ASSERT_EQ(c.post(base + "/shells", {{"id", "a"}}).status, 201u);
    run_in(c, base, "a", "mkdir -p d; export KEEP=k");
    const json once = run_in(c, base, "a", "pwd; echo $ONCE $KEEP",
                             {{"cwd", "d"}, {"env", {{"ONCE", "1"}}}});
    EXPECT_EQ(once["stdout"], session["cwd"].get<std::string>() + "/d\n1 k\n");
    const json after = run_in(c, base, "a", "pwd; echo ${ONCE-none}");
    EXPECT_EQ(after["stdout"], session["cwd"].get<std::string>() + "\nnone\n");
}

TEST_F(SessionsApi, ShellContext_TimedOutOrKilledCommandLeavesTheStateAsBefore) {
    auto c = client();
    const json session = create_session(c);
    const auto base = s(session);
    ASSERT_EQ(c.post(base + "/shells", {{"id", "t"}}).status, 201u);
    run_in(c, base, "t", "export BEFORE=1");

    const json timed = run_in(c, base, "t", "cd /; export LOST=1; sleep 60", {{"timeoutMs", 300}});
    EXPECT_EQ(timed["status"], "timeout") << timed.dump();
    EXPECT_EQ(timed["exitCode"], 143) << "death by SIGTERM reads as a shell reports it";

    // A command killed through the API (from another connection) while it runs.
    json killed;
    std::thread runner([&] {
        auto own = client();
        killed = run_in(own, base, "t", "cd /tmp; export LOST=2; sleep 60");
    });
    std::string running;
    ASSERT_TRUE(eventually([&] {
        auto shell = c.get(base + "/shells/t").json();
        if (shell["running"].is_string()) running = shell["running"];
        return !running.empty();
    }));
    auto del = c.del(base + "/processes/" + running + "?force=true");
    EXPECT_EQ(del.status, 200u) << del.body;
    runner.join();
    EXPECT_EQ(killed["status"], "killed") << killed.dump();
    EXPECT_EQ(killed["exitCode"], 137) << killed.dump();

    const json after = run_in(c, base, "t", "pwd; echo ${BEFORE-none} ${LOST-none}");
    EXPECT_EQ(after["stdout"], session["cwd"].get<std::string>() + "\n1 none\n") << after.dump();
    auto state = c.get(base + "/shells/t").json();
    EXPECT_FALSE(state.contains("lastStateError")) << "the last command's state was taken";
}

TEST_F(SessionsApi, ShellContext_CommandsRunInArrivalOrder) {
    auto c = client();
    const json session = create_session(c);
    const auto base = s(session);
    ASSERT_EQ(c.post(base + "/shells", {{"id", "q"}}).status, 201u);
    json first, second;
    std::thread one([&] {
        auto own = client();
        first = run_in(own, base, "q", "sleep 1; echo first >> order.txt; export AFTER_FIRST=1");
    });
    ASSERT_TRUE(eventually([&] { return c.get(base + "/shells/q").json()["running"].is_string(); }));
    std::thread two([&] {
        auto own = client();
        second = run_in(own, base, "q", "echo second:${AFTER_FIRST-no} >> order.txt");
    });
    // The second waits in the queue, visibly, while the first runs.
    EXPECT_TRUE(eventually([&] { return c.get(base + "/shells/q").json()["queued"] == 1; }));
    one.join();
    two.join();
    std::ifstream order(session["root"].get<std::string>() + "/order.txt");
    std::string text((std::istreambuf_iterator<char>(order)), {});
    EXPECT_EQ(text, "first\nsecond:1\n");
    EXPECT_EQ(second["exitCode"], 0);
}

TEST_F(SessionsApi, ShellContexts_KeepTheirOwnStateButShareFilesAndProcesses) {
    auto c = client();
    const json session = create_session(c);
    const auto base = s(session);
    ASSERT_EQ(c.post(base + "/shells", {{"id", "a"}}).status, 201u);
    auto b = c.post(base + "/shells", json::object());  // generated id
    ASSERT_EQ(b.status, 201u) << b.body;
    const std::string bid = b.json()["id"];
    run_in(c, base, "a", "mkdir -p shared && cd shared && export ONLY_A=1 && echo from-a > f.txt");
    const json seen = run_in(c, base, bid, "pwd; echo ${ONLY_A-none}; cat shared/f.txt");
    EXPECT_EQ(seen["stdout"], session["cwd"].get<std::string>() + "\nnone\nfrom-a\n");
    // A process started from one context is visible to the other.
    run_in(c, base, "a", "setsid sleep 60 > /dev/null 2>&1 & echo $! > ../sleeper.pid");
    const json ps = run_in(c, base, bid, "kill -0 $(cat sleeper.pid) && echo alive");
    EXPECT_EQ(ps["stdout"], "alive\n");
}

// Security: the state dump comes from inside the sandbox, so a command controls it completely.
// What it writes must never run daemon-side, never reach another context, and garbage must
// leave the context as it was. Precedent: Shellshock (CVE-2014-6271), where bash evaluated
// function definitions smuggled in environment values.
TEST_F(SessionsApi, ShellContext_ForgedStateDumpsNeverRunOutsideOrLeakIntoAnotherContext) {
    auto c = client();
    const json session = create_session(c);
    const auto base = s(session);
    const std::string marker = "/tmp/corral-shell-forgery-" + std::to_string(::getpid());
    fs::remove(marker);
    ASSERT_EQ(c.post(base + "/shells", {{"id", "evil"}}).status, 201u);
    ASSERT_EQ(c.post(base + "/shells", {{"id", "victim"}}).status, 201u);
    run_in(c, base, "evil", "export GOOD=1");

    // 1. Refused forms: a BASH_FUNC import, data after `end`, a relative cwd, no `end`. Each
    //    command writes its dump and then replaces the shell, so the trap writes nothing more.
    const std::vector<std::string> forged = {
        "corral-shell-state-1\\0cwd\\0/\\0env\\0BASH_FUNC_ls%%=() { touch " + marker +
            "; }\\0defs\\0\\0end\\0",
        "corral-shell-state-1\\0cwd\\0/\\0defs\\0\\0end\\0cwd\\0/etc\\0",
        "corral-shell-state-1\\0cwd\\0../..\\0defs\\0\\0end\\0",
        "corral-shell-state-1\\0cwd\\0/\\0defs\\0touch " + marker + "\\0",
    };
    for (const auto& dump : forged) {
        const json r = run_in(c, base, "evil", "printf '" + dump + "' >&$__corral_fd; exec true");
        EXPECT_EQ(r["exitCode"], 0) << r.dump();
        auto state = c.get(base + "/shells/evil").json();
        EXPECT_TRUE(state.contains("lastStateError")) << dump << "\n" << state.dump();
        EXPECT_EQ(state["cwd"], session["cwd"]) << dump;
        EXPECT_EQ(state["env"]["GOOD"], "1") << dump;
    }
    // 2. An oversized dump (2 MiB) is read (the shell never blocks on it) and refused.
    const json big = run_in(c, base, "evil", "head -c 2097152 /dev/zero >&$__corral_fd; exec true");
    EXPECT_EQ(big["status"], "exited") << big.dump();
    EXPECT_NE(c.get(base + "/shells/evil").json().value("lastStateError", "").find("1 MiB"),
              std::string::npos);

    // 3. A well-formed dump whose values are shell code: the daemon stores them as text. The
    //    definitions run only inside the sandbox, in the next command of the same context.
    const std::string hostile = "corral-shell-state-1\\0cwd\\0/tmp\\0env\\0X=$(touch " + marker +
                                ")\\0defs\\0touch " + marker + "-defs\\0end\\0";
    run_in(c, base, "evil", "printf '" + hostile + "' >&$__corral_fd; exec true");
    EXPECT_FALSE(fs::exists(marker)) << "a value from the dump ran";
    EXPECT_FALSE(fs::exists(marker + "-defs")) << "definitions ran before any command of theirs";
    auto evil = c.get(base + "/shells/evil").json();
    EXPECT_EQ(evil["cwd"], "/tmp");
    EXPECT_EQ(evil["env"]["X"], "$(touch " + marker + ")");
    EXPECT_EQ(evil["env"].size(), 1u) << "the dump replaced the state, nothing merged in";

    const json victim = run_in(c, base, "victim", "pwd; echo \"${X-none}\"");
    EXPECT_EQ(victim["stdout"], session["cwd"].get<std::string>() + "\nnone\n");
    EXPECT_FALSE(fs::exists(marker + "-defs")) << "another context ran the forged definitions";
    // The forging context's own next command does run them, inside its sandbox: that is what a
    // context is (its functions and aliases come back).
    run_in(c, base, "evil", "true");
    EXPECT_TRUE(fs::exists(marker + "-defs"));
    EXPECT_FALSE(fs::exists(marker)) << "the env value is a literal string, never evaluated";
    fs::remove(marker + "-defs");
}

TEST_F(SessionsApi, ShellContext_InAMountNamespaceSessionSeesItsSandbox) {
    auto c = client();
    const json session = create_session(c, {{"policy", "default"}});
    const auto base = s(session);
    auto created = c.post(base + "/shells", {{"id", "m"}});
    ASSERT_EQ(created.status, 201u) << created.body;
    EXPECT_EQ(created.json()["cwd"], "/workspace");
    run_in(c, base, "m", "mkdir -p w && cd w && export IN_NS=1");
    const json r = run_in(c, base, "m", "pwd; echo $IN_NS");
    EXPECT_EQ(r["stdout"], "/workspace/w\n1\n") << r.dump();
}

// --- the command shell ------------------------------------------------------------------------

TEST_F(SessionsApi, Command_RunsUnderBashWhereTheSandboxHasIt) {
    auto c = client();
    for (const std::string policy : {"none", "default"}) {
        const auto base = s(create_session(c, {{"policy", policy}}));
        auto r = c.post(base + "/run", {{"command", "[[ 1 == 1 ]] && echo bash:${BASH_VERSINFO[0]}"}});
        ASSERT_EQ(r.status, 200u) << r.body;
        EXPECT_EQ(r.json()["exitCode"], 0) << policy << ": " << r.body;
        EXPECT_EQ(r.json()["argv"][0], "/bin/bash") << policy;
        EXPECT_EQ(r.json()["stdout"].get<std::string>().rfind("bash:", 0), 0u) << r.body;
    }
}

TEST_F(SessionsApi, Command_PolicyShellOverridesAndIsValidated) {
    auto c = client();
    const auto base = s(create_session(
        c, {{"policyYaml", "name: plain-sh\nextends: none\nshell: /bin/sh\n"}}));
    auto r = c.post(base + "/run", {{"command", "echo ${BASH_VERSION-not-bash}"}});
    ASSERT_EQ(r.status, 200u) << r.body;
    EXPECT_EQ(r.json()["argv"][0], "/bin/sh");
    EXPECT_EQ(r.json()["stdout"], "not-bash\n");
    auto bad = c.post("/v1/sessions", {{"policyYaml", "name: rel\nextends: none\nshell: bin/sh\n"}});
    EXPECT_EQ(bad.status, 422u) << bad.body;
    EXPECT_NE(bad.body.find("shell"), std::string::npos) << bad.body;
}

// --- kills ------------------------------------------------------------------------------------

TEST_F(SessionsApi, Kill_DeleteStopsGracefullySoASigtermTrapRuns) {
    auto c = client();
    const json session = create_session(c);
    const auto base = s(session);
    auto spawned = c.post(
        base + "/processes",
        {{"command", "trap 'echo trapped > trap.txt; exit 0' TERM; echo ready > ready.txt; "
                     "while :; do sleep 0.05; done"}});
    ASSERT_EQ(spawned.status, 201u) << spawned.body;
    const std::string root = session["root"];
    ASSERT_TRUE(eventually([&] { return fs::exists(root + "/ready.txt"); }));
    auto del = c.del(base + "/processes/" + spawned.json()["id"].get<std::string>());
    ASSERT_EQ(del.status, 200u) << del.body;
    EXPECT_EQ(del.json()["running"], false);
    std::ifstream trap(root + "/trap.txt");
    std::string text((std::istreambuf_iterator<char>(trap)), {});
    EXPECT_EQ(text, "trapped\n") << "the SIGTERM trap did not run";

    // ?force=true: cgroup.kill at once, no trap, 137.
    auto forced = c.post(base + "/processes",
                         {{"command", "trap 'echo trapped > forced.txt' TERM; while :; do sleep "
                                      "0.05; done"}});
    auto fdel = c.del(base + "/processes/" + forced.json()["id"].get<std::string>() + "?force=true");
    ASSERT_EQ(fdel.status, 200u) << fdel.body;
    EXPECT_EQ(fdel.json()["status"], "killed");
    EXPECT_EQ(fdel.json()["exitCode"], 137);
    EXPECT_FALSE(fs::exists(root + "/forced.txt"));

    // A plain process killed by the default stop: SIGTERM, 143.
    auto sleeper = c.post(base + "/processes", {{"argv", {"sleep", "60"}}});
    auto sdel = c.del(base + "/processes/" + sleeper.json()["id"].get<std::string>());
    EXPECT_EQ(sdel.json()["exitCode"], 143) << sdel.body;
    EXPECT_EQ(sdel.json()["signal"], "SIGTERM") << sdel.body;
    EXPECT_EQ(sdel.json()["status"], "killed") << sdel.body;
}

TEST_F(SessionsApi, Signal_TreeReachesEveryProcessOfTheLeaf) {
    auto c = client();
    const json session = create_session(c);
    const auto base = s(session);
    const std::string root = session["root"];
    // Two children that report their own SIGUSR1, and a parent that waits for them.
    auto spawned = c.post(
        base + "/processes",
        {{"command",
          "for i in 1 2; do (trap \"echo \\$i >> got.txt; exit 0\" USR1; echo >> up.txt; "
          "while :; do sleep 0.05; done) & done; trap '' USR1; wait"}});
    ASSERT_EQ(spawned.status, 201u) << spawned.body;
    const std::string id = spawned.json()["id"];
    ASSERT_TRUE(eventually([&] {
        std::ifstream up(root + "/up.txt");
        std::string t((std::istreambuf_iterator<char>(up)), {});
        return t.size() == 2;
    }));
    auto sig = c.post(base + "/processes/" + id + "/signal", {{"signal", "USR1"}, {"tree", true}});
    ASSERT_EQ(sig.status, 200u) << sig.body;
    EXPECT_GE(sig.json()["signalled"].get<int>(), 3) << sig.body;
    auto done = c.get(base + "/processes/" + id + "/wait?timeoutMs=30000");
    EXPECT_EQ(done.json()["finished"], true) << done.body;
    std::ifstream got(root + "/got.txt");
    std::string text((std::istreambuf_iterator<char>(got)), {});
    EXPECT_EQ(text.size(), 4u) << "both children got the signal: " << text;
}

TEST_F(SessionsApi, KillAll_EndsEveryRunningProcessAndSaysHowMany) {
    auto c = client();
    const auto base = s(create_session(c));
    for (int i = 0; i < 3; ++i)
        ASSERT_EQ(c.post(base + "/processes", {{"argv", {"sleep", "60"}}}).status, 201u);
    auto finished = c.post(base + "/run", {{"command", "true"}});
    ASSERT_EQ(finished.status, 200u);
    auto all = c.del(base + "/processes");
    ASSERT_EQ(all.status, 200u) << all.body;
    EXPECT_EQ(all.json()["killed"], 3) << all.body;
    const json list = c.get(base + "/processes").json();
    for (const auto& p : list["processes"]) EXPECT_EQ(p["running"], false) << p.dump();
    EXPECT_EQ(c.del(base + "/processes").json()["killed"], 0);
}

TEST_F(SessionsApi, EndSession_AnInFlightRunReports143) {
    auto c = client();
    const auto base = s(create_session(c));
    json result;
    std::thread runner([&] {
        auto own = client();
        auto r = own.post(base + "/run", {{"argv", {"sleep", "60"}}});
        result = r.json();
    });
    ASSERT_TRUE(eventually([&] { return c.get(base + "/processes").json()["processes"].size() == 1; }));
    EXPECT_EQ(c.del(base).status, 200u);
    runner.join();
    EXPECT_EQ(result["exitCode"], 143) << result.dump();
    EXPECT_EQ(result["status"], "killed") << result.dump();
}

// --- clients that go away ---------------------------------------------------------------------

/// Sends one HTTP request on a fresh Unix-socket connection; returns the connection (-1 on
/// failure). Closing it without reading is a client that went away.
int send_request(const std::string& socket_path, const std::string& target, const json& body) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, socket_path.c_str(), sizeof addr.sun_path - 1);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        ::close(fd);
        return -1;
    }
    const std::string text = body.dump();
    const std::string request = "POST " + target +
                                " HTTP/1.1\r\nHost: corral\r\nContent-Type: application/json\r\n"
                                "Content-Length: " +
                                std::to_string(text.size()) + "\r\n\r\n" + text;
    if (::write(fd, request.data(), request.size()) != static_cast<ssize_t>(request.size())) {
        ::close(fd);
        return -1;
    }
    return fd;
}

void send_and_hang_up(const std::string& socket_path, const std::string& target,
                      const json& body) {
    const int fd = send_request(socket_path, target, body);
    ASSERT_GE(fd, 0);
    ::close(fd);
}

TEST_F(SessionsApi, Disconnect_FromRunOrExecStopsTheCommandsTree) {
    auto c = client();
    const json session = create_session(c);
    const auto base = s(session);
    const std::string root = session["root"];
    // run: the command and a child it started are both gone after the client hangs up.
    const int conn = send_request(daemon_->socket_path(), base + "/run",
                                  {{"command", "sleep 600 & echo $! > child.pid; wait"}});
    ASSERT_GE(conn, 0);
    // Written, not only created: the shell's redirect makes the file before echo writes the pid,
    // and a hang-up in between left it empty (seen in the pure-v2 VM: "child 0").
    ASSERT_TRUE(eventually([&] {
        std::error_code missing;
        return fs::file_size(root + "/child.pid", missing) > 0 && !missing;
    }));
    ::close(conn);
    ASSERT_TRUE(eventually([&] {
        const json list = c.get(base + "/processes").json();
        return list["processes"].size() == 1 && list["processes"][0]["running"] == false;
    })) << c.get(base + "/processes").body;
    std::ifstream pid_file(root + "/child.pid");
    pid_t child = 0;
    pid_file >> child;
    ASSERT_GT(child, 0);
    EXPECT_TRUE(eventually([&] { return ::kill(child, 0) != 0; })) << "the child still runs";
    EXPECT_EQ(c.get(base + "/processes/p1").json()["status"], "killed");

    // exec: a quiet command (nothing written that could fail) is stopped too.
    const int stream = send_request(daemon_->socket_path(), base + "/exec",
                                    {{"command", "echo started > exec.txt; sleep 600"}});
    ASSERT_GE(stream, 0);
    ASSERT_TRUE(eventually([&] { return fs::exists(root + "/exec.txt"); }));
    ::close(stream);
    EXPECT_TRUE(eventually([&] {
        return c.get(base + "/processes/p2").json()["running"] == false;
    })) << c.get(base + "/processes/p2").body;
    EXPECT_EQ(c.get(base + "/processes/p2").json()["status"], "killed");

    // detachOnDisconnect keeps the old behaviour: the command outlives its client.
    send_and_hang_up(daemon_->socket_path(), base + "/run",
                     {{"command", "echo started > detached.txt; sleep 600"},
                      {"detachOnDisconnect", true}});
    ASSERT_TRUE(eventually([&] { return fs::exists(root + "/detached.txt"); }));
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    EXPECT_EQ(c.get(base + "/processes/p3").json()["running"], true);
    c.del(base + "/processes/p3?force=true");
}

TEST_F(SessionsApi, Disconnect_WhileQueuedInAShellContextDropsTheCommand) {
    auto c = client();
    const json session = create_session(c);
    const auto base = s(session);
    ASSERT_EQ(c.post(base + "/shells", {{"id", "q"}}).status, 201u);
    std::thread busy([&] {
        auto own = client();
        run_in(own, base, "q", "sleep 1");
    });
    ASSERT_TRUE(eventually([&] { return c.get(base + "/shells/q").json()["running"].is_string(); }));
    send_and_hang_up(daemon_->socket_path(), base + "/run",
                     {{"command", "echo ran > dropped.txt"}, {"shell", "q"}});
    busy.join();
    const json after = run_in(c, base, "q", "echo next");
    EXPECT_EQ(after["stdout"], "next\n");
    EXPECT_FALSE(fs::exists(session["root"].get<std::string>() + "/dropped.txt"))
        << "a command whose client left before its turn still ran";
}

// --- timeouts ---------------------------------------------------------------------------------

TEST_F(SessionsApi, CommandTimeout_AppliesToForegroundCommandsNotToBackgroundProcesses) {
    auto c = client();
    const auto base = s(create_session(c, {{"commandTimeoutMs", 300}}));
    auto bg = c.post(base + "/processes", {{"command", "sleep 1; echo survived"}});
    ASSERT_EQ(bg.status, 201u) << bg.body;
    EXPECT_FALSE(bg.json().contains("timeoutMs")) << bg.body;
    auto fg = c.post(base + "/run", {{"command", "sleep 5"}});
    EXPECT_EQ(fg.json()["status"], "timeout") << fg.body;
    auto waited = c.get(base + "/processes/" + bg.json()["id"].get<std::string>() +
                        "/wait?timeoutMs=30000");
    EXPECT_EQ(waited.json()["status"], "exited") << waited.body;
    EXPECT_EQ(waited.json()["exitCode"], 0);
    // Its own timeoutMs still applies.
    auto own = c.post(base + "/processes", {{"command", "sleep 5"}, {"timeoutMs", 200}});
    auto own_done = c.get(base + "/processes/" + own.json()["id"].get<std::string>() +
                          "/wait?timeoutMs=30000");
    EXPECT_EQ(own_done.json()["status"], "timeout") << own_done.body;
}

}  // namespace
}  // namespace corral
