// Code contexts (issue 14) against a real corrald: a persistent python3 / node interpreter per
// context, started as a session process, driven over HTTP as the Cloudflare and E2B SDKs do.

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

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

constexpr uint16_t kPortBase = 16000;  // 16000-17999: below the other suites' ranges

bool host_has(const char* program) {
    for (const char* dir : {"/usr/bin/", "/usr/local/bin/", "/bin/"})
        if (::access((std::string(dir) + program).c_str(), X_OK) == 0) return true;
    return false;
}

/// Sends `request` as is on a new connection to `socket_path` and returns everything the daemon
/// answers until it closes (20 s at most: a bound that catches hangs).
std::string raw_exchange(const std::string& socket_path, const std::string& request) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, socket_path.c_str(), sizeof addr.sun_path - 1);
    std::string answer;
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
        timeval bound{20, 0};
        ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof bound);
        (void)::write(fd, request.data(), request.size());
        char buf[4096];
        ssize_t n;
        while ((n = ::read(fd, buf, sizeof buf)) > 0) answer.append(buf, static_cast<size_t>(n));
    }
    ::close(fd);
    return answer;
}

class CodeContexts : public ::testing::Test {
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
    /// Where the daemon's session cgroups live (from /v1/health).
    std::string sessions_cgroup() {
        auto c = client();
        return c.get("/v1/health").json()["cgroup"]["sessions"].get<std::string>();
    }

    /// A `default` session (user, mount, pid... namespaces) unless told otherwise.
    std::string session(HttpClient& c, const std::string& policy = "default") {
        auto res = c.post("/v1/sessions", {{"policy", policy}});
        EXPECT_EQ(res.status, 201u) << res.body;
        return "/v1/sessions/" + res.json()["id"].get<std::string>();
    }
    json context(HttpClient& c, const std::string& base, const std::string& language,
                 json extra = json::object()) {
        extra["language"] = language;
        auto res = c.post(base + "/contexts", extra);
        EXPECT_EQ(res.status, 201u) << res.body;
        return res.json();
    }
    static json run(HttpClient& c, const std::string& base, const std::string& ctx,
                    const std::string& code, json extra = json::object()) {
        extra["code"] = code;
        auto res = c.post(base + "/contexts/" + ctx + "/run", extra);
        EXPECT_EQ(res.status, 200u) << res.body;
        return res.json();
    }
    static std::string text_result(const json& out) {
        if (!out["results"].is_array() || out["results"].empty()) return "<no result>";
        return out["results"].back().value("text/plain", "<no text/plain>");
    }
    void need(const char* program) {
        if (!host_has(program)) GTEST_SKIP() << program << " is not installed";
    }

    std::unique_ptr<DaemonProcess> daemon_;
};

TEST_F(CodeContexts, Python_StateCarriesAcrossRunsAndTheFinalExpressionIsAResult) {
    need("python3");
    auto c = client();
    const auto base = session(c);
    const json created = context(c, base, "python", {{"id", "py"}});
    EXPECT_EQ(created["id"], "py");
    EXPECT_EQ(created["language"], "python");
    EXPECT_EQ(created["status"], "idle") << created.dump();
    EXPECT_GT(created["pid"].get<int>(), 0);
    EXPECT_FALSE(created["version"].get<std::string>().empty());

    const json first = run(c, base, "py", "import math\nx = 40\ndef twice(v):\n    return 2 * v\n");
    EXPECT_EQ(first["status"], "ok") << first.dump();
    EXPECT_TRUE(first["results"].empty()) << "an assignment is not a result: " << first.dump();
    const json second = run(c, base, "py", "print('hello', x)\ntwice(x) + 2 + math.floor(0.5)");
    EXPECT_EQ(second["stdout"], "hello 40\n") << second.dump();
    EXPECT_EQ(text_result(second), "82") << second.dump();
    EXPECT_FALSE(second.contains("error"));

    // A rich object: text/html and application/json next to the repr.
    const json rich = run(c, base, "py",
                          "class Table:\n"
                          "    def _repr_html_(self): return '<table></table>'\n"
                          "    def _repr_json_(self): return {'rows': 2}\n"
                          "    def __repr__(self): return 'Table()'\n"
                          "Table()");
    ASSERT_EQ(rich["results"].size(), 1u) << rich.dump();
    EXPECT_EQ(rich["results"][0]["text/plain"], "Table()");
    EXPECT_EQ(rich["results"][0]["text/html"], "<table></table>");
    EXPECT_EQ(json::parse(rich["results"][0]["application/json"].get<std::string>()),
              json({{"rows", 2}}));

    // The interpreter is a session process in its own leaf, listed among the processes.
    auto processes = c.get(base + "/processes").json()["processes"];
    bool listed = false;
    for (const auto& p : processes) listed |= p["id"] == created["process"] && p["running"];
    EXPECT_TRUE(listed) << processes.dump();

    auto shown = c.get(base + "/contexts/py").json();
    EXPECT_EQ(shown["runs"], 3);
    EXPECT_EQ(c.get(base + "/contexts").json()["contexts"].size(), 1u);
}

