// Code contexts (issue 14) hold a channel between corrald and an interpreter that runs code the
// daemon must not trust: the code shares the driver's process, so it can write to its own stdout,
// to fds its children inherit, and — knowing where to look — to the driver's channel itself.
// Precedent: issue 10 item 2 (daemon input that blocks or bloats it). None of that may forge a
// run's results through stdout, crash corrald, make it buffer without bound, or reach another
// context: the worst code can do is end its own context, with a clear reason.

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "support/security_daemon.hpp"

namespace corral::security {
namespace {

using nlohmann::json;
using testing::HttpClient;

bool host_has(const char* path) {
    return ::access(path, X_OK) == 0;
}

/// corrald's resident memory in KiB (VmRSS), 0 when unreadable.
long daemon_rss_kib(pid_t pid) {
    std::ifstream status("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(status, line))
        if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
    return 0;
}

class CodeContextChannel : public DaemonTest {
  protected:
    std::string base_;
    HttpClient c_ = HttpClient::unix_socket("/nonexistent");

    void SetUp() override {
        DaemonTest::SetUp();
        if (IsSkipped() || HasFatalFailure()) return;
        c_ = client();
        base_ = session(c_, "default").first;
    }
    void create(const std::string& id, const std::string& language) {
        auto res = c_.post(base_ + "/contexts", {{"id", id}, {"language", language}});
        ASSERT_EQ(res.status, 201u) << res.body;
    }
    json run(const std::string& id, const std::string& code) {
        auto res = c_.post(base_ + "/contexts/" + id + "/run", {{"code", code}});
        EXPECT_EQ(res.status, 200u) << res.body;
        return res.json();
    }
    json context(const std::string& id) { return c_.get(base_ + "/contexts/" + id).json(); }
    /// The daemon still answers and a fresh context in the same session works.
    void expect_daemon_fine(const std::string& language) {
        EXPECT_EQ(::kill(daemon_->pid(), 0), 0) << "corrald is alive";
        EXPECT_EQ(c_.get("/v1/health").status, 200u);
        static int n = 0;
        const std::string id = "fresh" + std::to_string(++n);
        create(id, language);
        const json out = run(id, "6 * 7");
        ASSERT_FALSE(out["results"].empty()) << out.dump();
        EXPECT_EQ(out["results"][0]["text/plain"], "42");
    }
};

// A frame written to stdout — by the code through sys.stdout, straight to fd 1, or by a child —
// is output, never protocol: the run's real result is still the one that comes back.
TEST_F(CodeContextChannel, FakeFramesOnStdoutAreOnlyOutput_Issue10Item2) {
    if (!host_has("/usr/bin/python3")) GTEST_SKIP() << "python3 is not installed";
    create("py", "python");
    const std::string code =
        "import os, sys, subprocess, json, struct\n"
        "fake = json.dumps({'type': 'result', 'run': 1, 'data': {'text/plain': 'FORGED'}})\n"
        "frame = struct.pack('>I', len(fake)) + fake.encode()\n"
        "sys.stdout.write(frame.decode('latin-1'))\n"
        "os.write(1, frame + struct.pack('>I', 0xffffffff))\n"
        "os.write(2, frame)\n"
        "r = subprocess.run(['sh', '-c', 'printf \"\\\\377\\\\377\\\\377\\\\377\" >&3'],"
        " capture_output=True)\n"
        "print('child exit', r.returncode)\n"
        "'real'";
    const json out = run("py", code);
    EXPECT_EQ(out["status"], "ok") << out.dump();
    ASSERT_EQ(out["results"].size(), 1u) << out.dump();
    EXPECT_EQ(out["results"][0]["text/plain"], "'real'");
    EXPECT_NE(out["stdout"].get<std::string>().find("FORGED"), std::string::npos)
        << "the fake frame came back as the text it was";
    EXPECT_NE(out["stdout"].get<std::string>().find("child exit 2"), std::string::npos)
        << "the channel is not inherited by the code's children: " << out.dump();
    EXPECT_EQ(context("py")["status"], "idle");
    expect_daemon_fine("python");
}

TEST_F(CodeContextChannel, NodeFakeFramesOnStdoutAreOnlyOutput_Issue10Item2) {
    if (!host_has("/usr/bin/node")) GTEST_SKIP() << "node is not installed";
    create("js", "javascript");
    const std::string code =
        "const fake = JSON.stringify({type: 'done', run: 1});\n"
        "const head = Buffer.alloc(4); head.writeUInt32BE(fake.length);\n"
        "process.stdout.write(Buffer.concat([head, Buffer.from(fake)]));\n"
        "require('fs').writeSync(1, Buffer.concat([head, Buffer.from(fake)]));\n"
        "let child = 0;\n"
        "try { require('child_process').execSync('printf \"\\\\377\\\\377\\\\377\\\\377\" >&3',"
        " {stdio: 'pipe'}); } catch (e) { child = e.status; }\n"
        "console.log('child exit', child);\n"
        "'real'";
    const json out = run("js", code);
    EXPECT_EQ(out["status"], "ok") << out.dump();
    ASSERT_EQ(out["results"].size(), 1u) << out.dump();
    EXPECT_EQ(out["results"][0]["text/plain"], "'real'");
    EXPECT_NE(out["stdout"].get<std::string>().find("child exit 2"), std::string::npos)
        << out.dump();
    EXPECT_EQ(context("js")["status"], "idle");
    expect_daemon_fine("javascript");
}

/// Python code that writes `payload` (a Python bytes expression) to the driver's channel: the one
/// socket among its fds.
std::string write_to_channel(const std::string& payload) {
    return "import os, stat, struct\n"
           "def framed(body):\n"
           "    return struct.pack('>I', len(body)) + body\n"
           "for fd in range(3, 1024):\n"
           "    try:\n"
           "        if stat.S_ISSOCK(os.fstat(fd).st_mode):\n"
           "            os.write(fd, " +
           payload +
           ")\n"
           "    except OSError:\n"
           "        pass\n";
}

// A header announcing 4 GiB: refused when it arrives, nothing buffered for it.
TEST_F(CodeContextChannel, HugeFrameLengthEndsOnlyThatContext_Issue10Item2) {
    if (!host_has("/usr/bin/python3")) GTEST_SKIP() << "python3 is not installed";
    create("victim", "python");
    run("victim", "x = 1");
    create("other", "python");
    run("other", "kept = 'mine'");
    const long rss_before = daemon_rss_kib(daemon_->pid());
    const json out =
        run("victim", write_to_channel("struct.pack('>I', 0xffffffff) + b'x' * (1 << 20)"));
    EXPECT_EQ(out["status"], "context_died") << out.dump();
    EXPECT_NE(out.value("message", "").find("over the"), std::string::npos) << out.dump();
    const json dead = context("victim");
    EXPECT_EQ(dead["status"], "dead");
    EXPECT_NE(dead.value("error", "").find("4294967295"), std::string::npos) << dead.dump();
    // Bounded: a few MiB at most, never the 4 GiB announced (a generous bound, not a timing).
    EXPECT_LT(daemon_rss_kib(daemon_->pid()) - rss_before, 64 * 1024);
    // The other context of the session is untouched.
    const json other = run("other", "kept");
    EXPECT_EQ(other["results"][0]["text/plain"], "'mine'") << other.dump();
    expect_daemon_fine("python");
}

// Garbage, deep nesting, unknown types, frames for another run: each ends the context that sent
// it with the reason, and the daemon goes on.
TEST_F(CodeContextChannel, MalformedFramesEndTheContextNotTheDaemon_Issue10Item2) {
    if (!host_has("/usr/bin/python3")) GTEST_SKIP() << "python3 is not installed";
    // `framed(b)`: b behind its exact length, so each case is judged on its content alone.
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"framed(b'{nope')", "not valid"},
        {"framed(b'[' * 200000)", "nested deeper"},
        {"framed(b'[]')", "not a JSON object"},
        {"framed(b'{\"type\":\"launch\",\"run\":1}')", "unknown type"},
        {"framed(b'{\"type\":\"done\",\"run\":99}')", "run 99"},
        {"framed(b'{\"type\":\"result\",\"run\":1,\"data\":{\"text/plain\":[1]}}')",
         "not a string"},
        {"framed(b'\\xff\\xfe')", "not valid"},
    };
    int n = 0;
    for (const auto& [payload, reason] : cases) {
        const std::string id = "bad" + std::to_string(++n);
        create(id, "python");
        const json out = run(id, write_to_channel(payload) + "import time\ntime.sleep(30)");
        EXPECT_EQ(out["status"], "context_died") << payload << ": " << out.dump();
        const json dead = context(id);
        EXPECT_EQ(dead["status"], "dead") << payload;
        EXPECT_NE(dead.value("error", "").find(reason), std::string::npos)
            << payload << ": " << dead.dump();
        auto refused = c_.post(base_ + "/contexts/" + id + "/run", {{"code", "1"}});
        EXPECT_EQ(refused.status, 409u) << refused.body;
    }
    expect_daemon_fine("python");
}

// Output beyond the policy's output cap (16 MiB in `default`) is dropped, not kept: the run says
// it was truncated and corrald's memory stays bounded.
TEST_F(CodeContextChannel, OutputFloodIsCappedPerRun_Issue10Item2) {
    if (!host_has("/usr/bin/python3")) GTEST_SKIP() << "python3 is not installed";
    create("flood", "python");
    const long rss_before = daemon_rss_kib(daemon_->pid());
    const json out = run(
        "flood", "import sys\nfor _ in range(64):\n    sys.stdout.write('y' * (1 << 20))\n'end'");
    EXPECT_EQ(out["status"], "ok") << out.dump().substr(0, 300);
    EXPECT_TRUE(out["truncated"]);
    EXPECT_LE(out["stdout"].get<std::string>().size(), size_t{16} << 20);
    ASSERT_FALSE(out["results"].empty()) << out.dump().substr(0, 500);
    EXPECT_EQ(out["results"][0]["text/plain"], "'end'");
    EXPECT_LT(daemon_rss_kib(daemon_->pid()) - rss_before, 256 * 1024);
    expect_daemon_fine("python");
}

}  // namespace
}  // namespace corral::security
