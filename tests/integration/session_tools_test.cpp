// Issue 13's remaining session tools, driven over HTTP against a real corrald: big `run` outputs
// (head and tail, non-UTF-8 bytes), git checkout inside a session, file watches, and sessions over
// an existing host directory (workdir).

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include "support/daemon_process.hpp"
#include "support/http_client.hpp"

namespace corral {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::DaemonProcess;
using testing::HttpClient;
using testing::url_encode;

constexpr uint16_t kPortBase = 3000;  // 3000-4999: below the other suites' ranges

std::string decode_base64(const std::string& text) {
    auto value = [](char c) -> int {
        if (c >= 'A' && c <= 'Z') return c - 'A';
        if (c >= 'a' && c <= 'z') return c - 'a' + 26;
        if (c >= '0' && c <= '9') return c - '0' + 52;
        if (c == '+') return 62;
        if (c == '/') return 63;
        return -1;
    };
    std::string out;
    int bits = 0, acc = 0;
    for (char c : text) {
        const int v = value(c);
        if (v < 0) continue;
        acc = (acc << 6) | v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out += static_cast<char>((acc >> bits) & 0xff);
        }
    }
    return out;
}

class SessionTools : public ::testing::Test {
  protected:
    void SetUp() override {
        if (::geteuid() != 0) GTEST_SKIP() << "needs root (cgroups, socket owner root)";
        if (!fs::exists(CORRAL_BINARY_DIR "/supervisor/corrald"))
            GTEST_SKIP() << "corrald is not built";
        daemon_ = std::make_unique<DaemonProcess>(kPortBase, daemon_args());
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
    virtual std::vector<std::string> daemon_args() { return {}; }
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
    static json run(HttpClient& c, const std::string& base, const std::string& command) {
        auto res = c.post(base + "/run", {{"command", command}});
        EXPECT_EQ(res.status, 200u) << res.body.substr(0, 2000);
        return res.json();
    }

    std::unique_ptr<DaemonProcess> daemon_;
};

// --- big outputs (issue 13.9) -------------------------------------------------------------------

constexpr size_t kCap = 64 * 1024;
const char* const kSmallCapPolicy = "name: small-cap\nextends: none\nlimits: { output: 64Ki }\n";

TEST_F(SessionTools, RunOutput_PastTheCapKeepsTheHeadAndTheTailWithAMarker) {
    auto c = client();
    const auto base = s(create_session(c, {{"policyYaml", kSmallCapPolicy}}));
    const json r = run(c, base,
                       "echo 'FIRST LINE: starting the job'; yes 'a middle line' | head -n 20000; "
                       "echo 'error: the thing at the end failed'");
    const std::string out = r["stdout"];
    const uint64_t total = r["output"]["stdout"]["bytes"];
    EXPECT_EQ(total, 29u + 20000u * 14u + 35u);
    EXPECT_EQ(r["truncated"], true);
    EXPECT_FALSE(r.contains("stdoutBase64")) << "ASCII stays text";
    EXPECT_TRUE(out.starts_with("FIRST LINE: starting the job\na middle line\n"))
        << out.substr(0, 80);
    EXPECT_TRUE(out.ends_with("a middle line\nerror: the thing at the end failed\n"));
    const uint64_t omitted = r["omittedBytes"]["stdout"];
    EXPECT_EQ(omitted, total - kCap);
    EXPECT_EQ(r["omittedBytes"]["stderr"], 0);
    const std::string marker = "\n[... " + std::to_string(omitted) + " bytes omitted ...]\n";
    const size_t at = out.find(marker);
    ASSERT_NE(at, std::string::npos) << "no marker";
    EXPECT_EQ(at, kCap / 2) << "the head is half the cap";
    EXPECT_EQ(out.size(), kCap + marker.size()) << "head + marker + tail";

    // Logs by offset keep their meaning: the retained window is the LAST cap bytes of the stream,
    // and a read from 0 is told how much it skipped.
    const std::string id = r["id"];
    auto logs = c.get(base + "/processes/" + id + "/logs?stream=stdout&offset=0&limit=100");
    ASSERT_EQ(logs.status, 200u) << logs.body;
    EXPECT_EQ(logs.json()["offset"], total - kCap);
    EXPECT_EQ(logs.json()["skipped"], total - kCap);
}

TEST_F(SessionTools, RunOutput_UnderTheCapIsWholeAndUnmarked) {
    auto c = client();
    const auto base = s(create_session(c, {{"policyYaml", kSmallCapPolicy}}));
    const json r = run(c, base, "head -c 65536 /dev/zero | tr '\\0' x; echo oops >&2");
    EXPECT_EQ(r["stdout"], std::string(kCap, 'x'));
    EXPECT_EQ(r["stderr"], "oops\n");
    EXPECT_EQ(r["truncated"], false);
    EXPECT_EQ(r["omittedBytes"]["stdout"], 0);
}

TEST_F(SessionTools, RunOutput_UTF8CutAtTheCapStaysText) {
    // "é\n" is three bytes: the cap's halves fall inside characters, and the result must still be
    // well-formed text (no stdoutBase64), the cut moved to character boundaries.
    auto c = client();
    const auto base = s(create_session(c, {{"policyYaml", kSmallCapPolicy}}));
    const json r = run(c, base, "yes 'é' | head -n 50000");
    ASSERT_TRUE(r.contains("stdout"));
    EXPECT_FALSE(r.contains("stdoutBase64")) << r.dump().substr(0, 300);
    const std::string out = r["stdout"];
    EXPECT_TRUE(out.starts_with("é\né\n"));
    EXPECT_TRUE(out.ends_with("é\né\n"));
    EXPECT_EQ(out.find("\xEF\xBF\xBD"), std::string::npos) << "no replacement character";
    const uint64_t omitted = r["omittedBytes"]["stdout"];
    const std::string marker = "\n[... " + std::to_string(omitted) + " bytes omitted ...]\n";
    EXPECT_EQ(out.size() - marker.size() + omitted, 150000u) << "every byte is kept or counted";
}

TEST_F(SessionTools, RunOutput_NonUtf8GivesReplacementTextBesideTheExactBytes) {
    auto c = client();
    const auto base = s(create_session(c));
    const json r = run(c, base, "printf 'ok \\377\\376 done\\n'; printf '\\300' >&2");
    EXPECT_EQ(r["stdout"], "ok \xEF\xBF\xBD\xEF\xBF\xBD done\n") << r.dump();
    EXPECT_EQ(decode_base64(r["stdoutBase64"]), "ok \xff\xfe done\n");
    EXPECT_EQ(r["stderr"], "\xEF\xBF\xBD");
    EXPECT_EQ(decode_base64(r["stderrBase64"]), "\xc0");
    // Plain text carries no base64 copy.
    const json plain = run(c, base, "echo fine");
    EXPECT_EQ(plain["stdout"], "fine\n");
    EXPECT_FALSE(plain.contains("stdoutBase64"));
}

// --- git checkout (issue 13.8) ------------------------------------------------------------------

/// Builds, inside the session, a bare repository `origin.git` with a `main` branch (one commit)
/// and a `feature` branch (three commits). No network: everything is a path in the session.
void make_origin(HttpClient& c, const std::string& base) {
    auto r = c.post(
        base + "/run",
        {{"command",
          "set -e; export GIT_CONFIG_GLOBAL=/dev/null; git init -q --bare -b main origin.git; "
          "git init -q -b main src; cd src; git config user.email t@example.com; "
          "git config user.name t; echo one > a.txt; git add .; git commit -qm one; "
          "git push -q ../origin.git main; git checkout -qb feature; echo two > b.txt; "
          "git add .; git commit -qm two; echo three > c.txt; git add .; git commit -qm three; "
          "git push -q ../origin.git feature"}});
    ASSERT_EQ(r.status, 200u) << r.body;
    ASSERT_EQ(r.json()["exitCode"], 0) << r.body;
}

TEST_F(SessionTools, GitCheckout_ClonesTheDefaultBranchIntoADirectoryNamedAfterTheUrl) {
    auto c = client();
    const json session = create_session(c);
    const auto base = s(session);
    const std::string cwd = session["cwd"];
    make_origin(c, base);
    auto res = c.post(base + "/git/checkout", {{"url", "file://" + cwd + "/origin.git"}});
    ASSERT_EQ(res.status, 200u) << res.body;
    EXPECT_EQ(res.json()["targetDir"], cwd + "/origin");
    EXPECT_EQ(res.json()["process"]["exitCode"], 0);
    auto file = c.get(base + "/files?path=origin/a.txt");
    EXPECT_EQ(file.status, 200u);
    EXPECT_EQ(file.body, "one\n");
    EXPECT_EQ(c.get(base + "/files/stat?path=origin/b.txt").status, 404u) << "main has no b.txt";
}

TEST_F(SessionTools, GitCheckout_BranchDepthAndTargetDir) {
    auto c = client();
    const json session = create_session(c);
    const auto base = s(session);
    make_origin(c, base);
    const std::string cwd = session["cwd"];
    // A plain path inside the session, a branch, a target below a directory that does not exist.
    auto res =
        c.post(base + "/git/checkout",
               {{"url", cwd + "/origin.git"}, {"branch", "feature"}, {"targetDir", "work/feat"}});
    ASSERT_EQ(res.status, 200u) << res.body;
    EXPECT_EQ(res.json()["branch"], "feature");
    EXPECT_EQ(res.json()["targetDir"], cwd + "/work/feat");
    EXPECT_EQ(c.get(base + "/files?path=work/feat/c.txt").body, "three\n");
    EXPECT_EQ(run(c, base, "git -C work/feat rev-parse --abbrev-ref HEAD")["stdout"], "feature\n");
    EXPECT_EQ(run(c, base, "git -C work/feat rev-list --count HEAD")["stdout"], "3\n");

    // depth: git honours it for file:// urls (a plain path is a local clone, which ignores it).
    auto shallow = c.post(base + "/git/checkout", {{"url", "file://" + cwd + "/origin.git"},
                                                   {"branch", "feature"},
                                                   {"depth", 1},
                                                   {"targetDir", "shallow"}});
    ASSERT_EQ(shallow.status, 200u) << shallow.body;
    EXPECT_EQ(run(c, base, "git -C shallow rev-list --count HEAD")["stdout"], "1\n");
}

TEST_F(SessionTools, GitCheckout_ABadBranchReportsGitsOwnMessage) {
    auto c = client();
    const json session = create_session(c);
    const auto base = s(session);
    make_origin(c, base);
    auto res = c.post(base + "/git/checkout",
                      {{"url", "file://" + session["cwd"].get<std::string>() + "/origin.git"},
                       {"branch", "no-such-branch"}});
    ASSERT_EQ(res.status, 422u) << res.body;
    const json error = res.json()["error"];
    EXPECT_EQ(error["code"], "git_failed");
    const std::string message = error["message"];
    EXPECT_NE(message.find("no-such-branch"), std::string::npos) << message;
    EXPECT_NE(message.find("not found"), std::string::npos) << message;
    EXPECT_EQ(error["process"]["exitCode"], 128);
    EXPECT_NE(error["process"]["stderr"].get<std::string>().find("fatal:"), std::string::npos);

    auto missing = c.post(base + "/git/checkout", {{"url", "file:///no/such/repo.git"}});
    ASSERT_EQ(missing.status, 422u) << missing.body;
    EXPECT_NE(missing.json()["error"]["message"].get<std::string>().find(
                  "does not appear to be a git repository"),
              std::string::npos)
        << missing.body;
}

TEST_F(SessionTools, GitCheckout_RunsInsideTheSessionsConfinement) {
    // With the default preset git runs in the session's namespaces as its sandbox identity: the
    // clone lands in the session's workspace as the processes see it.
    auto c = client();
    const json session = create_session(c, {{"policy", "default"}});
    const auto base = s(session);
    make_origin(c, base);
    auto res = c.post(base + "/git/checkout",
                      {{"url", "file:///workspace/origin.git"}, {"targetDir", "/workspace/clone"}});
    ASSERT_EQ(res.status, 200u) << res.body;
    EXPECT_EQ(c.get(base + "/files?path=/workspace/clone/a.txt").body, "one\n");
}

// Security: a url or branch that git would read as an option or as a command (CVE-2017-1000117:
// ssh://-oProxyCommand=; git's ext:: and fd:: transports, which protocol.allow marks dangerous;
// CVE-2020-5260: a newline in a url) is refused before git runs, and nothing runs.
TEST_F(SessionTools, GitCheckout_RefusesUrlsAndBranchesThatAreOptionsOrCommands) {
    auto c = client();
    const json session = create_session(c);
    const auto base = s(session);
    const std::string cwd = session["cwd"];
    const std::string pwned = cwd + "/pwned";
    for (const json& body :
         {json{{"url", "ext::sh -c touch% " + pwned}}, json{{"url", "EXT::sh -c touch% " + pwned}},
          json{{"url", "fd::3"}}, json{{"url", "-u touch " + pwned}},
          json{{"url", "--upload-pack=touch " + pwned}},
          json{{"url", "ssh://-oProxyCommand=touch " + pwned + "/x"}},
          json{{"url", "https://example.com/a\nhost=evil.example"}},
          json{{"url", "file://" + cwd + "/x"}, {"branch", "--upload-pack=touch " + pwned}},
          json{{"url", "file://" + cwd + "/x"}, {"targetDir", "--template=/tmp"}},
          json{{"url", "file://" + cwd + "/x"}, {"depth", 0}}, json{{"url", ""}},
          json{{"branch", "main"}}, json{{"url", "file:///x"}, {"recurseSubmodules", true}}}) {
        auto res = c.post(base + "/git/checkout", body);
        EXPECT_EQ(res.status, 400u) << body.dump() << " -> " << res.body;
    }
    EXPECT_FALSE(fs::exists(session["root"].get<std::string>() + "/pwned"));
    auto procs = c.get(base + "/processes");
    EXPECT_TRUE(procs.json()["processes"].empty()) << "no git was started: " << procs.body;
}

}  // namespace
}  // namespace corral