TEST_F(CodeContexts, Python_AnExceptionComesBackAsAnErrorAndTheContextGoesOn) {
    need("python3");
    auto c = client();
    const auto base = session(c);
    context(c, base, "python", {{"id", "py"}});
    run(c, base, "py", "kept = 'still here'");
    const json failed = run(c, base, "py", "print('before')\n{}['missing']");
    EXPECT_EQ(failed["status"], "error") << failed.dump();
    ASSERT_TRUE(failed.contains("error")) << failed.dump();
    EXPECT_EQ(failed["error"]["name"], "KeyError");
    EXPECT_EQ(failed["error"]["value"], "'missing'");
    const std::string traceback = failed["error"]["traceback"].dump();
    EXPECT_NE(traceback.find("<cell>"), std::string::npos) << traceback;
    EXPECT_EQ(traceback.find("<stdin>"), std::string::npos) << "no driver frames: " << traceback;
    EXPECT_EQ(failed["stdout"], "before\n");

    const json syntax = run(c, base, "py", "def (:");
    EXPECT_EQ(syntax["error"]["name"], "SyntaxError") << syntax.dump();
    const json exited = run(c, base, "py", "import sys; sys.exit(3)");
    EXPECT_EQ(exited["error"]["name"], "SystemExit") << "sys.exit does not end the context";

    const json after = run(c, base, "py", "kept");
    EXPECT_EQ(text_result(after), "'still here'") << after.dump();
}

TEST_F(CodeContexts, Python_TimeoutInterruptsABusyLoopAndKeepsTheState) {
    need("python3");
    auto c = client();
    const auto base = session(c);
    context(c, base, "python", {{"id", "py"}});
    run(c, base, "py", "counter = 7");
    const json timed =
        run(c, base, "py", "print('looping')\nwhile True: pass", {{"timeoutMs", 300}});
    EXPECT_EQ(timed["status"], "timeout") << timed.dump();
    EXPECT_EQ(timed["error"]["name"], "KeyboardInterrupt") << timed.dump();
    EXPECT_EQ(timed["stdout"], "looping\n");
    const json after = run(c, base, "py", "counter + 1");
    EXPECT_EQ(text_result(after), "8") << after.dump();
    EXPECT_EQ(c.get(base + "/contexts/py").json()["status"], "idle");
}

TEST_F(CodeContexts, Python_TenMebibytesOfOutputArriveWhole) {
    need("python3");
    auto c = client();
    const auto base = session(c);
    context(c, base, "python", {{"id", "py"}});
    const json big = run(c, base, "py", "import sys\nsys.stdout.write('x' * (10 << 20))\n'done'");
    ASSERT_EQ(big["status"], "ok") << big.dump().substr(0, 500);
    EXPECT_EQ(big["stdout"].get<std::string>().size(), size_t{10} << 20);
    EXPECT_EQ(big["stdout"].get<std::string>().find_first_not_of('x'), std::string::npos);
    EXPECT_FALSE(big["truncated"]);
    EXPECT_EQ(text_result(big), "'done'");
}

