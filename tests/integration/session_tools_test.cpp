// Issue 13's remaining session tools, driven over HTTP against a real corrald: big `run` outputs
// (head and tail, non-UTF-8 bytes), git checkout inside a session, file watches, and sessions over
// an existing host directory (workdir).

#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <thread>

#include "isolation/sandbox.hpp"
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

// Stop 44's red-team finding: finished records kept their output (up to 1.5 x limits.output per
// stream) for as many as 256 of them: ten 16 MiB spawns took corrald from 15 to 344 MB. Their
// output together is bounded now (four times limits.output): the oldest go first, answering 410
// like records past the count cap; the newest stays; small records are all kept.
TEST_F(SessionTools, FinishedRecords_TheirOutputTogetherIsBoundedOldestDroppedFirst) {
    auto c = client();
    const auto base = s(create_session(c, {{"policyYaml", kSmallCapPolicy}}));
    std::vector<std::string> small;
    for (int i = 0; i < 4; ++i) small.push_back(run(c, base, "echo small")["id"]);
    std::vector<std::string> big;
    for (int i = 0; i < 5; ++i)  // 128 KiB per stream: ~192 KiB kept per record of a 64 KiB cap
        big.push_back(run(c, base,
                          "head -c 131072 /dev/zero; head -c 131072 /dev/zero >&2")["id"]);
    // The prune runs just after each finish; the newest big record must stay readable.
    auto newest = c.get(base + "/processes/" + big.back());
    EXPECT_EQ(newest.status, 200u) << newest.body;
    bool dropped = false;
    for (int i = 0; i < 100 && !dropped; ++i) {
        dropped = c.get(base + "/processes/" + big.front()).status == 410u;
        if (!dropped) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    EXPECT_TRUE(dropped) << "the oldest big record was kept past the output budget";
    auto gone = c.get(base + "/processes/" + big.front());
    EXPECT_NE(gone.error_message().find("limits.output"), std::string::npos) << gone.body;
    size_t kept_big = 0;
    for (const auto& id : big) kept_big += c.get(base + "/processes/" + id).status == 200u;
    EXPECT_GE(kept_big, 1u);
    EXPECT_LE(kept_big, 2u) << "more than 4 x 64 KiB of output kept";
    // The small ones came first, so they went first: a byte budget, oldest first, as the count
    // cap does; a session of small records keeps all of them (the next test's run included).
    auto fresh = s(create_session(c, {{"policyYaml", kSmallCapPolicy}}));
    std::vector<std::string> many;
    for (int i = 0; i < 20; ++i) many.push_back(run(c, fresh, "echo small")["id"]);
    for (const auto& id : many) EXPECT_EQ(c.get(fresh + "/processes/" + id).status, 200u) << id;
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

// --- files/watch (issue 13.8) -------------------------------------------------------------------

/// Streams GET `target`; once the watch is in place ("watching"), runs `act` on another thread
/// (its own connection); collects events until `enough(events)` or the stream ends.
std::vector<json> watch(HttpClient& c, const std::string& target, std::function<void()> act,
                        std::function<bool(const std::vector<json>&)> enough) {
    std::vector<json> events;
    std::thread actor;
    const unsigned status = c.stream_lines("GET", target, "", {}, [&](const std::string& line) {
        events.push_back(json::parse(line));
        if (events.back()["type"] == "watching") actor = std::thread(act);
        return !enough(events);
    });
    if (actor.joinable()) actor.join();
    EXPECT_EQ(status, 200u) << (events.empty() ? "" : events.back().dump());
    return events;
}

bool has(const std::vector<json>& events, const std::string& type, const std::string& path) {
    for (const auto& e : events)
        if (e["type"] == type && e.value("path", "") == path) return true;
    return false;
}

TEST_F(SessionTools, Watch_SeesCreateModifyDeleteAndMove) {
    auto c = client();
    const json session = create_session(c);
    const auto base = s(session);
    const std::string cwd = session["cwd"];
    ASSERT_EQ(c.post(base + "/files/mkdir", {{"path", "d"}}).status, 201u);
    const std::string d = cwd + "/d";
    auto events = watch(
        c, base + "/files/watch?path=d&recursive=true",
        [&] {
            auto other = client();
            run(other, base,
                "cd d && echo a > f && echo b >> f && mv f g && mkdir -p sub/deeper && "
                "echo x > sub/deeper/y && rm g && mv sub moved && echo z > moved/deeper/w && "
                "touch end");
        },
        [&](const std::vector<json>& e) { return has(e, "create", d + "/end"); });
    ASSERT_FALSE(events.empty());
    EXPECT_EQ(events[0]["type"], "watching");
    EXPECT_EQ(events[0]["path"], d);
    EXPECT_EQ(events[0]["recursive"], true);
    EXPECT_TRUE(has(events, "create", d + "/f"));
    EXPECT_TRUE(has(events, "modify", d + "/f"));
    EXPECT_TRUE(has(events, "delete", d + "/g"));
    EXPECT_TRUE(has(events, "create", d + "/sub"));
    // Created below a directory that was new a moment ago: seen by its watch or by the scan, at
    // the path it had when the watch saw it (on a loaded host the watch may read the creation
    // of `sub` only after it was moved: the scan of `moved` then reports it there).
    EXPECT_TRUE(has(events, "create", d + "/sub/deeper/y") ||
                has(events, "create", d + "/moved/deeper/y"))
        << "y was never reported";
    bool moved = false, renamed_dir = false;
    for (const auto& e : events) {
        if (e["type"] == "move" && e["from"] == d + "/f" && e["to"] == d + "/g") moved = true;
        if (e["type"] == "move" && e["from"] == d + "/sub" && e["to"] == d + "/moved" &&
            e["isDir"] == true)
            renamed_dir = true;
    }
    EXPECT_TRUE(moved);
    EXPECT_TRUE(renamed_dir);
    // After a directory moved, its watches name it by its new path.
    EXPECT_TRUE(has(events, "create", d + "/moved/deeper/w"));
    uint64_t seq = 0;
    for (const auto& e : events) EXPECT_EQ(e["seq"], seq++);
    for (const auto& e : events) EXPECT_NE(e["type"], "error") << e.dump();
}

TEST_F(SessionTools, Watch_WithoutRecursiveSeesOnlyTheDirectoryItself) {
    auto c = client();
    const json session = create_session(c);
    const auto base = s(session);
    const std::string cwd = session["cwd"];
    auto events = watch(
        c, base + "/files/watch?path=.",
        [&] {
            auto other = client();
            run(other, base, "mkdir -p sub && echo x > sub/inner && echo y > top");
        },
        [&](const std::vector<json>& e) { return has(e, "create", cwd + "/top"); });
    EXPECT_TRUE(has(events, "create", cwd + "/sub"));
    EXPECT_FALSE(has(events, "create", cwd + "/sub/inner"));
}

TEST_F(SessionTools, Watch_EndsWithOneFinalEventWhenTheSessionEnds) {
    auto c = client();
    const json session = create_session(c);
    const auto base = s(session);
    auto events = watch(
        c, base + "/files/watch?path=.&recursive=true",
        [&] {
            auto other = client();
            EXPECT_EQ(other.del(base).status, 200u);
        },
        [](const std::vector<json>&) { return false; });  // until the daemon ends the stream
    ASSERT_GE(events.size(), 2u);
    EXPECT_EQ(events.back()["type"], "end") << events.back().dump();
    EXPECT_EQ(events.back()["reason"], "session_ended");
    size_t finals = 0;
    for (const auto& e : events) finals += e["type"] == "end" || e["type"] == "error";
    EXPECT_EQ(finals, 1u);
    // A watch of an ended session is refused before any stream starts.
    EXPECT_EQ(c.get(base + "/files/watch?path=.").status, 409u);
}

// Stop 44's red-team finding: a session's (restricted) token opened one watch per connection,
// each a root inotify instance, until the host's fs.inotify.max_user_instances was used up and a
// root process outside corral got EMFILE. A session now has a share (8 watches); past it the
// answer is 429 naming the share, another session still watches, and a watch whose client went
// away gives its share back.
TEST_F(SessionTools, Watch_ASessionPastItsShareOfWatchesIs429AndOthersStillWatch) {
    auto c = client();
    const json a = create_session(c);
    const json b = create_session(c);
    constexpr int kShare = 8;  // InotifyBudget::Limits::instances_per_session
    std::atomic<int> watching{0};
    std::vector<std::thread> holders;
    for (int i = 0; i < kShare; ++i) {
        holders.emplace_back([&] {
            auto own = client();
            own.stream_lines("GET", s(a) + "/files/watch?path=.", "", {},
                             [&](const std::string& line) {
                                 const json event = json::parse(line);
                                 if (event["type"] == "watching") ++watching;
                                 // Until the stop file appears (or the stream ends).
                                 return !(event["type"] == "create" &&
                                          event.value("path", "").ends_with("/stop"));
                             });
        });
    }
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (watching < kShare && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ASSERT_EQ(watching.load(), kShare);

    const auto refused = c.get(s(a) + "/files/watch?path=.");
    EXPECT_EQ(refused.status, 429u) << refused.body;
    EXPECT_EQ(refused.error_code(), "too_many_watches") << refused.body;
    EXPECT_NE(refused.error_message().find("8 file watches"), std::string::npos) << refused.body;

    // Another session is not held to a's share.
    auto other = watch(
        c, s(b) + "/files/watch?path=.",
        [&] {
            auto own = client();
            run(own, s(b), "touch mine");
        },
        [&](const std::vector<json>& e) {
            return has(e, "create", b["cwd"].get<std::string>() + "/mine");
        });
    EXPECT_TRUE(has(other, "create", b["cwd"].get<std::string>() + "/mine"));

    // The holders' clients go away; their shares come back.
    run(c, s(a), "touch stop");
    for (auto& t : holders) t.join();
    bool again = false;
    for (int i = 0; i < 100 && !again; ++i) {
        auto next = client();
        next.stream_lines("GET", s(a) + "/files/watch?path=.", "", {}, [&](const std::string& line) {
            again = json::parse(line)["type"] == "watching";
            return false;
        });
        if (!again) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    EXPECT_TRUE(again) << "a's share did not come back after its watches' clients left";
}

TEST_F(SessionTools, Watch_EndsWhenTheWatchedDirectoryIsDeleted) {
    auto c = client();
    const json session = create_session(c);
    const auto base = s(session);
    ASSERT_EQ(c.post(base + "/files/mkdir", {{"path", "doomed"}}).status, 201u);
    auto events = watch(
        c, base + "/files/watch?path=doomed",
        [&] {
            auto other = client();
            run(other, base, "rm -r doomed");
        },
        [](const std::vector<json>&) { return false; });
    ASSERT_FALSE(events.empty());
    EXPECT_EQ(events.back()["type"], "end");
    EXPECT_EQ(events.back()["reason"], "deleted");
}

TEST_F(SessionTools, Watch_RefusesWhatIsNotADirectoryOfTheSession) {
    auto c = client();
    const json session = create_session(c);
    const auto base = s(session);
    ASSERT_EQ(c.request("PUT", base + "/files?path=file.txt", "x").status, 200u);
    EXPECT_EQ(c.get(base + "/files/watch?path=nope").status, 404u);
    EXPECT_EQ(c.get(base + "/files/watch?path=file.txt").status, 400u);
    // `..` out of a session without a mount namespace: its file API reaches only its workspace.
    auto escape = c.get(base + "/files/watch?path=../../..");
    EXPECT_EQ(escape.status, 403u) << escape.body;
}

// Security (issue 13.3, the openat2 confinement of the file API; the symlink-swap class of
// CVE-2018-15664): a symlink in the workspace pointing at a host directory outside it cannot make
// the daemon watch that directory, neither as the watched path (it resolves inside the root) nor
// as a subdirectory of a recursive watch (never followed).
TEST_F(SessionTools, Watch_ASymlinkPointingOutsideCannotWidenTheWatch) {
    char tmpl[] = "/tmp/corral-watch-outside-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    const std::string outside = tmpl;
    struct Cleanup {
        std::string dir;
        ~Cleanup() { fs::remove_all(dir); }
    } cleanup{outside};
    auto c = client();
    const json session = create_session(c);
    const auto base = s(session);
    const std::string cwd = session["cwd"];
    ASSERT_EQ(run(c, base,
                  "ln -s " + outside + " abs && ln -s ../../../../../../.." + outside +
                      " rel && mkdir real")["exitCode"],
              0);
    // As the watched path: /tmp/... resolves beneath the session root, where it does not exist.
    EXPECT_EQ(c.get(base + "/files/watch?path=abs").status, 404u);
    EXPECT_EQ(c.get(base + "/files/watch?path=rel").status, 404u);
    // Inside a recursive watch: writes in the outside directory are never reported; the marker
    // written afterwards inside the workspace is (so the stream was live all along).
    auto events = watch(
        c, base + "/files/watch?path=.&recursive=true",
        [&] {
            std::ofstream(outside + "/secret-outside") << "x";
            fs::create_directory(outside + "/dir-outside");
            std::ofstream(outside + "/dir-outside/more") << "y";
            auto other = client();
            run(other, base, "touch real/marker");
        },
        [&](const std::vector<json>& e) { return has(e, "create", cwd + "/real/marker"); });
    EXPECT_EQ(events[0]["directories"], 2) << "the workspace and real/, not the links";
    for (const auto& e : events) EXPECT_EQ(e.dump().find("outside"), std::string::npos) << e.dump();
}

TEST_F(SessionTools, Watch_IsBoundedByItsDirectoryCap) {
    auto c = client();
    const json session = create_session(c);
    const auto base = s(session);
    // 4096 directories is one watch's cap: 4100 below `big` (plus itself) are too many.
    ASSERT_EQ(run(c, base, "mkdir -p big && cd big && seq -f d%g 4100 | xargs mkdir")["exitCode"],
              0);
    auto refused = c.get(base + "/files/watch?path=big&recursive=true");
    EXPECT_EQ(refused.status, 413u) << refused.body;
    EXPECT_EQ(refused.json()["error"]["code"], "watch_limit");
    EXPECT_NE(refused.json()["error"]["message"].get<std::string>().find("4096"),
              std::string::npos);
    // Within the cap at the start, past it later: the stream ends with one clear error event.
    ASSERT_EQ(run(c, base, "mkdir grow && cd grow && seq -f d%g 4090 | xargs mkdir")["exitCode"],
              0);
    auto events = watch(
        c, base + "/files/watch?path=grow&recursive=true",
        [&] {
            auto other = client();
            run(other, base, "cd grow && seq -f n%g 20 | xargs mkdir");
        },
        [](const std::vector<json>&) { return false; });
    ASSERT_FALSE(events.empty());
    EXPECT_EQ(events.back()["type"], "error") << events.back().dump();
    EXPECT_EQ(events.back()["code"], "watch_limit");
}

// --- workdir: a session over an existing host directory (issue 13.4) ----------------------------

/// A daemon started with --allow-workdir ROOT; ROOT/proj belongs to an unprivileged owner.
class WorkdirSessions : public SessionTools {
  protected:
    static constexpr uid_t kOwner = 23456;
    WorkdirSessions() {
        char tmpl[] = "/tmp/corral-workdirs-XXXXXX";
        root_ = ::mkdtemp(tmpl);
        fs::create_directory(root_ + "/proj");
        std::ofstream(root_ + "/proj/existing.txt") << "from the host\n";
        (void)::chown((root_ + "/proj").c_str(), kOwner, kOwner);
        (void)::chown((root_ + "/proj/existing.txt").c_str(), kOwner, kOwner);
        ::chmod(root_.c_str(), 0755);
    }
    ~WorkdirSessions() override { fs::remove_all(root_); }
    std::vector<std::string> daemon_args() override { return {"--allow-workdir", root_}; }

    static uid_t owner_of(const std::string& path) {
        struct stat st {};
        if (::lstat(path.c_str(), &st) != 0) return static_cast<uid_t>(-1);
        return st.st_uid;
    }

    std::string root_;
};

// A Landlock rule holds the inode its path opens to in the sandbox, and the workspace is content
// someone else may have written: a link there must not turn a rule on /workspace/out into one on
// the sandbox's root (a widened grant; stop 44's review of rooting Landlock in the sandbox). Links
// are not followed in the sandbox's root: this one leads nowhere the host has, so the policy is
// refused, naming the key.
TEST_F(WorkdirSessions, Landlock_ALinkInTheWorkspaceIsNotFollowedIntoAWiderRule) {
    auto c = client();
    const std::string proj = root_ + "/proj";
    fs::create_directory_symlink("/", proj + "/out");
    const std::string yaml =
        "name: ll\nextends: default\nlandlock: { read: [/usr, /bin, /lib, /lib64, /etc], "
        "write: [/workspace/out] }\n";
    auto res = c.post("/v1/sessions", {{"policyYaml", yaml}, {"workdir", proj}});
    EXPECT_EQ(res.status, 422u) << res.body;
    EXPECT_NE(res.error_message().find("landlock.write: `/workspace/out`"), std::string::npos)
        << res.body;
}

TEST_F(WorkdirSessions, Workdir_BindsTheHostDirectoryAsTheWorkspaceAndKeepsItsOwner) {
    auto c = client();
    const std::string proj = root_ + "/proj";
    // Writing as the directory's owner is the idmapped bind's doing; where the kernel cannot
    // idmap this file system (tmpfs before 6.3, 9p: the pure-v2 VM's Debian 6.1) the sandbox
    // writes as its own range, which is refused (README "Identity").
    if (auto idmap = probe_idmapped_mount(proj); !idmap)
        GTEST_SKIP() << "this kernel or file system cannot idmap " << proj << " ("
                     << idmap.error().describe() << ")";
    const json session = create_session(c, {{"policy", "default"}, {"workdir", proj}});
    ASSERT_TRUE(session.contains("id")) << session.dump();
    const auto base = s(session);
    EXPECT_EQ(session["workdir"], "/workspace");
    EXPECT_EQ(session["root"], proj);
    const json r = run(c, base, "cat /workspace/existing.txt && pwd && echo new > made.txt");
    EXPECT_EQ(r["exitCode"], 0) << r.dump();
    EXPECT_EQ(r["stdout"], "from the host\n/workspace\n");
    // The sandbox wrote into the real directory, as the directory's owner (idmapped bind), not as
    // its own unprivileged range.
    ASSERT_TRUE(fs::exists(proj + "/made.txt"));
    EXPECT_EQ(owner_of(proj + "/made.txt"), kOwner);
    // The file API sees the same directory; its uploads belong to the owner too.
    EXPECT_EQ(c.get(base + "/files?path=/workspace/existing.txt").body, "from the host\n");
    ASSERT_EQ(c.request("PUT", base + "/files?path=uploaded.txt", "up").status, 200u);
    EXPECT_EQ(owner_of(proj + "/uploaded.txt"), kOwner);
    // Ending the session leaves the directory and everything in it.
    ASSERT_EQ(c.del(base).status, 200u);
    EXPECT_TRUE(fs::exists(proj + "/existing.txt"));
    EXPECT_TRUE(fs::exists(proj + "/made.txt"));
    EXPECT_TRUE(fs::exists(proj + "/uploaded.txt"));
}

// Where the directory cannot be idmapped to its owner (here a ramfs, which no kernel idmaps), the
// session is still made but the sandbox writes as its own uid: the caller must be told, in the
// session record as `corral run` tells it on stderr; where it can, the record says nothing.
TEST_F(WorkdirSessions, Workdir_ThatCannotBeIdmappedSaysSoInTheSessionRecord) {
    auto c = client();
    const std::string ram = root_ + "/ram";
    ASSERT_TRUE(fs::create_directory(ram));
    ASSERT_EQ(::mount("corral-test", ram.c_str(), "ramfs", MS_NOSUID | MS_NODEV, "mode=0755"), 0)
        << std::strerror(errno);
    struct Unmount {
        std::string path;
        ~Unmount() { ::umount2(path.c_str(), MNT_DETACH); }
    } unmount{ram};
    ASSERT_EQ(::chown(ram.c_str(), kOwner, kOwner), 0);
    if (auto idmap = probe_idmapped_mount(ram); idmap)
        GTEST_SKIP() << "this kernel idmaps ramfs: no case to test here";
    const json session = create_session(c, {{"policy", "default"}, {"workdir", ram}});
    ASSERT_TRUE(session.contains("id")) << session.dump();
    ASSERT_TRUE(session.contains("workdirWarning")) << session.dump();
    const std::string warning = session["workdirWarning"];
    EXPECT_NE(warning.find("cannot idmap the workdir `" + ram + "`"), std::string::npos) << warning;
    EXPECT_NE(warning.find("uid " + std::to_string(kOwner)), std::string::npos) << warning;
    // Every read of the record says it too, not only the creation's answer.
    auto got = c.get(s(session));
    ASSERT_EQ(got.status, 200u) << got.body;
    EXPECT_EQ(got.json().value("workdirWarning", std::string()), warning);
    ASSERT_EQ(c.del(s(session)).status, 200u);

    // The control: a directory the kernel can idmap gets no warning.
    const std::string proj = root_ + "/proj";
    if (auto idmap = probe_idmapped_mount(proj); !idmap) return;  // 9p, tmpfs before 6.3
    const json fine = create_session(c, {{"policy", "default"}, {"workdir", proj}});
    ASSERT_TRUE(fine.contains("id")) << fine.dump();
    EXPECT_FALSE(fine.contains("workdirWarning")) << fine.dump();
    ASSERT_EQ(c.del(s(fine)).status, 200u);
}

TEST_F(WorkdirSessions, Workdir_WithoutAMountNamespaceRunsInTheDirectoryItself) {
    auto c = client();
    const std::string proj = root_ + "/proj";
    const json session = create_session(c, {{"workdir", proj + "/"}});  // policy none
    const auto base = s(session);
    EXPECT_EQ(session["cwd"], proj);
    const json r = run(c, base, "pwd && cat existing.txt && touch here");
    EXPECT_EQ(r["stdout"], proj + "\nfrom the host\n");
    EXPECT_TRUE(fs::exists(proj + "/here"));
    ASSERT_EQ(c.del(base).status, 200u);
    EXPECT_TRUE(fs::exists(proj + "/here"));
}

TEST_F(WorkdirSessions, Workdir_ASymlinkThatStaysInsideTheRootIsResolvedOnce) {
    fs::create_directory_symlink("proj", root_ + "/alias");
    auto c = client();
    const json session = create_session(c, {{"workdir", root_ + "/alias"}});
    EXPECT_EQ(session["root"], root_ + "/proj") << "the record names the real directory";
}

// Security (issue 13.4; the symlink-swap class of CVE-2018-15664, and docker's bind of
// attacker-chosen host paths): only paths beneath an --allow-workdir root, resolved by the kernel
// from the root's descriptor so neither `..` nor a symlink (to /etc, or climbing out) can leave
// it; only callers with the daemon's full rights.
TEST_F(WorkdirSessions, Workdir_RefusesEscapesAndCallersWithoutFullRights) {
    fs::create_directory_symlink("/etc", root_ + "/etc-link");
    fs::create_directory_symlink("../../../../../../../../etc", root_ + "/climb");
    fs::create_directory(root_ + "/proj/sub");
    fs::create_directory_symlink("/", root_ + "/proj/sub/up");
    auto c = client();
    struct Case {
        std::string workdir;
        unsigned status;
    };
    for (const Case& k : {Case{root_ + "/etc-link", 403}, Case{root_ + "/climb", 403},
                          Case{root_ + "/proj/sub/up", 403}, Case{root_ + "/proj/sub/up/etc", 403},
                          Case{root_ + "/../etc", 403}, Case{root_ + "/proj/../..", 403},
                          Case{"/etc", 403}, Case{root_ + "-sibling", 403}, Case{"proj", 400},
                          Case{root_ + "/missing", 404}, Case{root_ + "/proj/existing.txt", 400}}) {
        auto res = c.post("/v1/sessions", {{"policy", "none"}, {"workdir", k.workdir}});
        EXPECT_EQ(res.status, k.status) << k.workdir << " -> " << res.body;
    }
    // Session tokens (full or restricted) cannot create sessions, with a workdir or without.
    const json session = create_session(c);
    for (const char* token : {"token", "restrictedToken"}) {
        auto res = c.post("/v1/sessions", {{"policy", "none"}, {"workdir", root_ + "/proj"}},
                          {{"Authorization", "Bearer " + session[token].get<std::string>()}});
        EXPECT_EQ(res.status, 403u) << token << ": " << res.body;
    }
    auto listed = c.get("/v1/sessions");
    EXPECT_EQ(listed.json()["sessions"].size(), 1u) << "nothing was created: " << listed.body;
}

TEST_F(SessionTools, Workdir_IsRefusedWhenTheDaemonAllowsNone) {
    auto c = client();
    auto res = c.post("/v1/sessions", {{"policy", "none"}, {"workdir", "/tmp"}});
    EXPECT_EQ(res.status, 403u) << res.body;
    EXPECT_NE(res.body.find("--allow-workdir"), std::string::npos) << res.body;
}

}  // namespace
}  // namespace corral
