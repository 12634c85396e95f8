// corrald driven over HTTP, as CI systems and agent hosts drive it: a real daemon binary on a
// temporary socket, state directory and cgroup instance, and a real kernel underneath.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

#include "support/http_client.hpp"
#include "support/instance_leftovers.hpp"
#include "tests/support/exec_logged.hpp"
#include "tests/support/temp_dir.hpp"

namespace corral {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::bearer;
using testing::HttpClient;
using testing::HttpResponse;
using testing::url_encode;

/// A corrald child process with its own socket, state dir, cgroup instance and port range. The
/// destructor stops it (SIGTERM, then SIGKILL after a bound) and removes the temp dir.
class Daemon {
  public:
    explicit Daemon(std::vector<std::string> extra_args = {}) {
        static int counter = 0;
        ++counter;
        dir_ = test_support::make_temp_dir("corral-daemon-test");
        socket_ = dir_ + "/corrald.sock";
        instance_ = "corral-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter);
        fs::create_directories(dir_ + "/policies");
        std::ofstream(dir_ + "/policies/team.yaml") << "name: team\nextends: none\n";
        // 40 ports per test process, spread by pid so parallel test binaries do not collide. The
        // suites use disjoint ranges (session_manager 10000-, session_network 15000-, this 20000-,
        // daemon_escape 30000-32759), all below the kernel's ephemeral ports (32768+).
        port_first_ = static_cast<uint16_t>(20000 + (::getpid() % 250) * 40);  // 20000-29999
        std::vector<std::string> args = {
            CORRAL_BINARY_DIR "/supervisor/corrald",
            "--socket",
            socket_,
            "--state-dir",
            dir_ + "/state",
            "--policy-dir",
            dir_ + "/policies",
            "--instance",
            instance_,
            "--port-range",
            std::to_string(port_first_) + "-" + std::to_string(port_first_ + 39)};
        args.insert(args.end(), extra_args.begin(), extra_args.end());
        pid_ = ::fork();
        if (pid_ == 0) {
            test_support::exec_logged(args, dir_ + "/corrald.log", test_support::LogOpen::truncate);
        }
        HttpClient probe = client();
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        while (std::chrono::steady_clock::now() < deadline) {
            if (probe.can_connect()) {
                ready_ = true;
                break;
            }
            int status = 0;
            if (::waitpid(pid_, &status, WNOHANG) == pid_) {
                pid_ = -1;
                break;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
    }
    ~Daemon() {
        stop(std::chrono::seconds(60));
        testing::remove_instance_leftovers(instance_);
        std::error_code ignored;
        fs::remove_all(dir_, ignored);
    }
    Daemon(const Daemon&) = delete;
    Daemon& operator=(const Daemon&) = delete;

    bool ready() const { return ready_; }
    HttpClient client() const { return HttpClient::unix_socket(socket_); }
    std::string log() const {
        std::ifstream in(dir_ + "/corrald.log");
        return std::string(std::istreambuf_iterator<char>(in), {});
    }
    const std::string& socket_path() const { return socket_; }
    uint16_t port_first() const { return port_first_; }

    /// SIGTERM, then wait (SIGKILL after `bound`); returns the wait status (the first stop's
    /// status when called again; -1 if it never ran).
    int stop(std::chrono::seconds bound) {
        if (pid_ <= 0) return exit_status_;
        ::kill(pid_, SIGTERM);
        const auto deadline = std::chrono::steady_clock::now() + bound;
        int status = 0;
        while (::waitpid(pid_, &status, WNOHANG) == 0) {
            if (std::chrono::steady_clock::now() > deadline) {
                ::kill(pid_, SIGKILL);
                ::waitpid(pid_, &status, 0);
                break;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        pid_ = -1;
        exit_status_ = status;
        return status;
    }

  private:
    std::string dir_;
    std::string socket_;
    std::string instance_;
    uint16_t port_first_ = 0;
    pid_t pid_ = -1;
    int exit_status_ = -1;
    bool ready_ = false;
};

class DaemonApi : public ::testing::Test {
  protected:
    void SetUp() override {
        if (::geteuid() != 0) GTEST_SKIP() << "needs root (cgroups, socket owner root)";
        if (!fs::exists(CORRAL_BINARY_DIR "/supervisor/corrald"))
            GTEST_SKIP() << "corrald is not built";
        daemon_ = std::make_unique<Daemon>();
        ASSERT_TRUE(daemon_->ready()) << "corrald did not start:\n" << daemon_->log();
        auto c = client();
        const std::string sessions = c.get("/v1/health").json()["cgroup"]["sessions"];
        instance_cgroup_ = fs::path(sessions).parent_path();
    }
    /// Every test ends with a clean daemon exit: status 0 (no crash) and no cgroup left behind.
    void TearDown() override {
        if (!daemon_) return;
        const int status = daemon_->stop(std::chrono::seconds(60));
        EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
            << "corrald did not exit cleanly (wait status " << status << "):\n"
            << daemon_->log();
        if (!instance_cgroup_.empty()) {
            EXPECT_FALSE(fs::exists(instance_cgroup_)) << instance_cgroup_ << " left behind";
        }
        daemon_.reset();
    }

    HttpClient client() { return daemon_->client(); }

    /// Creates a session with the `none` preset (cgroup tracking only) and returns its record.
    json create_session(HttpClient& c, json body = json::object()) {
        if (!body.contains("policy") && !body.contains("policyYaml")) body["policy"] = "none";
        auto res = c.post("/v1/sessions", body);
        EXPECT_EQ(res.status, 201u) << res.body;
        return res.json();
    }
    static std::string s(const json& session) {
        return "/v1/sessions/" + session["id"].get<std::string>();
    }

    std::unique_ptr<Daemon> daemon_;
    std::string instance_cgroup_;
};

// --- daemon level -----------------------------------------------------------------------------

TEST_F(DaemonApi, Health_ReportsVersionCgroupModeAndLayers) {
    auto c = client();
    auto res = c.get("/v1/health");
    ASSERT_EQ(res.status, 200u) << res.body;
    auto j = res.json();
    EXPECT_EQ(j["version"], CORRAL_VERSION);
    EXPECT_TRUE(j["cgroup"]["mode"] == "unified" || j["cgroup"]["mode"] == "hybrid");
    EXPECT_FALSE(j["cgroup"]["v2Mount"].get<std::string>().empty());
    EXPECT_TRUE(j["layers"].contains("landlockAbi"));
    EXPECT_TRUE(j["layers"].contains("cloneIntoCgroup"));
}

TEST_F(DaemonApi, SocketFile_IsMode0660OwnedByRoot) {
    struct stat st {};
    ASSERT_EQ(::stat(daemon_->socket_path().c_str(), &st), 0);
    EXPECT_TRUE(S_ISSOCK(st.st_mode));
    EXPECT_EQ(st.st_mode & 0777, 0660u);
    EXPECT_EQ(st.st_uid, 0u);
}

TEST_F(DaemonApi, SecondDaemon_RefusesSocketAnotherDaemonAnswersOn) {
    std::string log_path = "/tmp/corral-second-" + std::to_string(::getpid()) + ".log";
    pid_t pid = ::fork();
    if (pid == 0) {
        const int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        ::dup2(log, 2);
        ::execl(CORRAL_BINARY_DIR "/supervisor/corrald", "corrald", "--socket",
                daemon_->socket_path().c_str(), "--instance", "corral-test-second", nullptr);
        ::_exit(127);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status));
    EXPECT_NE(WEXITSTATUS(status), 0);
    std::ifstream in(log_path);
    std::string log((std::istreambuf_iterator<char>(in)), {});
    ::unlink(log_path.c_str());
    EXPECT_NE(log.find("another daemon"), std::string::npos) << log;
    // The first daemon still answers.
    auto c = client();
    EXPECT_EQ(c.get("/v1/health").status, 200u);
}

TEST_F(DaemonApi, Policies_ListsPresetsAndPolicyDirAndValidatesYaml) {
    auto c = client();
    auto res = c.get("/v1/policies");
    ASSERT_EQ(res.status, 200u) << res.body;
    std::set<std::string> presets, named;
    const json body = res.json();  // range-for over a temporary's member would dangle
    for (auto& p : body["presets"]) presets.insert(p["name"]);
    for (auto& p : body["policies"]) named.insert(p["name"]);
    EXPECT_TRUE(presets.count("default"));
    EXPECT_TRUE(presets.count("none"));
    EXPECT_TRUE(named.count("team"));

    auto good = c.request("POST", "/v1/policies/validate", "name: ok\nextends: none\n");
    ASSERT_EQ(good.status, 200u) << good.body;
    EXPECT_EQ(good.json()["valid"], true);

    auto bad = c.request("POST", "/v1/policies/validate", "name: bad\nlimits:\n  memroy: 1Gi\n");
    ASSERT_EQ(bad.status, 200u) << bad.body;
    EXPECT_EQ(bad.json()["valid"], false);
    ASSERT_FALSE(bad.json()["diagnostics"].empty()) << bad.body;
    EXPECT_EQ(bad.json()["diagnostics"][0]["line"], 3) << bad.body;
}

// --- error paths -------------------------------------------------------------------------------

TEST_F(DaemonApi, MalformedJson_Is400BadJsonAndCreatesNothing) {
    auto c = client();
    auto res = c.request("POST", "/v1/sessions", "{\"policy\": ");
    EXPECT_EQ(res.status, 400u);
    EXPECT_EQ(res.error_code(), "bad_json");
    EXPECT_TRUE(c.get("/v1/sessions").json()["sessions"].empty());
}

TEST_F(DaemonApi, UnknownField_Is400NamingTheField) {
    auto c = client();
    auto res = c.post("/v1/sessions", {{"polcy", "none"}});
    EXPECT_EQ(res.status, 400u);
    EXPECT_EQ(res.error_code(), "unknown_field");
    EXPECT_NE(res.error_message().find("polcy"), std::string::npos) << res.body;
}

TEST_F(DaemonApi, WrongType_Is400NamingTheField) {
    auto c = client();
    auto res = c.post("/v1/sessions", {{"policy", "none"}, {"env", {{"A", 1}}}});
    EXPECT_EQ(res.status, 400u);
    EXPECT_EQ(res.error_code(), "bad_type");
    EXPECT_NE(res.error_message().find("env"), std::string::npos) << res.body;
}

TEST_F(DaemonApi, UnknownSession_Is404NamingTheId) {
    auto c = client();
    auto res = c.get("/v1/sessions/nope-123");
    EXPECT_EQ(res.status, 404u);
    EXPECT_NE(res.error_message().find("nope-123"), std::string::npos) << res.body;
    EXPECT_EQ(c.post("/v1/sessions/nope-123/run", {{"command", "true"}}).status, 404u);
}

TEST_F(DaemonApi, WrongMethodIs405AndUnknownPathIs404) {
    auto c = client();
    auto wrong = c.request("PUT", "/v1/health");
    EXPECT_EQ(wrong.status, 405u);
    EXPECT_EQ(wrong.error_code(), "method_not_allowed");
    EXPECT_EQ(wrong.headers["allow"], "GET");
    auto unknown = c.get("/v1/nothing/here");
    EXPECT_EQ(unknown.status, 404u);
    EXPECT_EQ(unknown.error_code(), "no_such_route");
}

TEST_F(DaemonApi, InvalidInlinePolicy_Is422WithLineAndColumn) {
    auto c = client();
    auto res = c.post("/v1/sessions", {{"policyYaml", "name: x\nbogus: 1\n"}});
    EXPECT_EQ(res.status, 422u) << res.body;
    EXPECT_EQ(res.error_code(), "invalid_policy");
    ASSERT_FALSE(res.json()["error"]["diagnostics"].empty());
    EXPECT_EQ(res.json()["error"]["diagnostics"][0]["line"], 2);
}

// A policy that parses but names a path no mount can honour for the session (a per-process or
// linked path beneath /proc, a path whose way on the host enters /proc) is the caller's error:
// 422 invalid_policy naming the key and path, as a parse error is, never 500 internal (which
// said the daemon failed) or a 404 that reads as "no such session".
TEST_F(DaemonApi, PolicyPathsNoMountCanHonourAre422NamingTheKey) {
    auto c = client();
    const std::pair<const char*, const char*> cases[] = {
        {"filesystem:\n  hidden: [/home, /root, /run/user, /proc/mounts]\n",
         "filesystem.hidden: `/proc/mounts`"},
        {"filesystem:\n  hidden: [/home, /root, /run/user, /proc/self/environ]\n",
         "filesystem.hidden: `/proc/self/environ`"},
        {"filesystem:\n  tmpfs: { /etc/mtab: 1Mi }\n", "filesystem.tmpfs: `/etc/mtab`"},
        {"filesystem:\n  hidden: [/home, /root, /run/user, /sys/fs]\n"
         "  tmpfs: { /sys/fs/cgroup: 1Mi }\n",
         "filesystem.tmpfs: `/sys/fs/cgroup`"},
        // A mount point the session's own /sys lacks, found when its mounts are made, and one
        // the host lacks (helper 30's L2: both 404 not_found before).
        {"filesystem:\n  tmpfs: { /tmp: 1Mi, /sys/kernel/corral-nope: 1Mi }\n",
         "filesystem.tmpfs: mount tmpfs on /sys/kernel/corral-nope"},
        {"namespaces:\n  pid: false\nfilesystem:\n  tmpfs: { /proc/sys/fs/corral-nope: 1Mi }\n",
         "mount point `/proc/sys/fs/corral-nope` does not exist"},
    };
    for (const auto& [filesystem, names] : cases) {
        auto res = c.post("/v1/sessions", {{"policyYaml", std::string("name: x\nextends: default\n") +
                                                              filesystem}});
        EXPECT_EQ(res.status, 422u) << filesystem << res.body;
        EXPECT_EQ(res.error_code(), "invalid_policy") << res.body;
        EXPECT_NE(res.error_message().find(names), std::string::npos) << res.body;
    }
}

// --- sessions ---------------------------------------------------------------------------------

TEST_F(DaemonApi, Session_CreateListGetPatchEnvRunEnd) {
    auto c = client();
    auto created = create_session(c, {{"id", "life"}, {"env", {{"GREETING", "hi"}}}});
    EXPECT_EQ(created["id"], "life");
    EXPECT_FALSE(created["token"].get<std::string>().empty());
    EXPECT_FALSE(created["restrictedToken"].get<std::string>().empty());

    auto list = c.get("/v1/sessions").json()["sessions"];
    ASSERT_EQ(list.size(), 1u);
    EXPECT_EQ(list[0]["id"], "life");
    EXPECT_EQ(c.get("/v1/sessions/life").json()["state"], "active");

    auto dup = c.post("/v1/sessions", {{"policy", "none"}, {"id", "life"}});
    EXPECT_EQ(dup.status, 409u) << dup.body;

    auto patched = c.request("PATCH", "/v1/sessions/life/env",
                             json{{"set", {{"EXTRA", "x"}}}, {"unset", {"GREETING"}}}.dump());
    ASSERT_EQ(patched.status, 200u) << patched.body;
    EXPECT_EQ(patched.json()["env"]["EXTRA"], "x");
    EXPECT_FALSE(patched.json()["env"].contains("GREETING"));

    auto run =
        c.post("/v1/sessions/life/run", {{"command", "echo ${EXTRA}-${GREETING:-unset}; exit 3"}});
    ASSERT_EQ(run.status, 200u) << run.body;
    EXPECT_EQ(run.json()["stdout"], "x-unset\n");
    EXPECT_EQ(run.json()["exitCode"], 3);
    EXPECT_EQ(run.json()["status"], "exited");

    auto ended = c.del("/v1/sessions/life");
    ASSERT_EQ(ended.status, 200u) << ended.body;
    EXPECT_EQ(ended.json()["alreadyEnded"], false);
    auto again = c.del("/v1/sessions/life");
    EXPECT_EQ(again.status, 200u) << again.body;
    EXPECT_EQ(again.json()["alreadyEnded"], true);
    EXPECT_TRUE(c.get("/v1/sessions").json()["sessions"].empty());
}

TEST_F(DaemonApi, TwentyFourSessionsAtOnce_EachRunsAndEnds) {
    auto c = client();
    std::vector<std::string> ids;
    for (int i = 0; i < 24; ++i) ids.push_back(create_session(c)["id"]);
    EXPECT_EQ(c.get("/v1/sessions").json()["sessions"].size(), 24u);
    EXPECT_EQ(c.get("/v1/health").json()["sessions"], 24);  // counted without listing them
    for (size_t i = 0; i < ids.size(); ++i) {
        auto run =
            c.post("/v1/sessions/" + ids[i] + "/run", {{"argv", {"echo", std::to_string(i)}}});
        ASSERT_EQ(run.status, 200u) << run.body;
        EXPECT_EQ(run.json()["stdout"], std::to_string(i) + "\n");
    }
    for (const auto& id : ids) EXPECT_EQ(c.del("/v1/sessions/" + id).status, 200u);
    EXPECT_TRUE(c.get("/v1/sessions").json()["sessions"].empty());
    EXPECT_EQ(c.get("/v1/health").json()["sessions"], 0);
}

// --- processes --------------------------------------------------------------------------------

TEST_F(DaemonApi, Processes_SpawnListGetSignalWaitKillLogsStdin) {
    auto c = client();
    const auto base = s(create_session(c));

    auto spawned = c.post(base + "/processes", {{"argv", {"sleep", "1000"}}});
    ASSERT_EQ(spawned.status, 201u) << spawned.body;
    const std::string sleeper = spawned.json()["id"];
    auto other = c.post(base + "/processes", {{"argv", {"sleep", "1000"}}});
    const std::string sibling = other.json()["id"];

    EXPECT_EQ(c.get(base + "/processes").json()["processes"].size(), 2u);
    EXPECT_EQ(c.get(base + "/processes/" + sleeper).json()["status"], "running");

    auto waited = c.get(base + "/processes/" + sleeper + "/wait?timeoutMs=50");
    ASSERT_EQ(waited.status, 200u) << waited.body;
    EXPECT_EQ(waited.json()["finished"], false);

    auto signalled = c.post(base + "/processes/" + sleeper + "/signal", {{"signal", "TERM"}});
    EXPECT_EQ(signalled.status, 200u) << signalled.body;
    auto done = c.get(base + "/processes/" + sleeper + "/wait?timeoutMs=20000");
    EXPECT_EQ(done.json()["finished"], true) << done.body;
    EXPECT_EQ(done.json()["signal"], "SIGTERM") << done.body;

    // Killing one process leaves its sibling running.
    auto killed = c.del(base + "/processes/" + sibling);
    ASSERT_EQ(killed.status, 200u) << killed.body;
    EXPECT_EQ(killed.json()["running"], false);
    EXPECT_EQ(killed.json()["status"], "killed");

    auto bad_signal = c.post(base + "/processes/" + sleeper + "/signal", {{"signal", "NOPE"}});
    EXPECT_EQ(bad_signal.status, 400u);
    EXPECT_EQ(c.get(base + "/processes/p999").status, 404u);

    // stdin: a cat that echoes what we write, then ends at EOF.
    auto cat = c.post(base + "/processes", {{"argv", {"cat"}}, {"stdinOpen", true}});
    ASSERT_EQ(cat.status, 201u) << cat.body;
    const std::string cat_id = cat.json()["id"];
    auto wrote = c.request("POST", base + "/processes/" + cat_id + "/stdin?eof=true", "ping\n");
    ASSERT_EQ(wrote.status, 200u) << wrote.body;
    EXPECT_EQ(wrote.json()["written"], 5);
    auto cat_done = c.get(base + "/processes/" + cat_id + "/wait?timeoutMs=20000");
    EXPECT_EQ(cat_done.json()["exitCode"], 0) << cat_done.body;
    auto logs = c.get(base + "/processes/" + cat_id + "/logs?stream=stdout&offset=1");
    ASSERT_EQ(logs.status, 200u) << logs.body;
    EXPECT_EQ(logs.json()["data"], "ing\n");
    EXPECT_EQ(logs.json()["offset"], 1);
}

TEST_F(DaemonApi, Exec_StreamsStartOutputAndEndsWithExactlyOneExit) {
    auto c = client();
    const auto base = s(create_session(c));
    std::vector<json> events;
    auto status = c.stream_lines("POST", base + "/exec",
                                 json{{"command", "echo out; echo err >&2; exit 7"}}.dump(), {},
                                 [&](const std::string& line) {
                                     events.push_back(json::parse(line));
                                     return true;
                                 });
    ASSERT_EQ(status, 200u);
    ASSERT_GE(events.size(), 3u);
    EXPECT_EQ(events.front()["type"], "start");
    std::string out, err;
    int finals = 0;
    for (size_t i = 0; i < events.size(); ++i) {
        EXPECT_EQ(events[i]["seq"], i);
        if (events[i]["type"] == "stdout") out += events[i]["data"].get<std::string>();
        if (events[i]["type"] == "stderr") err += events[i]["data"].get<std::string>();
        if (events[i]["type"] == "exit" || events[i]["type"] == "error") ++finals;
    }
    EXPECT_EQ(out, "out\n");
    EXPECT_EQ(err, "err\n");
    EXPECT_EQ(finals, 1);
    EXPECT_EQ(events.back()["type"], "exit");
    EXPECT_EQ(events.back()["exitCode"], 7);
}

TEST_F(DaemonApi, Exec_SlowReaderGetsEveryByteOfOutputBeyondTheCap) {
    // 8 MiB through a 1 MiB buffer to a client slower than the writer: the stream holds the
    // writer back (it waits on its pipe) instead of dropping what the client has not had.
    auto c = client();
    const auto base = s(create_session(
        c, {{"policyYaml", "name: small\nextends: none\nlimits: { output: 1Mi }\n"}}));
    uint64_t received = 0, skipped = 0, next_offset = 0;
    bool contiguous = true;
    json last;
    auto status = c.stream_lines(
        "POST", base + "/exec", json{{"command", "head -c 8388608 /dev/zero"}}.dump(), {},
        [&](const std::string& line) {
            last = json::parse(line);
            if (last["type"] != "stdout") return true;
            skipped += last.value("skipped", 0ull);
            contiguous = contiguous && last["offset"] == next_offset;
            const std::string data = last.contains("dataBase64")
                                         ? last["dataBase64"].get<std::string>()
                                         : last["data"].get<std::string>();
            uint64_t bytes = data.size();
            if (last.contains("dataBase64"))
                bytes = data.size() / 4 * 3 - std::count(data.end() - 2, data.end(), '=');
            received += bytes;
            next_offset = last["offset"].get<uint64_t>() + bytes;
            std::this_thread::sleep_for(std::chrono::milliseconds(2));  // a slow client
            return true;
        });
    ASSERT_EQ(status, 200u);
    EXPECT_EQ(skipped, 0u);
    EXPECT_TRUE(contiguous);
    EXPECT_EQ(received, 8u << 20);
    EXPECT_EQ(last["type"], "exit");
    EXPECT_EQ(last["output"]["stdout"]["bytes"], 8u << 20);
    EXPECT_EQ(last["output"]["stdout"]["droppedBytes"], 7u << 20) << "the 1 MiB cap holds";
}

/// One frame of application/vnd.corral.stream (supervisor/daemon/output_stream.hpp).
struct Frame {
    uint8_t type = 0;      ///< 0 JSON event, 1 stdout, 2 stderr
    uint64_t offset = 0;   ///< output frames
    std::string payload;   ///< the JSON text or the output bytes
};

/// Splits a whole binary stream body into frames; a truncated frame fails the test.
std::vector<Frame> parse_frames(const std::string& body) {
    std::vector<Frame> frames;
    size_t at = 0;
    auto be = [&](size_t pos, int bytes) {
        uint64_t v = 0;
        for (int i = 0; i < bytes; ++i) v = v << 8 | static_cast<uint8_t>(body[pos + i]);
        return v;
    };
    while (at < body.size()) {
        EXPECT_LE(at + 5, body.size()) << "truncated frame header at " << at;
        if (at + 5 > body.size()) break;
        Frame f;
        f.type = static_cast<uint8_t>(body[at]);
        const uint64_t length = be(at + 1, 4);
        at += 5;
        EXPECT_LE(at + length, body.size()) << "truncated frame at " << at;
        if (at + length > body.size()) break;
        if (f.type == 1 || f.type == 2) {
            EXPECT_GE(length, 8u);
            f.offset = be(at, 8);
            f.payload = body.substr(at + 8, length - 8);
        } else {
            EXPECT_EQ(f.type, 0) << "unknown frame type";
            f.payload = body.substr(at, length);
        }
        at += length;
        frames.push_back(std::move(f));
    }
    return frames;
}

// Issue 18: opt-in binary framing carries output bytes as they are (NULs, invalid UTF-8, a
// character split anywhere), with exact offsets and the same start/exit events as NDJSON.
TEST_F(DaemonApi, Exec_BinaryFramesCarryBytesAsTheyAreWithOffsetsAndOneExit) {
    auto c = client();
    const auto base = s(create_session(c));
    const testing::HttpHeaders accept = {{"Accept", "application/vnd.corral.stream"}};
    // 3 MiB of zeros, then bytes that are not UTF-8, on stdout; a line on stderr; exit 5.
    auto res = c.request(
        "POST", base + "/exec",
        json{{"command", "head -c 3145728 /dev/zero; printf '\\377\\303'; echo e >&2; exit 5"}}.dump(),
        accept);
    ASSERT_EQ(res.status, 200u) << res.body.substr(0, 300);
    EXPECT_EQ(res.headers["content-type"], "application/vnd.corral.stream");
    const auto frames = parse_frames(res.body);
    ASSERT_GE(frames.size(), 3u);
    ASSERT_EQ(frames.front().type, 0);
    EXPECT_EQ(json::parse(frames.front().payload)["type"], "start");
    std::string out, err;
    int finals = 0;
    json last;
    for (const auto& f : frames) {
        std::string& sink = f.type == 1 ? out : err;
        if (f.type == 0) {
            last = json::parse(f.payload);
            if (last["type"] == "exit" || last["type"] == "error") ++finals;
            EXPECT_NE(last["type"], "skipped") << "nothing may fall out for a reader that keeps up";
            continue;
        }
        EXPECT_EQ(f.offset, sink.size()) << "offsets are exact and contiguous";
        sink += f.payload;
    }
    EXPECT_EQ(out.size(), 3145728u + 2);
    EXPECT_EQ(out.find_first_not_of('\0'), 3145728u);
    EXPECT_EQ(out.substr(3145728), "\377\303");
    EXPECT_EQ(err, "e\n");
    EXPECT_EQ(finals, 1);
    EXPECT_EQ(last["type"], "exit");
    EXPECT_EQ(last["exitCode"], 5);
    EXPECT_EQ(last["output"]["stdout"]["bytes"], 3145728u + 2);

    // Without the Accept header the same route still answers NDJSON.
    auto text = c.request("POST", base + "/exec", json{{"command", "echo hi"}}.dump());
    EXPECT_EQ(text.headers["content-type"], "application/x-ndjson");
    // And processes/{proc}/stream takes the same framing, from an offset.
    auto spawned = c.post(base + "/processes", {{"command", "printf abcdef"}});
    ASSERT_EQ(spawned.status, 201u) << spawned.body;
    const std::string proc = spawned.json()["id"];
    auto streamed = c.request("GET", base + "/processes/" + proc + "/stream?offset=2", "", accept);
    ASSERT_EQ(streamed.status, 200u);
    std::string tail;
    for (const auto& f : parse_frames(streamed.body)) {
        if (f.type != 1) continue;
        EXPECT_EQ(f.offset, 2 + tail.size());
        tail += f.payload;
    }
    EXPECT_EQ(tail, "cdef");
}

// The gap report of a binary stream: a reader that comes late to a process whose bounded buffer
// already dropped bytes gets a `skipped` event naming them, then the bytes from the new offset.
TEST_F(DaemonApi, Stream_BinaryFramesReportWhatFellOutOfTheBuffer) {
    auto c = client();
    const auto base = s(create_session(
        c, {{"policyYaml", "name: small\nextends: none\nlimits: { output: 1Mi }\n"}}));
    auto spawned = c.post(base + "/processes", {{"command", "head -c 3145728 /dev/zero"}});
    ASSERT_EQ(spawned.status, 201u) << spawned.body;
    const std::string proc = spawned.json()["id"];
    auto waited = c.get(base + "/processes/" + proc + "/wait?timeoutMs=60000");
    ASSERT_EQ(waited.status, 200u) << waited.body;
    auto streamed = c.request("GET", base + "/processes/" + proc + "/stream", "",
                              {{"Accept", "application/vnd.corral.stream"}});
    ASSERT_EQ(streamed.status, 200u);
    uint64_t skipped = 0, received = 0;
    for (const auto& f : parse_frames(streamed.body)) {
        if (f.type == 0) {
            const json event = json::parse(f.payload);
            if (event["type"] == "skipped") {
                EXPECT_EQ(event["stream"], "stdout");
                skipped += event["skipped"].get<uint64_t>();
                EXPECT_EQ(event["offset"], skipped) << "the gap ends where the bytes resume";
            }
            continue;
        }
        EXPECT_EQ(f.offset, skipped + received);
        received += f.payload.size();
    }
    EXPECT_EQ(skipped, 2u << 20);
    EXPECT_EQ(received, 1u << 20);
}

TEST_F(DaemonApi, Stream_ResumesFromAnOffsetWithoutRepeatingBytes) {
    auto c = client();
    const auto base = s(create_session(c));
    auto spawned =
        c.post(base + "/processes", {{"command", "printf 0123456789; sleep 0.3; printf abc"}});
    const std::string id = spawned.json()["id"];
    // Read only the first output event, then drop the connection.
    uint64_t resume = 0;
    c.stream_lines("GET", base + "/processes/" + id + "/stream?stream=stdout", "", {},
                   [&](const std::string& line) {
                       auto e = json::parse(line);
                       if (e["type"] != "stdout") return true;
                       resume = e["offset"].get<uint64_t>() + e["data"].get<std::string>().size();
                       return false;
                   });
    ASSERT_GT(resume, 0u);
    std::string rest;
    json last;
    c.stream_lines(
        "GET", base + "/processes/" + id + "/stream?stream=stdout&offset=" + std::to_string(resume),
        "", {}, [&](const std::string& line) {
            last = json::parse(line);
            if (last["type"] == "stdout") {
                EXPECT_GE(last["offset"].get<uint64_t>(), resume);
                rest += last["data"].get<std::string>();
            }
            return true;
        });
    EXPECT_EQ(std::string("0123456789abc").substr(resume), rest);
    EXPECT_EQ(last["type"], "exit");
}

TEST_F(DaemonApi, Stream_OfOutputBeyondTheCapReportsSkippedBytes) {
    // The `none` preset keeps 16 MiB per stream; 20 MiB were written, so a reader from 0 is told
    // that the first 4 MiB fell out of the buffer instead of getting a silent splice.
    auto c = client();
    const auto base = s(create_session(c));
    auto run = c.post(base + "/run", {{"command", "yes abcdefg | head -c 20971520"}});
    ASSERT_EQ(run.status, 200u) << run.body.substr(0, 300);
    EXPECT_EQ(run.json()["truncated"], true);
    const std::string id = run.json()["id"];
    uint64_t skipped = 0, first_offset = 0, bytes = 0;
    bool first = true;
    json last;
    c.stream_lines("GET", base + "/processes/" + id + "/stream?stream=stdout", "", {},
                   [&](const std::string& line) {
                       last = json::parse(line);
                       if (last["type"] != "stdout") return true;
                       if (first) first_offset = last["offset"];
                       first = false;
                       skipped += last.value("skipped", 0ull);
                       bytes += last["data"].get<std::string>().size();
                       return true;
                   });
    EXPECT_EQ(skipped, 4u << 20);
    EXPECT_EQ(first_offset, 4u << 20);
    EXPECT_EQ(bytes, 16u << 20);
    EXPECT_EQ(last["type"], "exit");
}

TEST_F(DaemonApi, EndSession_KillsADaemonizedProcessAndReportsIt) {
    auto c = client();
    auto session = create_session(c);
    auto run = c.post(
        s(session) + "/run",
        {{"command", "setsid sh -c 'sleep 1000 & echo $!' > pid.txt; sleep 0.2; cat pid.txt"}});
    ASSERT_EQ(run.status, 200u) << run.body;
    const pid_t orphan = std::stoi(run.json()["stdout"].get<std::string>());
    ASSERT_EQ(::kill(orphan, 0), 0) << "the daemonized process should still run";
    auto ended = c.del(s(session));
    ASSERT_EQ(ended.status, 200u) << ended.body;
    EXPECT_GE(ended.json()["processesKilled"].get<int>(), 1) << ended.body;
    EXPECT_NE(::kill(orphan, 0), 0) << "session end left pid " << orphan << " running";
}

// --- files ------------------------------------------------------------------------------------

TEST_F(DaemonApi, Files_PutGetListStatMkdirMoveDelete) {
    auto c = client();
    const auto base = s(create_session(c));
    auto put = c.request("PUT", base + "/files?path=" + url_encode("dir/sub/a.txt"), "hello");
    ASSERT_EQ(put.status, 200u) << put.body;
    auto got = c.get(base + "/files?path=dir/sub/a.txt");
    EXPECT_EQ(got.status, 200u);
    EXPECT_EQ(got.body, "hello");

    auto stat = c.get(base + "/files/stat?path=dir/sub/a.txt");
    ASSERT_EQ(stat.status, 200u) << stat.body;
    EXPECT_EQ(stat.json()["type"], "file");
    EXPECT_EQ(stat.json()["size"], 5);

    EXPECT_EQ(c.post(base + "/files/mkdir", {{"path", "made/deep"}, {"recursive", true}}).status,
              201u);
    EXPECT_EQ(c.post(base + "/files/mkdir", {{"path", "made"}}).status, 409u);
    auto moved = c.post(base + "/files/move", {{"from", "dir/sub/a.txt"}, {"to", "made/b.txt"}});
    EXPECT_EQ(moved.status, 200u) << moved.body;

    auto list = c.get(base + "/files/list?path=made");
    ASSERT_EQ(list.status, 200u) << list.body;
    std::set<std::string> names;
    const json listed = list.json();
    for (auto& e : listed["entries"]) names.insert(e["name"]);
    EXPECT_EQ(names, (std::set<std::string>{"b.txt", "deep"}));

    EXPECT_EQ(c.del(base + "/files?path=made").status, 409u);
    EXPECT_EQ(c.del(base + "/files?path=made&recursive=true").status, 200u);
    EXPECT_EQ(c.get(base + "/files/stat?path=made").status, 404u);
    EXPECT_EQ(c.get(base + "/files").status, 400u);  // path is required
}

TEST_F(DaemonApi, Files_TraversalAndSymlinkEscapesAreRefusedNamingThePath) {
    // CVE-2018-15664 / CVE-2019-14271: `docker cp` followed paths out of the container root.
    auto c = client();
    const auto base = s(create_session(c));
    auto up = c.get(base + "/files?path=" + url_encode("../../../../etc/passwd"));
    EXPECT_EQ(up.status, 403u) << up.body;
    EXPECT_NE(up.error_message().find("../../../../etc/passwd"), std::string::npos) << up.body;
    auto put = c.request("PUT", base + "/files?path=" + url_encode("../escape.txt"), "x");
    EXPECT_GE(put.status, 400u);
    EXPECT_LT(put.status, 500u);
    EXPECT_NE(put.error_message().find("../escape.txt"), std::string::npos) << put.body;

    // An absolute symlink resolves inside the root: its target is <root>/etc/passwd, absent.
    auto link =
        c.post(base + "/run", {{"command", "ln -s /etc/passwd link && ln -s ../../../.. up"}});
    ASSERT_EQ(link.status, 200u) << link.body;
    ASSERT_EQ(link.json()["exitCode"], 0) << link.body;
    auto via_link = c.get(base + "/files?path=link");
    EXPECT_EQ(via_link.status, 404u) << via_link.body;
    EXPECT_NE(via_link.error_message().find("link"), std::string::npos) << via_link.body;
    auto via_up = c.get(base + "/files?path=up/etc/passwd");
    EXPECT_GE(via_up.status, 400u);
    EXPECT_LT(via_up.status, 500u);
    EXPECT_EQ(via_up.body.find("root:"), std::string::npos);
}

TEST_F(DaemonApi, Files_100MiBRoundTripIsByteExact) {
    auto c = client();
    const auto base = s(create_session(c));
    std::string data(100u << 20, '\0');
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < data.size(); i += 8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        std::memcpy(&data[i], &x, std::min<size_t>(8, data.size() - i));
    }
    auto put = c.request("PUT", base + "/files?path=big.bin", data);
    ASSERT_EQ(put.status, 200u) << put.body;
    EXPECT_EQ(put.json()["size"], data.size());
    auto got = c.get(base + "/files?path=big.bin");
    ASSERT_EQ(got.status, 200u);
    ASSERT_EQ(got.body.size(), data.size());
    EXPECT_TRUE(got.body == data);
}

// --- ports ------------------------------------------------------------------------------------

TEST_F(DaemonApi, Ports_WaitReturnsOnceSomethingAcceptsAndTimesOutBefore) {
    auto c = client();
    const auto base = s(create_session(c));
    auto lease = c.request("POST", base + "/ports");
    ASSERT_EQ(lease.status, 201u) << lease.body;
    const std::string port = std::to_string(lease.json()["port"].get<int>());
    auto early = c.get(base + "/ports/" + port + "/wait?timeoutMs=200");
    EXPECT_EQ(early.status, 504u) << "nothing listens yet: " << early.body;
    auto server = c.post(base + "/processes",
                         {{"argv", {"python3", "-m", "http.server", "--bind", "127.0.0.1", port}}});
    ASSERT_EQ(server.status, 201u) << server.body;
    const std::string server_id = server.json()["id"];
    // Python's start takes what the machine takes (over a minute on a slow, emulated kernel), so
    // a 504 here says only "not yet": ask again while the server runs. A wait that never returns
    // is caught by the test's own timeout; a server that died fails at once.
    HttpResponse ready;
    for (;;) {
        ready = c.get(base + "/ports/" + port + "/wait?timeoutMs=5000");
        if (ready.status != 504u) break;
        const json proc = c.get(base + "/processes/" + server_id).json();
        ASSERT_EQ(proc["running"], true) << "the server ended before it listened: " << proc.dump()
                                         << c.get(base + "/processes/" + server_id + "/logs?stream=stderr").body;
    }
    ASSERT_EQ(ready.status, 200u) << ready.body;
    EXPECT_EQ(ready.json()["ready"], true);
    EXPECT_EQ(c.get(base + "/ports/1/wait?timeoutMs=10").status, 404u) << "a port it does not hold";
}

TEST_F(DaemonApi, Sessions_BestEffortRecordListsWhatIsNotEnforced) {
    auto c = client();
    auto strict =
        c.post("/v1/sessions", {{"policyYaml", "extends: none\nlimits: { io_weight: 100 }\n"}});
    if (strict.status == 201u) GTEST_SKIP() << "this host enforces io weights (bfq in use)";
    EXPECT_GE(strict.status, 400u) << "strict must refuse an unenforceable limit";
    EXPECT_NE(strict.body.find("io"), std::string::npos) << strict.body;
    const auto session = create_session(
        c,
        {{"policyYaml", "extends: none\nlimits: { io_weight: 100 }\nenforcement: best-effort\n"}});
    auto record = c.get(s(session)).json();
    ASSERT_EQ(record["notEnforced"].size(), 1u) << record.dump();
    EXPECT_NE(record["notEnforced"][0].get<std::string>().find("io"), std::string::npos);
}

TEST_F(DaemonApi, Ports_LeaseListEndpointRelease) {
    auto c = client();
    const auto base = s(create_session(c));
    auto lease = c.request("POST", base + "/ports");
    ASSERT_EQ(lease.status, 201u) << lease.body;
    const int port = lease.json()["port"];
    EXPECT_GE(port, daemon_->port_first());
    EXPECT_EQ(c.get(base + "/ports").json()["ports"].size(), 1u);
    auto ws = c.get(base + "/ports/" + std::to_string(port) + "/endpoint?protocol=ws");
    ASSERT_EQ(ws.status, 200u) << ws.body;
    EXPECT_EQ(ws.json()["url"], "ws://127.0.0.1:" + std::to_string(port));
    EXPECT_EQ(c.del(base + "/ports/" + std::to_string(port)).status, 200u);
    EXPECT_EQ(c.del(base + "/ports/" + std::to_string(port)).status, 404u);
    EXPECT_EQ(c.del(base + "/ports/notaport").status, 404u);
}

TEST_F(DaemonApi, Ports_ConcurrentLeasesAreUnique) {
    auto c = client();
    std::vector<std::string> bases;
    for (int i = 0; i < 4; ++i) bases.push_back(s(create_session(c)));
    std::mutex mutex;
    std::vector<int> ports;
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
        threads.emplace_back([&, t] {
            auto mine = daemon_->client();
            for (int i = 0; i < 4; ++i) {
                auto res =
                    mine.request("POST", bases[static_cast<size_t>(t) % bases.size()] + "/ports");
                if (res.status != 201u) continue;
                std::lock_guard lock(mutex);
                ports.push_back(res.json()["port"]);
            }
        });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(ports.size(), 32u);
    EXPECT_EQ(std::set<int>(ports.begin(), ports.end()).size(), ports.size());
}

// --- auth -------------------------------------------------------------------------------------

TEST_F(DaemonApi, RestrictedToken_MayRunButNotEndPatchOrLease) {
    auto c = client();
    auto session = create_session(c);
    const auto base = s(session);
    const auto restricted = bearer(session["restrictedToken"]);
    const auto full = bearer(session["token"]);

    EXPECT_EQ(c.post(base + "/run", {{"argv", {"true"}}}, restricted).status, 200u);
    EXPECT_EQ(c.request("PUT", base + "/files?path=r.txt", "r", restricted).status, 200u);
    EXPECT_EQ(c.del(base, restricted).status, 403u);
    EXPECT_EQ(c.request("PATCH", base + "/env", R"({"set":{"A":"1"}})", restricted).status, 403u);
    EXPECT_EQ(c.request("POST", base + "/ports", "", restricted).status, 403u);
    EXPECT_EQ(c.post("/v1/sessions", {{"policy", "none"}}, full).status, 403u);
    EXPECT_EQ(c.request("POST", base + "/ports", "", full).status, 201u);
    EXPECT_EQ(c.get(base, bearer("corral_f_bogus")).status, 401u);
    EXPECT_EQ(c.del(base, full).status, 200u);
}

TEST_F(DaemonApi, TokenOfOneSession_OpensNothingInAnother) {
    auto c = client();
    auto a = create_session(c);
    auto b = create_session(c);
    const auto token_a = bearer(a["token"]);
    EXPECT_EQ(c.get(s(b), token_a).status, 404u);
    EXPECT_EQ(c.post(s(b) + "/run", {{"argv", {"true"}}}, token_a).status, 404u);
    EXPECT_EQ(c.del(s(b), token_a).status, 404u);
    auto list = c.get("/v1/sessions", token_a).json()["sessions"];
    ASSERT_EQ(list.size(), 1u);
    EXPECT_EQ(list[0]["id"], a["id"]);
}

TEST(DaemonApiTcp, TcpListener_RefusesRequestsWithoutToken) {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root";
    const uint16_t port = static_cast<uint16_t>(30000 + ::getpid() % 5000);
    Daemon daemon({"--listen", "127.0.0.1:" + std::to_string(port)});
    ASSERT_TRUE(daemon.ready()) << daemon.log();
    auto local = daemon.client();
    auto session = local.post("/v1/sessions", {{"policy", "none"}}).json();
    auto tcp = HttpClient::tcp("127.0.0.1", port);
    EXPECT_EQ(tcp.get("/v1/health").status, 401u);
    EXPECT_EQ(tcp.get("/v1/sessions").status, 401u);
    EXPECT_EQ(tcp.post("/v1/sessions", {{"policy", "none"}}).status, 401u);
    const auto token = bearer(session["token"]);
    EXPECT_EQ(tcp.get("/v1/health", token).status, 200u);
    auto run = tcp.post("/v1/sessions/" + session["id"].get<std::string>() + "/run",
                        {{"argv", {"echo", "tcp"}}}, token);
    EXPECT_EQ(run.status, 200u) << run.body;
    EXPECT_EQ(run.json()["stdout"], "tcp\n");
}

TEST(DaemonApiTcp, NonLoopbackListenAddress_IsRefused) {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root";
    Daemon daemon({"--listen", "0.0.0.0:39999"});
    EXPECT_FALSE(daemon.ready());
    EXPECT_NE(daemon.log().find("loopback"), std::string::npos) << daemon.log();
}

// --- shutdown ---------------------------------------------------------------------------------

TEST_F(DaemonApi, Sigterm_EndsSessionsStreamsTruthfullyAndLeavesNoCgroups) {
    auto c = client();
    const auto base = s(create_session(c));
    const std::string sessions_cgroup = c.get("/v1/health").json()["cgroup"]["sessions"];
    const std::string instance_cgroup = fs::path(sessions_cgroup).parent_path();
    ASSERT_TRUE(fs::exists(instance_cgroup)) << instance_cgroup;
    auto spawned = c.post(base + "/processes", {{"command", "sleep 1000 & sleep 1000"}});
    ASSERT_EQ(spawned.status, 201u) << spawned.body;
    const pid_t pid = spawned.json()["pid"];
    const std::string id = spawned.json()["id"];

    // A follower of the running process must end with a truthful final event.
    json final_event;
    std::thread follower([&] {
        auto f = daemon_->client();
        try {
            f.stream_lines("GET", base + "/processes/" + id + "/stream", "", {},
                           [&](const std::string& line) {
                               final_event = json::parse(line);
                               return true;
                           });
        } catch (const std::exception&) {
        }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const int status = daemon_->stop(std::chrono::seconds(60));
    follower.join();
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << daemon_->log();
    EXPECT_NE(::kill(pid, 0), 0) << "the session's process survived the daemon";
    EXPECT_FALSE(fs::exists(instance_cgroup)) << instance_cgroup << " left behind";
    ASSERT_TRUE(final_event.is_object()) << daemon_->log();
    if (final_event["type"] == "exit") {
        EXPECT_EQ(final_event["status"], "killed") << final_event.dump();
    } else {
        EXPECT_EQ(final_event["type"], "error") << final_event.dump();
        EXPECT_EQ(final_event["code"], "shutting_down") << final_event.dump();
    }
}

}  // namespace
}  // namespace corral
