// The file API in one path space with the session's processes (DESIGN.md "One path space"), and
// the rest of issue 13's file and session extras, driven over HTTP against a real corrald: lines
// and byte ranges, recursive listings, JavaScript-safe mtimes, PATCH env with null, ports at
// creation, and what a restricted token may do.

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "support/daemon_process.hpp"
#include "support/http_client.hpp"

namespace corral {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::bearer;
using testing::DaemonProcess;
using testing::HttpClient;
using testing::url_encode;

constexpr uint16_t kPortBase = 7000;  // 7000-8999: below the other suites' ranges

std::string read_host_file(const std::string& path) {
    std::ifstream in(path);
    return std::string((std::istreambuf_iterator<char>(in)), {});
}

class PathSpace : public ::testing::Test {
  protected:
    void SetUp() override {
        if (::geteuid() != 0) GTEST_SKIP() << "needs root (cgroups, namespaces)";
        if (!fs::exists(CORRAL_BINARY_DIR "/supervisor/corrald"))
            GTEST_SKIP() << "corrald is not built";
        daemon_ = std::make_unique<DaemonProcess>(kPortBase);
        ASSERT_TRUE(daemon_->ready()) << "corrald did not start:\n" << daemon_->log();
    }
    void TearDown() override {
        if (!daemon_) return;
        const int status = daemon_->stop(std::chrono::seconds(60));
        EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << daemon_->log();
        daemon_.reset();
    }
    HttpClient client() { return daemon_->client(); }
    json create(HttpClient& c, json body) {
        auto res = c.post("/v1/sessions", body);
        EXPECT_EQ(res.status, 201u) << res.body;
        return res.json();
    }
    static std::string s(const json& session) {
        return "/v1/sessions/" + session["id"].get<std::string>();
    }
    static std::string files(const std::string& base, const std::string& path) {
        return base + "/files?path=" + url_encode(path);
    }
    static std::string run_stdout(HttpClient& c, const std::string& base, const std::string& cmd) {
        auto r = c.post(base + "/run", {{"command", cmd}});
        EXPECT_EQ(r.status, 200u) << r.body;
        return r.json().value("stdout", std::string());
    }