TEST_F(CodeContexts, Python_RunsOfOneContextAreSerializedInArrivalOrder) {
    need("python3");
    auto c = client();
    const auto base = session(c);
    context(c, base, "python", {{"id", "py"}});
    run(c, base, "py", "order = []");
    json first;
    std::thread one([&] {
        auto own = client();
        first = run(own, base, "py", "import time\ntime.sleep(1)\norder.append(1)");
    });
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (c.get(base + "/contexts/py").json()["status"] != "running" &&
           std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const json second = run(c, base, "py", "order.append(2)\norder");
    one.join();
    EXPECT_EQ(first["status"], "ok") << first.dump();
    EXPECT_EQ(text_result(second), "[1, 2]") << second.dump();
}

// A client that goes away aborts its run: without a timeout, the busy loop would hold the context
// forever.
TEST_F(CodeContexts, Python_ClientThatGoesAwayInterruptsItsRunAndTheContextGoesOn) {
    need("python3");
    auto c = client();
    const auto base = session(c);
    context(c, base, "python", {{"id", "py"}});
    run(c, base, "py", "kept = 5");
    {
        auto own = client();
        own.stream_lines(
            "POST", base + "/contexts/py/run",
            json({{"code", "print('spinning')\nwhile True: pass"}, {"timeoutMs", 0}}).dump(),
            {{"Accept", "application/x-ndjson"}, {"Content-Type", "application/json"}},
            [](const std::string&) { return false; });  // gone after one event
    }
    json shown;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    do {
        shown = c.get(base + "/contexts/py").json();
        if (shown["status"] == "idle") break;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    } while (std::chrono::steady_clock::now() < deadline);
    EXPECT_EQ(shown["status"], "idle") << shown.dump();
    EXPECT_EQ(text_result(run(c, base, "py", "kept")), "5");
}

TEST_F(CodeContexts, Python_NdjsonStreamsOutputResultAndEnd) {
    need("python3");
    auto c = client();
    const auto base = session(c);
    context(c, base, "python", {{"id", "py"}});
    std::vector<json> events;
    const unsigned status = c.stream_lines(
        "POST", base + "/contexts/py/run",
        json({{"code", "import sys\nprint('one')\nprint('two', file=sys.stderr)\n6 * 7"}}).dump(),
        {{"Accept", "application/x-ndjson"}, {"Content-Type", "application/json"}},
        [&](const std::string& line) {
            events.push_back(json::parse(line));
            return true;
        });
    EXPECT_EQ(status, 200u);
    ASSERT_GE(events.size(), 4u);
    for (size_t i = 0; i < events.size(); ++i) EXPECT_EQ(events[i]["seq"], i);
    EXPECT_EQ(events[0], json({{"seq", 0}, {"type", "stdout"}, {"text", "one\n"}}));
    EXPECT_EQ(events[1]["type"], "stderr");
    EXPECT_EQ(events[1]["text"], "two\n");
    EXPECT_EQ(events[2]["type"], "result");
    EXPECT_EQ(events[2]["data"]["text/plain"], "42");
    EXPECT_EQ(events.back()["type"], "end");
    EXPECT_EQ(events.back()["status"], "ok");
}

TEST_F(CodeContexts, ContextIsKilledWithItsSessionAndLeavesNothing) {
    need("python3");
    auto c = client();
    auto res = c.post("/v1/sessions", {{"policy", "default"}});
    ASSERT_EQ(res.status, 201u);
    const std::string sid = res.json()["id"];
    const std::string base = "/v1/sessions/" + sid;
    const json py = context(c, base, "python", {{"id", "py"}});
    // A child of the interpreter that would outlive it if only the interpreter were killed.
    run(c, base, "py", "import subprocess\nchild = subprocess.Popen(['sleep', '600'])");
    const std::string leaf =
        sessions_cgroup() + "/" + sid + "/" + py["process"].get<std::string>() + "/cgroup.procs";
    {
        std::ifstream procs(leaf);
        std::string line;
        int count = 0;
        while (std::getline(procs, line)) ++count;
        EXPECT_EQ(count, 2) << "the interpreter and its child are in the context's leaf";
    }
    const pid_t interpreter = py["pid"].get<int>();
    auto ended = c.del(base);
    EXPECT_EQ(ended.status, 200u) << ended.body;
    EXPECT_FALSE(fs::exists(leaf)) << "the context's leaf is gone";
    EXPECT_FALSE(fs::exists(sessions_cgroup() + "/" + sid));
    EXPECT_NE(::kill(interpreter, 0), 0) << "the interpreter is gone";
}

TEST_F(CodeContexts, DeadContextSaysWhyRefusesRunsAndCanBeRecreated) {
    need("python3");
    auto c = client();
    const auto base = session(c);
    const json py = context(c, base, "python", {{"id", "py"}});
    auto killed = c.del(base + "/processes/" + py["process"].get<std::string>() + "?force=true");
    EXPECT_EQ(killed.status, 200u) << killed.body;
    json shown;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    do {
        shown = c.get(base + "/contexts/py").json();
        if (shown["status"] == "dead" && shown.contains("exit")) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    } while (std::chrono::steady_clock::now() < deadline);
    EXPECT_EQ(shown["status"], "dead") << shown.dump();
    EXPECT_FALSE(shown.value("error", "").empty()) << shown.dump();
    EXPECT_EQ(shown["exit"]["status"], "killed") << shown.dump();

    auto refused = c.post(base + "/contexts/py/run", {{"code", "1"}});
    EXPECT_EQ(refused.status, 409u) << refused.body;
    EXPECT_EQ(refused.error_code(), "context_dead");

    const json again = context(c, base, "python", {{"id", "py"}});
    EXPECT_EQ(again["status"], "idle") << again.dump();
    EXPECT_EQ(text_result(run(c, base, "py", "1 + 1")), "2");
    EXPECT_EQ(c.post(base + "/contexts", {{"language", "python"}, {"id", "py"}}).status, 409u)
        << "a live context's id is taken";
    EXPECT_EQ(c.del(base + "/contexts/py").status, 200u);
    EXPECT_EQ(c.get(base + "/contexts/py").status, 404u);
}

TEST_F(CodeContexts, BadInputIsRefusedNamingTheField) {
    auto c = client();
    const auto base = session(c);
    auto unknown = c.post(base + "/contexts", {{"language", "cobol"}});
    EXPECT_EQ(unknown.status, 400u);
    EXPECT_NE(unknown.error_message().find("language"), std::string::npos) << unknown.body;
    auto missing = c.post(base + "/contexts", json::object());
    EXPECT_EQ(missing.status, 400u);
    EXPECT_NE(missing.error_message().find("language"), std::string::npos) << missing.body;
    auto typo = c.post(base + "/contexts", {{"language", "python"}, {"langauge", "x"}});
    EXPECT_EQ(typo.status, 400u);
    EXPECT_NE(typo.error_message().find("langauge"), std::string::npos) << typo.body;
    EXPECT_EQ(c.post(base + "/contexts/none/run", {{"code", "1"}}).status, 404u);
    if (!host_has("python3")) return;
    context(c, base, "python", {{"id", "py"}});
    auto no_code = c.post(base + "/contexts/py/run", json::object());
    EXPECT_EQ(no_code.status, 400u);
    EXPECT_NE(no_code.error_message().find("code"), std::string::npos) << no_code.body;
    auto not_string = c.post(base + "/contexts/py/run", {{"code", 42}});
    EXPECT_EQ(not_string.status, 400u);
    EXPECT_NE(not_string.error_message().find("code"), std::string::npos) << not_string.body;
    // A body over the 8 MiB limit is refused from its Content-Length, before it is read.
    const std::string huge = raw_exchange(daemon_->socket_path(),
                                          "POST " + base +
                                              "/contexts/py/run HTTP/1.1\r\nHost: x\r\n"
                                              "Content-Type: application/json\r\nContent-Length: " +
                                              std::to_string(9u << 20) + "\r\n\r\n{\"code\": \"");
    EXPECT_EQ(huge.rfind("HTTP/1.1 413", 0), 0u) << huge.substr(0, 300);
}

TEST_F(CodeContexts, MissingInterpreterIsAClearError) {
    auto c = client();
    // A sandbox whose PATH has no interpreters: the error names the one it looked for.
    auto res = c.post("/v1/sessions", {{"policyYaml",
                                        "extends: default\n"
                                        "env: { clear: true, set: { PATH: /nonexistent } }\n"}});
    ASSERT_EQ(res.status, 201u) << res.body;
    const std::string base = "/v1/sessions/" + res.json()["id"].get<std::string>();
    auto python = c.post(base + "/contexts", {{"language", "python"}});
    EXPECT_EQ(python.status, 409u) << python.body;
    EXPECT_EQ(python.error_code(), "no_interpreter");
    EXPECT_NE(python.error_message().find("python3"), std::string::npos) << python.body;
    auto node = c.post(base + "/contexts", {{"language", "javascript"}});
    EXPECT_EQ(node.status, 409u) << node.body;
    EXPECT_NE(node.error_message().find("node"), std::string::npos) << node.body;
}

// A session's restricted token may use contexts, as it may run commands and shells; another
// session's token reaches nothing of this session.
TEST_F(CodeContexts, RestrictedTokenRunsCodeAndOtherSessionsTokensCannot) {
    need("python3");
    auto c = client();
    auto mine = c.post("/v1/sessions", {{"policy", "default"}});
    auto theirs = c.post("/v1/sessions", {{"policy", "default"}});
    ASSERT_EQ(mine.status, 201u);
    ASSERT_EQ(theirs.status, 201u);
    const std::string base = "/v1/sessions/" + mine.json()["id"].get<std::string>();
    const auto restricted = testing::bearer(mine.json()["restrictedToken"]);
    const auto other = testing::bearer(theirs.json()["token"]);
    auto created = c.post(base + "/contexts", {{"language", "python"}, {"id", "py"}}, restricted);
    ASSERT_EQ(created.status, 201u) << created.body;
    auto ran = c.post(base + "/contexts/py/run", {{"code", "2 ** 10"}}, restricted);
    ASSERT_EQ(ran.status, 200u) << ran.body;
    EXPECT_EQ(text_result(ran.json()), "1024");
    EXPECT_EQ(c.post(base + "/contexts/py/run", {{"code", "1"}}, other).status, 404u);
    EXPECT_EQ(c.get(base + "/contexts", other).status, 404u);
    EXPECT_EQ(c.del(base + "/contexts/py", other).status, 404u);
    EXPECT_EQ(c.del(base + "/contexts/py", restricted).status, 200u);
}

TEST_F(CodeContexts, Python_ImagesComeBackAsBase64Png) {
    need("python3");
    auto c = client();
    const auto base = session(c);
    context(c, base, "python", {{"id", "py"}});
    // An object that shows itself as a PNG (IPython's _repr_png_): its bytes come back base64.
    const json shown = run(c, base, "py",
                           "class Dot:\n"
                           "    def _repr_png_(self): return b'\\x89PNG\\r\\n\\x1a\\n'\n"
                           "Dot()");
    ASSERT_EQ(shown["results"].size(), 1u) << shown.dump();
    EXPECT_EQ(shown["results"][0]["image/png"], "iVBORw0KGgo=") << shown.dump();
    // A matplotlib figure, where the sandbox has matplotlib.
    const json probe =
        run(c, base, "py", "import importlib.util\nbool(importlib.util.find_spec('matplotlib'))");
    if (text_result(probe) != "True") GTEST_SKIP() << "matplotlib is not installed";
    const json plotted =
        run(c, base, "py", "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nNone");
    ASSERT_EQ(plotted["results"].size(), 1u) << plotted.dump().substr(0, 500);
    EXPECT_EQ(plotted["results"][0]["image/png"].get<std::string>().rfind("iVBORw0KGgo", 0), 0u);
    EXPECT_TRUE(run(c, base, "py", "None")["results"].empty()) << "the figure was closed";
}

// --- javascript -------------------------------------------------------------------------------

TEST_F(CodeContexts, JavaScript_StateResultsErrorsAndJson) {
    need("node");
    auto c = client();
    const auto base = session(c);
    const json js = context(c, base, "javascript", {{"id", "js"}});
    EXPECT_EQ(js["status"], "idle") << js.dump();
    run(c, base, "js", "var x = 40; let y = 2; const f = (v) => v * 2; function g() { return 1; }");
    const json sum = run(c, base, "js", "console.log('sum', x + y); f(x) + y + g()");
    EXPECT_EQ(sum["stdout"], "sum 42\n") << sum.dump();
    EXPECT_EQ(text_result(sum), "83");
    const json object = run(c, base, "js", "({ a: [1, 2], b: 'c' })");
    ASSERT_EQ(object["results"].size(), 1u) << object.dump();
    EXPECT_EQ(json::parse(object["results"][0]["application/json"].get<std::string>()),
              json({{"a", {1, 2}}, {"b", "c"}}));
    const json promise = run(c, base, "js", "Promise.resolve(6 * 7)");
    EXPECT_EQ(text_result(promise), "42") << "a final Promise is awaited: " << promise.dump();

    const json failed = run(c, base, "js", "console.error('oops'); null.field");
    EXPECT_EQ(failed["status"], "error") << failed.dump();
    EXPECT_EQ(failed["error"]["name"], "TypeError");
    EXPECT_EQ(failed["stderr"], "oops\n");
    EXPECT_EQ(text_result(run(c, base, "js", "x")), "40") << "the context survived the error";
}

TEST_F(CodeContexts, JavaScript_TopLevelAwaitKeepsDeclarationsAndAnswersTheFinalExpression) {
    need("node");
    auto c = client();
    const auto base = session(c);
    context(c, base, "javascript", {{"id", "js"}});
    const json declared = run(c, base, "js",
                              "const base = await Promise.resolve(40);\n"
                              "let { two } = await new Promise((r) => setTimeout(() => r({ two: 2 }), 20));\n"
                              "function add(a, b) { return a + b; }\n"
                              "class Box { constructor(v) { this.v = v; } }\n");
    EXPECT_EQ(declared["status"], "ok") << declared.dump();
    EXPECT_TRUE(declared["results"].empty()) << "no final expression: " << declared.dump();
    // Every kind of declaration of the awaiting run is there for the next, plain or awaiting.
    EXPECT_EQ(text_result(run(c, base, "js", "add(base, two)")), "42");
    const json awaited = run(c, base, "js", "const box = new Box(await Promise.resolve(6));\nbox.v * 7");
    EXPECT_EQ(text_result(awaited), "42") << awaited.dump();
    EXPECT_EQ(text_result(run(c, base, "js", "await Promise.resolve(box.v)")), "6");
    const json loop = run(c, base, "js",
                          "let total = 0;\nfor (const v of [1, 2, 3]) total += await Promise.resolve(v);\ntotal");
    EXPECT_EQ(text_result(loop), "6") << loop.dump();

    const json rejected = run(c, base, "js", "await Promise.reject(new RangeError('no such page'))");
    EXPECT_EQ(rejected["status"], "error") << rejected.dump();
    EXPECT_EQ(rejected["error"]["name"], "RangeError");
    EXPECT_EQ(rejected["error"]["value"], "no such page");
    // `await` that is not top-level code stays a SyntaxError, named as node names it.
    const json bad = run(c, base, "js", "function f() { await 1 }");
    EXPECT_EQ(bad["error"]["name"], "SyntaxError") << bad.dump();
    const json hung = run(c, base, "js", "await new Promise(() => {})", {{"timeoutMs", 300}});
    EXPECT_EQ(hung["status"], "timeout") << "an await that never settles: " << hung.dump();
    EXPECT_EQ(hung["error"]["name"], "Interrupted");
    EXPECT_EQ(text_result(run(c, base, "js", "add(base, 2)")), "42") << "the state survived";
}

TEST_F(CodeContexts, JavaScript_RichResultsFollowIPythonsConventionAndDisplay) {
    need("node");
    auto c = client();
    const auto base = session(c);
    context(c, base, "javascript", {{"id", "js"}});
    // A value with _repr_*_ methods: each adds its mime type; bytes become base64.
    const json rich = run(c, base, "js",
                          "({ _repr_html_() { return '<b>42</b>'; },\n"
                          "   _repr_png_() { return new Uint8Array([0x89, 0x50, 0x4e, 0x47]); },\n"
                          "   _repr_json_() { return { answer: 42 }; },\n"
                          "   _repr_markdown_() { throw new Error('a failing repr is left out'); } })");
    ASSERT_EQ(rich["results"].size(), 1u) << rich.dump();
    const json& data = rich["results"][0];
    EXPECT_EQ(data["text/html"], "<b>42</b>");
    EXPECT_EQ(data["image/png"], "iVBORw==");
    EXPECT_EQ(json::parse(data["application/json"].get<std::string>()), json({{"answer", 42}}));
    EXPECT_FALSE(data.contains("text/markdown")) << data.dump();
    EXPECT_TRUE(data.contains("text/plain"));
    // A class is not its instances: its prototype's _repr_html_ does not make it HTML.
    const json klass = run(c, base, "js", "class Page { _repr_html_() { return '<p>'; } }; Page");
    EXPECT_FALSE(klass["results"][0].contains("text/html")) << klass.dump();
    EXPECT_EQ(run(c, base, "js", "new Page()")["results"][0]["text/html"], "<p>");

    // display() sends results during the run, in order, before the final expression's.
    const json shown = run(c, base, "js",
                           "display(display.HTML('<h1>t</h1>'));\n"
                           "display(display.PNG(Buffer.from('png bytes')), display.SVG('<svg/>'));\n"
                           "display.JSON([1, 2])");
    ASSERT_EQ(shown["results"].size(), 4u) << shown.dump();
    EXPECT_EQ(shown["results"][0]["text/html"], "<h1>t</h1>");
    EXPECT_EQ(shown["results"][0]["text/plain"], "<HTML>");
    EXPECT_FALSE(shown["results"][0].contains("application/json")) << "HTML is no JSON";
    EXPECT_EQ(shown["results"][1]["image/png"], "cG5nIGJ5dGVz");
    EXPECT_EQ(shown["results"][2]["image/svg+xml"], "<svg/>");
    EXPECT_EQ(shown["results"][3]["application/json"], "[1,2]");
    // An awaited rich value is rich too.
    const json awaited = run(c, base, "js", "await Promise.resolve(display.Markdown('*m*'))");
    EXPECT_EQ(awaited["results"][0]["text/markdown"], "*m*") << awaited.dump();
}

TEST_F(CodeContexts, JavaScript_TimeoutInterruptsABusyLoopAndKeepsTheState) {
    need("node");
    auto c = client();
    const auto base = session(c);
    context(c, base, "javascript", {{"id", "js"}});
    run(c, base, "js", "var counter = 7");
    const json timed = run(c, base, "js", "while (true) {}", {{"timeoutMs", 300}});
    EXPECT_EQ(timed["status"], "timeout") << timed.dump();
    EXPECT_EQ(timed["error"]["name"], "Interrupted") << timed.dump();
    EXPECT_EQ(text_result(run(c, base, "js", "counter + 1")), "8");
    const json pending = run(c, base, "js", "new Promise(() => {})", {{"timeoutMs", 300}});
    EXPECT_EQ(pending["status"], "timeout") << "a Promise that never settles: " << pending.dump();
    EXPECT_EQ(text_result(run(c, base, "js", "counter")), "7");
}

TEST_F(CodeContexts, JavaScript_TenMebibytesOfOutputArriveWhole) {
    need("node");
    auto c = client();
    const auto base = session(c);
    context(c, base, "javascript", {{"id", "js"}});
    const json big = run(c, base, "js", "process.stdout.write('x'.repeat(10 << 20)); 'done'");
    ASSERT_EQ(big["status"], "ok") << big.dump().substr(0, 500);
    EXPECT_EQ(big["stdout"].get<std::string>().size(), size_t{10} << 20);
    EXPECT_FALSE(big["truncated"]);
    EXPECT_EQ(text_result(big), "'done'");
}

TEST_F(CodeContexts, JavaScript_ContextIsKilledWithItsSession) {
    need("node");
    auto c = client();
    auto res = c.post("/v1/sessions", {{"policy", "default"}});
    ASSERT_EQ(res.status, 201u);
    const std::string sid = res.json()["id"];
    const std::string base = "/v1/sessions/" + sid;
    const json js = context(c, base, "javascript", {{"id", "js"}});
    run(c, base, "js", "require('child_process').spawn('sleep', ['600'], { detached: true })");
    const std::string leaf = sessions_cgroup() + "/" + sid + "/" + js["process"].get<std::string>();
    EXPECT_TRUE(fs::exists(leaf));
    EXPECT_EQ(c.del(base).status, 200u);
    EXPECT_FALSE(fs::exists(leaf));
    EXPECT_NE(::kill(js["pid"].get<int>(), 0), 0);
}

}  // namespace
}  // namespace corral
