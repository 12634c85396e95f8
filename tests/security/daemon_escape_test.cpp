// Escapes through corrald: its file API (paths that leave the session's root) and, from inside a
// session, the daemon's own socket and the other sessions' directories. The daemon runs where it
// would in production (socket under /run, state under /var/lib), each test with its own names.

#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

#include "../integration/support/http_client.hpp"
#include "support/daemon_harness.hpp"
#include "support/sandbox_harness.hpp"
#include "support/security_daemon.hpp"
#include "tests/support/temp_dir.hpp"

namespace corral::security {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::HttpClient;
using testing::url_encode;

class DaemonEscape : public DaemonTest {};

/// An "outside" directory next to nothing of corral's, holding a secret the attacks try to read.
struct Outside {
    fs::path dir;
    std::string secret;
    Outside() {
        dir = test_support::make_temp_dir("corral-escape-outside");
        secret = "TOP-SECRET-" + unique_token();
        std::ofstream(dir / "secret") << secret;
    }
    ~Outside() {
        std::error_code ignored;
        fs::remove_all(dir, ignored);
    }
    /// Names in the directory other than "secret" (what an escaped write left).
    std::vector<std::string> intruders() const {
        std::vector<std::string> names;
        for (auto& e : fs::directory_iterator(dir))
            if (e.path().filename() != "secret") names.push_back(e.path().filename());
        return names;
    }
};

bool is_4xx(unsigned status) {
    return status >= 400 && status < 500;
}

// --- from inside a session -----------------------------------------------------------------------

// The daemon's socket gives full rights without a token (its file mode is the access control, as
// with Docker's socket). A session whose processes can connect to it can create a `none` session
// and run anything as root on the host: the docker.sock-in-a-container escape. Sessions must not
// see the daemon's socket, whatever their uid.
TEST_F(DaemonEscape, SessionCannotConnectToTheDaemonSocket) {
    auto c = client();
    for (const char* policy : {"default", "strict"}) {
        SCOPED_TRACE(policy);
        auto [base, root] = session(c, policy);
        upload_probe(c, base);
        auto out = run(c, base, "chmod 755 probe; ./probe connect-unix " + daemon_->socket_path());
        EXPECT_NE(answers(out)["connect"], "ok") << "corrald's socket is reachable from a session";
        EXPECT_NE(out.find("connect "), std::string::npos) << out;
    }
}

// Sessions of different tenants share one host: one session must not read another's files
// (multi-tenant agent hosts keep credentials and code there). The state directory holds every
// session's root, so it must not be visible from inside a session.
TEST_F(DaemonEscape, SessionCannotReadAnotherSessionsFiles) {
    auto c = client();
    auto [victim, victim_root] = session(c, "default");
    const std::string secret = "TOP-SECRET-" + unique_token();
    ASSERT_EQ(c.request("PUT", victim + "/files?path=secret.txt", secret).status, 200u);
    ASSERT_FALSE(victim_root.empty());
    ASSERT_TRUE(fs::exists(victim_root / "secret.txt")) << "root " << victim_root;

    for (const char* policy : {"default", "strict"}) {
        SCOPED_TRACE(policy);
        auto [attacker, attacker_root] = session(c, policy);
        auto out = run(c, attacker, "cat " + (victim_root / "secret.txt").string() + " 2>&1");
        EXPECT_EQ(out.find(secret), std::string::npos)
            << "session read another session's file at " << victim_root;
    }
}

// --- the file API --------------------------------------------------------------------------------

// CVE-2018-15664 / CVE-2019-14271 (docker cp) and CVE-2019-10152 (podman cp): file copy into and
// out of a container followed `..` and symlinks to the host. Every verb with every escaping path
// gets a 4xx, and nothing outside the root is read, written, moved or deleted.
TEST_F(DaemonEscape, FileApiRefusesTraversalOnEveryVerb_CVE_2018_15664) {
    auto c = client();
    Outside outside;
    auto [base, root] = session(c, "default");
    ASSERT_FALSE(root.empty());
    // A victim right next to the root: one `..` away.
    const fs::path neighbour = root.parent_path() / "victim";
    std::ofstream(neighbour) << "victim";
    const std::string rel_out = "../../../../../../../../.." + outside.dir.string();
    // Paths to something that exists outside (read, delete, move away)...
    const std::vector<std::string> existing = {
        "../victim", "a/../../victim", "./../victim", rel_out + "/secret", "..", "../"};
    // ...and to new names outside (write, mkdir, move to).
    const std::vector<std::string> fresh = {"../victim-new", "a/../../victim-dir",
                                            "./../victim-moved", rel_out + "/new", "../"};
    ASSERT_EQ(c.request("PUT", base + "/files?path=inside.txt", "in").status, 200u);

    for (const auto& path : existing) {
        SCOPED_TRACE(path);
        auto got = c.get(base + "/files?path=" + url_encode(path));
        EXPECT_TRUE(is_4xx(got.status)) << got.status << " " << got.body;
        EXPECT_EQ(got.body.find(outside.secret), std::string::npos);
        EXPECT_NE(got.body, "victim");
        // In one path space `..` from /workspace is the sandbox's own /, which may be listed;
        // what must never show is the host directory next to the session's root.
        auto listed = c.get(base + "/files/list?path=" + url_encode(path));
        EXPECT_TRUE(is_4xx(listed.status) || listed.body.find("\"victim\"") == std::string::npos)
            << listed.status << " " << listed.body;
        auto del = c.del(base + "/files?path=" + url_encode(path) + "&recursive=true");
        EXPECT_TRUE(is_4xx(del.status)) << del.status << " " << del.body;
        auto mv_in = c.post(base + "/files/move", {{"from", path}, {"to", "stolen"}});
        EXPECT_TRUE(is_4xx(mv_in.status)) << mv_in.status << " " << mv_in.body;
    }
    for (const auto& path : fresh) {
        SCOPED_TRACE(path);
        // In one path space these two climb into the sandbox's own / (its private /tmp, or / for
        // `mkdir -p`), where they may succeed; that nothing lands on the host is checked below.
        const bool in_sandbox = path == rel_out + "/new" || path == "../";
        auto put = c.request("PUT", base + "/files?path=" + url_encode(path), "x");
        EXPECT_TRUE(is_4xx(put.status) || (in_sandbox && put.status == 200u))
            << put.status << " " << put.body;
        auto mk = c.post(base + "/files/mkdir", {{"path", path}, {"recursive", true}});
        EXPECT_TRUE(is_4xx(mk.status) || (in_sandbox && mk.status == 201u))
            << mk.status << " " << mk.body;
        auto mv = c.post(base + "/files/move", {{"from", "inside.txt"}, {"to", path}});
        EXPECT_TRUE(is_4xx(mv.status)) << mv.status << " " << mv.body;
    }
    EXPECT_TRUE(fs::exists(root / "inside.txt")) << "the root itself was deleted or moved";
    // An absolute path names a place in the root, never the host's.
    auto abs =
        c.request("PUT", base + "/files?path=" + url_encode(outside.dir.string() + "/abs"), "x");
    EXPECT_TRUE(abs.status == 200u || is_4xx(abs.status)) << abs.body;
    auto abs_get = c.get(base + "/files?path=" + url_encode(outside.dir.string() + "/secret"));
    EXPECT_EQ(abs_get.body.find(outside.secret), std::string::npos)
        << "absolute path read the host";

    EXPECT_TRUE(fs::exists(neighbour)) << "a file outside the root was deleted";
    std::ifstream in(neighbour);
    std::string content((std::istreambuf_iterator<char>(in)), {});
    EXPECT_EQ(content, "victim");
    EXPECT_TRUE(outside.intruders().empty())
        << "written outside the root: " << outside.intruders()[0];
    for (const char* leaked : {"victim-new", "victim-dir", "victim-moved"})
        EXPECT_FALSE(fs::exists(root.parent_path() / leaked)) << leaked;
    std::error_code ignored;
    fs::remove(neighbour, ignored);
}

// Absolute and relative symlinks planted by the session's own processes (which own the root) are
// resolved inside the root (RESOLVE_IN_ROOT), never against the host's /.
TEST_F(DaemonEscape, FileApiSymlinksResolveInsideTheRoot) {
    auto c = client();
    Outside outside;
    auto [base, root] = session(c, "default");
    const std::string cmd = "ln -s " + outside.dir.string() + " abs && ln -s ../../../../../../.." +
                            outside.dir.string() + " rel && ln -s / slash";
    run(c, base, cmd);
    ASSERT_TRUE(fs::is_symlink(root / "abs")) << "the session could not plant symlinks";

    for (const std::string& link :
         std::vector<std::string>{"abs", "rel", "slash" + outside.dir.string()}) {
        SCOPED_TRACE(link);
        auto got = c.get(base + "/files?path=" + url_encode(link + "/secret"));
        EXPECT_EQ(got.body.find(outside.secret), std::string::npos) << "read through " << link;
        c.request("PUT", base + "/files?path=" + url_encode(link + "/planted"), "x");
        c.post(base + "/files/mkdir", {{"path", link + "/made"}, {"recursive", true}});
        c.del(base + "/files?path=" + url_encode(link + "/secret"));
    }
    EXPECT_TRUE(fs::exists(outside.dir / "secret")) << "deleted through a symlink";
    EXPECT_TRUE(outside.intruders().empty()) << "written through a symlink";
}

/// A procfs mounted inside the session's root, as a session with CAP_SYS_ADMIN (the `none`
/// preset, or any policy keeping it) can do; unmounted (lazily) when destroyed.
struct ProcInRoot {
    fs::path at;
    bool mounted = false;
    explicit ProcInRoot(fs::path where) : at(std::move(where)) {
        fs::create_directories(at);
        mounted =
            ::mount("proc", at.c_str(), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) == 0;
    }
    ~ProcInRoot() {
        if (mounted) ::umount2(at.c_str(), MNT_DETACH);
    }
};

// /proc magic links (/proc/self/root, /proc/<pid>/cwd, /proc/self/fd/N) jump to another
// process's root or files without being symlinks to a path: RESOLVE_IN_ROOT alone would follow
// /proc/self/root to the daemon's root, the host's /. They must be refused (RESOLVE_NO_MAGICLINKS).
// Precedent: CVE-2019-5736 and CVE-2024-21626 both went through /proc magic links.
TEST_F(DaemonEscape, FileApiRefusesProcMagicLinks) {
    auto c = client();
    Outside outside;
    auto [base, root] = session(c, "default");
    ProcInRoot proc(root / "proc");
    ASSERT_TRUE(proc.mounted) << "mount proc: " << std::strerror(errno);
    std::error_code ignored;
    fs::create_symlink("/proc/self/root" + outside.dir.string(), root / "magic", ignored);

    // Control: the daemon sees the procfs in the root (a plain file there reads fine).
    auto version = c.get(base + "/files?path=proc/version");
    EXPECT_EQ(version.status, 200u) << "the daemon does not see the proc mount: " << version.body;

    const std::string via_self = "proc/self/root" + outside.dir.string();
    const std::string via_pid1 = "proc/1/root" + outside.dir.string();
    for (const std::string& path : std::vector<std::string>{via_self, via_pid1, "magic"}) {
        SCOPED_TRACE(path);
        auto got = c.get(base + "/files?path=" + url_encode(path + "/secret"));
        EXPECT_TRUE(is_4xx(got.status)) << got.status << " " << got.body;
        EXPECT_EQ(got.body.find(outside.secret), std::string::npos) << "read the host via " << path;
        auto put = c.request("PUT", base + "/files?path=" + url_encode(path + "/planted"), "x");
        EXPECT_TRUE(is_4xx(put.status)) << put.status << " " << put.body;
        auto list = c.get(base + "/files/list?path=" + url_encode(path));
        EXPECT_TRUE(is_4xx(list.status)) << list.status << " " << list.body;
    }
    auto fd_link = c.get(base + "/files/list?path=" + url_encode("proc/self/cwd"));
    EXPECT_TRUE(is_4xx(fd_link.status)) << fd_link.status << " " << fd_link.body;
    EXPECT_TRUE(outside.intruders().empty()) << "written through a magic link";
}

// CVE-2018-15664 proper: the container swaps a checked directory for a symlink between the
// daemon's check and its use. A host thread here exchanges `dir` (a real directory) and `swap` (a
// symlink to the outside directory) as fast as it can while requests go through `dir`; whatever
// the interleaving, nothing outside is read or written.
TEST_F(DaemonEscape, FileApiSwappedSymlinkRaceNeverLeavesTheRoot_CVE_2018_15664) {
    auto c = client();
    Outside outside;
    auto [base, root] = session(c, "default");
    fs::create_directories(root / "dir");
    std::ofstream(root / "dir" / "secret") << "inside";
    fs::create_symlink("../../../../../../../../.." + outside.dir.string(), root / "swap");

    std::atomic<bool> stop{false};
    std::atomic<long> swaps{0};
    std::thread swapper([&] {
        const std::string a = (root / "dir").string(), b = (root / "swap").string();
        while (!stop) {
            if (::renameat2(AT_FDCWD, a.c_str(), AT_FDCWD, b.c_str(), RENAME_EXCHANGE) == 0)
                ++swaps;
        }
    });
    int leaked_reads = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(4);
    for (int i = 0; i < 400 && std::chrono::steady_clock::now() < deadline; ++i) {
        auto got = c.get(base + "/files?path=dir/secret");
        if (got.body.find(outside.secret) != std::string::npos) ++leaked_reads;
        c.request("PUT", base + "/files?path=dir/w" + std::to_string(i), "x");
        c.post(base + "/files/mkdir", {{"path", "dir/m" + std::to_string(i)}});
        c.del(base + "/files?path=dir/secret");  // through the link: would delete the outside one
    }
    stop = true;
    swapper.join();

    EXPECT_GT(swaps.load(), 0);
    EXPECT_EQ(leaked_reads, 0) << "read the outside secret through a swapped symlink";
    EXPECT_TRUE(fs::exists(outside.dir / "secret")) << "deleted outside through the race";
    EXPECT_TRUE(outside.intruders().empty()) << "written outside: " << outside.intruders()[0];
}

}  // namespace
}  // namespace corral::security