    std::unique_ptr<DaemonProcess> daemon_;
};

// --- one path space ---------------------------------------------------------------------------

TEST_F(PathSpace, FileApiPathsMeanWhatTheyMeanToTheProcesses) {
    auto c = client();
    const json session = create(c, {{"policy", "default"}});
    const auto base = s(session);
    ASSERT_EQ(session["workdir"], "/workspace");

    // Absolute inside the sandbox: /workspace/x is the file processes see as /workspace/x.
    ASSERT_EQ(c.request("PUT", files(base, "/workspace/a.txt"), "abs").status, 200u);
    EXPECT_EQ(run_stdout(c, base, "cat /workspace/a.txt"), "abs");
    EXPECT_TRUE(fs::exists(session["root"].get<std::string>() + "/a.txt")) << "not /workspace/workspace";
    // Relative against the session's cwd.
    EXPECT_EQ(c.get(files(base, "a.txt")).body, "abs");
    ASSERT_EQ(c.request("PUT", files(base, "dir/b.txt"), "rel").status, 200u);
    EXPECT_EQ(run_stdout(c, base, "cat dir/b.txt"), "rel");
    EXPECT_EQ(c.get(files(base, "/workspace/dir/../dir/b.txt")).body, "rel");

    // The rest of the sandbox's view reads as the processes read it.
    auto os = c.get(files(base, "/etc/os-release"));
    ASSERT_EQ(os.status, 200u) << os.body;
    EXPECT_EQ(os.body, run_stdout(c, base, "cat /etc/os-release"));
    auto listed = c.get(base + "/files/list?path=" + url_encode("/usr"));
    ASSERT_EQ(listed.status, 200u) << listed.body;
    EXPECT_NE(listed.body.find("\"bin\""), std::string::npos);

    // A file a process wrote to its private /tmp is there for the API too, and back.
    run_stdout(c, base, "echo from-process > /tmp/p.txt");
    EXPECT_EQ(c.get(files(base, "/tmp/p.txt")).body, "from-process\n");

    // Relative to a shell context's cwd with ?shell=.
    ASSERT_EQ(c.post(base + "/shells", {{"id", "sh"}}).status, 201u);
    auto cd = c.post(base + "/run", {{"command", "cd dir"}, {"shell", "sh"}});
    ASSERT_EQ(cd.status, 200u) << cd.body;
    EXPECT_EQ(c.get(files(base, "b.txt") + "&shell=sh").body, "rel");
    EXPECT_EQ(c.get(files(base, "b.txt")).status, 404u) << "without ?shell= the session's cwd";
}

TEST_F(PathSpace, SessionCwdIsTheBaseOfRelativePaths) {
    auto c = client();
    const json session = create(c, {{"policy", "none"}, {"cwd", "sub"}});
    const auto base = s(session);
    const std::string root = session["root"];
    fs::create_directories(root + "/sub");
    ASSERT_EQ(c.request("PUT", files(base, "x.txt"), "in-sub").status, 200u);
    EXPECT_EQ(read_host_file(root + "/sub/x.txt"), "in-sub");
    EXPECT_EQ(run_stdout(c, base, "cat x.txt"), "in-sub");
    // Without a mount namespace the workspace is a host path: it is used as such.
    EXPECT_EQ(c.get(files(base, root + "/sub/x.txt")).body, "in-sub");
}

TEST_F(PathSpace, WritesToReadOnlyPartsFailClearly) {
    auto c = client();
    const auto base = s(create(c, {{"policy", "default"}}));
    auto put = c.request("PUT", files(base, "/usr/corral-should-not-exist"), "x");
    EXPECT_EQ(put.status, 403u) << put.body;
    EXPECT_EQ(put.error_code(), "read_only") << put.body;
    EXPECT_NE(put.error_message().find("/usr/corral-should-not-exist"), std::string::npos);
    EXPECT_NE(put.error_message().find("read-only"), std::string::npos) << put.body;
    EXPECT_FALSE(fs::exists("/usr/corral-should-not-exist"));
    auto mk = c.post(base + "/files/mkdir", {{"path", "/etc/corral-dir"}});
    EXPECT_EQ(mk.status, 403u) << mk.body;
    // A writable part of the sandbox (its /tmp tmpfs) takes writes.
    ASSERT_EQ(c.request("PUT", files(base, "/tmp/api.txt"), "up").status, 200u);
    EXPECT_EQ(run_stdout(c, base, "cat /tmp/api.txt"), "up");
}

// Confused deputy: the daemon is root, the sandbox's processes are not. Reading the host's
// /etc/shadow (bound read-only into the sandbox) through the file API must fail as it fails for
// them. Precedent: CVE-2017-1002101 (kubelet, as root, followed a pod's subPath symlinks).
TEST_F(PathSpace, OutsideTheWorkspaceTheDaemonReadsOnlyWhatAnUnprivilegedProcessCould) {
    if (!fs::exists("/etc/shadow")) GTEST_SKIP() << "no /etc/shadow on this host";
    auto c = client();
    const auto base = s(create(c, {{"policy", "default"}}));
    auto shadow = c.get(files(base, "/etc/shadow"));
    EXPECT_EQ(shadow.status, 403u) << shadow.status;
    EXPECT_EQ(shadow.body.find("root:"), std::string::npos);
    // A symlink a process planted, pointing at it, changes nothing.
    run_stdout(c, base, "ln -s /etc/shadow /tmp/s; ln -s /etc /tmp/etc");
    for (const std::string path : {"/tmp/s", "/tmp/etc/shadow", "/tmp/../etc/shadow"}) {
        auto via = c.get(files(base, path));
        EXPECT_TRUE(via.status == 403u || via.status == 404u) << path << ": " << via.status;
        EXPECT_EQ(via.body.find("root:"), std::string::npos) << path;
    }
}

// A symlink in the workspace resolves inside the workspace (RESOLVE_IN_ROOT), whatever it names;
// `..` and absolute links cannot reach the host. CVE-2018-15664 (docker cp).
TEST_F(PathSpace, WorkspaceSymlinksAndDotDotNeverReachTheHost) {
    auto c = client();
    const json session = create(c, {{"policy", "default"}});
    const auto base = s(session);
    const std::string root = session["root"];
    const std::string secret_dir = fs::path(root).parent_path().string();  // the session's state dir
    run_stdout(c, base, "ln -s " + secret_dir + " host && ln -s ../../../../../.. up");
    for (const std::string& path :
         std::vector<std::string>{"host/root", "up" + root, "/workspace/up/etc/shadow"}) {
        auto got = c.get(base + "/files/list?path=" + url_encode(path));
        EXPECT_NE(got.status, 200u) << path << ": " << got.body;
    }
    // `..` from /workspace is the sandbox's /, never the host directory holding the session.
    auto up = c.get(base + "/files/list?path=" + url_encode("../.."));
    ASSERT_EQ(up.status, 200u) << up.body;
    EXPECT_EQ(up.json()["path"], "/");
    EXPECT_NE(up.body.find("\"usr\""), std::string::npos) << up.body;
}

// /proc magic links jump to another root without being paths (CVE-2019-5736, CVE-2024-21626).
TEST_F(PathSpace, ProcMagicLinksInTheSandboxAreRefused) {
    auto c = client();
    const auto base = s(create(c, {{"policy", "default"}}));
    run_stdout(c, base, "ln -s /proc/1/root /tmp/magic");
    for (const std::string path : {"/proc/self/root/etc/os-release", "/proc/1/root/etc/os-release",
                                   "/proc/1/cwd", "/tmp/magic/etc/os-release"}) {
        auto got = c.get(files(base, path));
        EXPECT_TRUE(got.status >= 400 && got.status < 500) << path << ": " << got.status;
        auto put = c.request("PUT", files(base, path + "-planted"), "x");
        EXPECT_TRUE(put.status >= 400 && put.status < 500) << path << ": " << put.status;
    }
}

// A FIFO (or a device) is never opened by the daemon: a reader of a FIFO nobody writes would
// block it forever. Precedent: CVE-2021-30465 class of races aside, `docker cp` of a FIFO hung
// dockerd (moby issue 37838).
TEST_F(PathSpace, FifosAndDevicesAreRefusedWithoutBlockingTheDaemon) {
    auto c = client();
    const auto base = s(create(c, {{"policy", "default"}}));
    run_stdout(c, base, "mkfifo /workspace/pipe /tmp/pipe");
    for (const std::string path : {"/workspace/pipe", "/tmp/pipe", "/dev/zero", "/dev/null"}) {
        auto got = c.get(files(base, path));
        EXPECT_EQ(got.status, 400u) << path << ": " << got.body;
        EXPECT_NE(got.error_message().find("not a regular file"), std::string::npos) << got.body;
    }
    // The daemon still answers, and the FIFO still is one.
    EXPECT_EQ(c.get("/v1/health").status, 200u);
    EXPECT_EQ(c.get(base + "/files/stat?path=pipe").json()["type"], "other");
}

// --- files, the rest --------------------------------------------------------------------------

TEST_F(PathSpace, Get_LinesAndRanges) {
    auto c = client();
    const auto base = s(create(c, {{"policy", "none"}}));
    ASSERT_EQ(c.request("PUT", files(base, "l.txt"), "l1\nl2\nl3\nl4").status, 200u);
    EXPECT_EQ(c.get(files(base, "l.txt") + "&startLine=2&endLine=3").body, "l2\nl3\n");
    EXPECT_EQ(c.get(files(base, "l.txt") + "&startLine=3").body, "l3\nl4");
    EXPECT_EQ(c.get(files(base, "l.txt") + "&endLine=1").body, "l1\n");
    EXPECT_EQ(c.get(files(base, "l.txt") + "&startLine=2&endLine=99").body, "l2\nl3\nl4");
    EXPECT_EQ(c.get(files(base, "l.txt") + "&startLine=9").body, "");
    EXPECT_EQ(c.get(files(base, "l.txt") + "&startLine=0").status, 400u);
    EXPECT_EQ(c.get(files(base, "l.txt") + "&startLine=3&endLine=2").status, 400u);

    auto head = c.request("GET", files(base, "l.txt"), "", {{"Range", "bytes=0-1"}});
    EXPECT_EQ(head.status, 206u);
    EXPECT_EQ(head.body, "l1");
    EXPECT_EQ(head.headers["content-range"], "bytes 0-1/11");
    auto tail = c.request("GET", files(base, "l.txt"), "", {{"Range", "bytes=-2"}});
    EXPECT_EQ(tail.status, 206u);
    EXPECT_EQ(tail.body, "l4");
    auto from = c.request("GET", files(base, "l.txt"), "", {{"Range", "bytes=9-"}});
    EXPECT_EQ(from.body, "l4");
    auto past = c.request("GET", files(base, "l.txt"), "", {{"Range", "bytes=50-"}});
    EXPECT_EQ(past.status, 416u) << past.body;
    auto whole = c.get(files(base, "l.txt"));
    EXPECT_EQ(whole.status, 200u);
    EXPECT_EQ(whole.headers["accept-ranges"], "bytes");
}

TEST_F(PathSpace, List_RecursiveNamesEntriesRelativeToTheDirectory) {
    auto c = client();
    const auto base = s(create(c, {{"policy", "none"}}));
    run_stdout(c, base, "mkdir -p a/b/c && echo > a/x && echo > a/b/y && ln -s / a/loop");
    auto names = [&](const std::string& query) {
        std::set<std::string> out;
        auto res = c.get(base + "/files/list?path=a" + query);
        EXPECT_EQ(res.status, 200u) << res.body;
        const json body = res.json();
        for (const auto& e : body["entries"]) out.insert(e["name"]);
        return out;
    };
    EXPECT_EQ(names(""), (std::set<std::string>{"b", "loop", "x"}));
    EXPECT_EQ(names("&recursive=true"),
              (std::set<std::string>{"b", "b/c", "b/y", "loop", "x"}))
        << "symlinks are listed, never followed";
}

TEST_F(PathSpace, Mtimes_SurviveJavaScriptNumbers) {
    auto c = client();
    const auto base = s(create(c, {{"policy", "none"}}));
    run_stdout(c, base, "echo > t && touch -d '2024-05-01 12:00:00.123456789 UTC' t");
    const json st = c.get(base + "/files/stat?path=t").json();
    ASSERT_TRUE(st["mtimeNs"].is_string()) << st.dump();
    EXPECT_EQ(st["mtimeNs"], "1714564800123456789");
    ASSERT_TRUE(st["mtimeMs"].is_number()) << st.dump();
    EXPECT_NEAR(st["mtimeMs"].get<double>(), 1714564800123.456789, 0.001);
    const json list = c.get(base + "/files/list").json();
    ASSERT_FALSE(list["entries"].empty());
    EXPECT_TRUE(list["entries"][0]["mtimeNs"].is_string());
}

TEST_F(PathSpace, PatchEnv_NullUnsets) {
    auto c = client();
    const auto base = s(create(c, {{"policy", "none"}, {"env", {{"KEEP", "k"}, {"DROP", "d"}}}}));
    auto patched = c.request("PATCH", base + "/env", R"({"set":{"NEW":"n","DROP":null}})");
    ASSERT_EQ(patched.status, 200u) << patched.body;
    EXPECT_EQ(patched.json()["env"], (json{{"KEEP", "k"}, {"NEW", "n"}}));
    EXPECT_EQ(run_stdout(c, base, "echo $KEEP-$NEW-${DROP-unset}"), "k-n-unset\n");
    auto bad = c.request("PATCH", base + "/env", R"({"set":{"X":1}})");
    EXPECT_EQ(bad.status, 400u);
    EXPECT_NE(bad.error_message().find("set.X"), std::string::npos) << bad.body;
}

TEST_F(PathSpace, CreateSession_LeasesPortsAndRestrictedTokenLosesEveryPortEndpoint) {
    auto c = client();
    const json session = create(c, {{"policy", "none"}, {"ports", 2}});
    ASSERT_EQ(session["ports"].size(), 2u) << session.dump();
    const auto base = s(session);
    const std::string port = std::to_string(session["ports"][0]["port"].get<int>());
    const auto restricted = bearer(session["restrictedToken"]);
    const auto full = bearer(session["token"]);
    for (const std::string& path : std::vector<std::string>{
             "/ports", "/ports/" + port + "/endpoint", "/ports/" + port + "/wait?timeoutMs=1"}) {
        EXPECT_EQ(c.get(base + path, restricted).status, 403u) << path;
    }
    EXPECT_EQ(c.request("DELETE", base + "/ports/" + port, "", restricted).status, 403u);
    EXPECT_EQ(c.request("POST", base + "/ports", "", restricted).status, 403u);
    EXPECT_FALSE(c.get(base, restricted).json().contains("ports"));
    // ...and keeps run, spawn, files and shells.
    EXPECT_EQ(c.post(base + "/run", {{"argv", {"true"}}}, restricted).status, 200u);
    EXPECT_EQ(c.post(base + "/processes", {{"argv", {"true"}}}, restricted).status, 201u);
    EXPECT_EQ(c.request("PUT", files(base, "r.txt"), "r", restricted).status, 200u);
    EXPECT_EQ(c.post(base + "/shells", {{"id", "r"}}, restricted).status, 201u);
    EXPECT_EQ(c.post(base + "/run", {{"command", "true"}, {"shell", "r"}}, restricted).status, 200u);
    EXPECT_EQ(c.get(base + "/ports", full).json()["ports"].size(), 2u);
    EXPECT_EQ(c.post("/v1/sessions", {{"policy", "none"}, {"ports", 65}}).status, 400u);
}

}  // namespace
}  // namespace corral
