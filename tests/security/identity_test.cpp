// Who a sandbox is on the host (issue 10 items 3, 4, 6, 7; DESIGN.md "Identity"). Under `default`
// a sandbox started by root is root inside a user namespace of its own and a leased, unprivileged
// range of host ids outside, so the host kernel judges what it does as a stranger's: root-only
// files stay closed, the host's device inodes cannot be changed, host sockets refuse it, and
// anything it plants (setuid files included) is worth nothing to another host user.
// Precedents: CVE-2019-5736 (runc: a container's root rewrote the host's runc binary),
// CVE-2022-0492 (cgroup v1 release_agent: a container's root ran a program as host root),
// CVE-2021-21284 (Docker --userns-remap: the remapped root could still write where host root
// owned things).

#include <fcntl.h>
#include <signal.h>
#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "../integration/support/http_client.hpp"
#include "isolation/id_range.hpp"
#include "isolation/sandbox.hpp"
#include "support/daemon_harness.hpp"
#include "support/sandbox_harness.hpp"

namespace corral::security {
namespace {

namespace fs = std::filesystem;
using testing::HttpClient;

/// `corral run --policy POLICY -- sh -c SCRIPT`.
std::vector<std::string> run_sh(const std::string& policy, const std::string& script) {
    return {"run", "--policy", policy, "--timeout", "60s", "--", "/bin/sh", "-c", script};
}

/// The outside id inside uid 0 maps to, from a uid_map's first line ("0 OUTSIDE COUNT").
long outside_of_root(const std::string& uid_map) {
    std::istringstream in(uid_map);
    long inside = -1, outside = -1, count = 0;
    in >> inside >> outside >> count;
    return inside == 0 ? outside : -1;
}

/// A listening unix socket at `path` with `mode`, owned by root; removed when destroyed.
struct HostSocket {
    std::string path;
    int fd = -1;
    HostSocket(std::string where, mode_t mode) : path(std::move(where)) {
        ::unlink(path.c_str());
        fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_un addr{};
        addr.sun_family = AF_UNIX;
        std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
        EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0) << path;
        EXPECT_EQ(::listen(fd, 8), 0);
        EXPECT_EQ(::chmod(path.c_str(), mode), 0);
    }
    ~HostSocket() {
        ::close(fd);
        ::unlink(path.c_str());
    }
};

/// Forks; the child runs `body` with the write end of a pipe and exits; returns everything the
/// child wrote there.
std::string output_of_child(const std::function<void(int)>& body) {
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0) return "pipe failed";
    pid_t pid = ::fork();
    if (pid == 0) {
        body(out[1]);
        ::_exit(0);
    }
    ::close(out[1]);
    std::string text;
    char buf[512];
    ssize_t n;
    while ((n = ::read(out[0], buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
    ::close(out[0]);
    ::waitpid(pid, nullptr, 0);
    return text;
}

/// Runs `file ARG` on the host as nobody (65534, no groups); its stdout ("" when it could not
/// run at all).
std::string run_as_nobody(const std::string& file, const std::string& arg) {
    return output_of_child([&](int out) {
        ::dup2(out, 1);
        int null = ::open("/dev/null", O_WRONLY);
        ::dup2(null, 2);
        ::execl("/usr/bin/setpriv", "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                "--", file.c_str(), arg.c_str(), static_cast<char*>(nullptr));
    });
}

/// Sends GET /v1/health on the unix socket `path` as uid/gid `id` (root when 0); what came back
/// before EOF ("" when the daemon closed without a word).
std::string health_as(const std::string& path, uid_t id) {
    return output_of_child([&](int out) {
        if (id != 0 && (::setgroups(0, nullptr) != 0 || ::setresgid(id, id, id) != 0 ||
                        ::setresuid(id, id, id) != 0))
            return;
        int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_un addr{};
        addr.sun_family = AF_UNIX;
        std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
        if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
            (void)!::write(out, "connect failed", 14);
            return;
        }
        const char request[] = "GET /v1/health HTTP/1.1\r\nHost: corral\r\nConnection: close\r\n\r\n";
        (void)!::write(fd, request, sizeof request - 1);
        char buf[512];
        ssize_t n;
        while ((n = ::read(fd, buf, sizeof buf)) > 0)
            (void)!::write(out, buf, static_cast<size_t>(n));
    });
}

class Identity : public SandboxTest {
  protected:
    /// A subdirectory of the working directory owned by uid/gid 4242/4243 (an ordinary user's
    /// checkout), and the RunOptions that make it corral's cwd.
    fs::path theirs() {
        const fs::path path = dir() / "theirs";
        fs::create_directories(path);
        EXPECT_EQ(::chown(path.c_str(), 4242, 4243), 0);
        return path;
    }
    static RunOptions in(const fs::path& cwd) {
        RunOptions options;
        options.in_child = [cwd] {
            if (::chdir(cwd.c_str()) != 0) ::_exit(97);
        };
        return options;
    }
};

// `default` is root inside and a leased corral range outside: never the host's uid 0. The
// presets and example policies built on it too (strict and ci-job: nobody inside the range).
TEST_F(Identity, DefaultIsRootInsideAndAnUnprivilegedRangeOutside_CVE_2019_5736) {
    const std::string examples = CORRAL_SOURCE_DIR "/examples/policies/";
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"default", "0"},
        {"strict", "65534"},
        {examples + "ci-job.yaml", "65534"},
        {examples + "local-testing.yaml", "0"}};
    for (const auto& [policy, inside] : cases) {
        SCOPED_TRACE(policy);
        auto got = corral(run_sh(policy, "id -u; cat /proc/self/uid_map"));
        ASSERT_EQ(got.exit_code, 0) << got.err;
        std::istringstream lines(got.out);
        std::string uid, map;
        std::getline(lines, uid);
        std::getline(lines, map);
        EXPECT_EQ(uid, inside) << got.out;
        long outside = outside_of_root(map);
        EXPECT_TRUE(outside > 0 && is_corral_range_id(static_cast<uint32_t>(outside)))
            << "uid 0 inside is host uid " << outside << " (uid_map: " << map << ")";
    }
}

// A file the sandbox creates in its scratch space (the tmpfs /tmp) is owned, as the host sees
// it, by the session's unprivileged uid: looked at from the host through /proc/PID/root while the
// sandbox still runs.
TEST_F(Identity, ScratchFilesBelongToTheSessionRangeOnTheHost) {
    const std::string token = unique_token();
    uid_t seen = 0;
    bool found = false;
    RunOptions options;
    options.on_start = [&](pid_t) {
        for (int i = 0; i < 1500 && !found; ++i) {
            for (pid_t pid : processes_with_token(token)) {
                struct stat st;
                std::string path = "/proc/" + std::to_string(pid) + "/root/tmp/made-here";
                if (::stat(path.c_str(), &st) == 0) {
                    seen = st.st_uid;
                    found = true;
                }
            }
            if (!found) std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        kill_processes_with_token(token);
    };
    // The token goes into a script, not corral's own argv: only the sandbox's process carries it.
    std::ofstream(dir() / "scratch.sh")
        << "touch /tmp/made-here && exec /bin/sh -c 'sleep 60; :' " << token << "\n";
    corral({"run", "--policy", "default", "--timeout", "60s", "--", "/bin/sh", "./scratch.sh"},
           options);
    ASSERT_TRUE(found) << "the sandbox did not come up";
    EXPECT_TRUE(is_corral_range_id(seen)) << "a scratch file is owned by host uid " << seen;
}

// The bound cwd keeps its owner: the sandbox's root writes there as the directory's owner (an
// idmapped mount), the caller when the caller owns it, another user when that user does.
TEST_F(Identity, FilesInTheBoundCwdBelongToTheDirectorysOwner) {
    if (auto idmap = probe_idmapped_mount(dir().string()); !idmap)
        GTEST_SKIP() << "this kernel or file system cannot idmap " << dir() << " ("
                     << idmap.error().describe() << "); README \"Identity\" says what happens then";
    auto as_caller = corral(run_sh("default", "echo x > by-sandbox"));
    ASSERT_EQ(as_caller.exit_code, 0) << as_caller.err;
    struct stat st;
    ASSERT_EQ(::stat((dir() / "by-sandbox").c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, ::geteuid());
    EXPECT_EQ(st.st_gid, ::getegid());

    const fs::path theirs = this->theirs();
    const RunOptions in_theirs = in(theirs);
    auto as_owner = corral(run_sh("default", "echo x > by-sandbox && id -u"), in_theirs);
    ASSERT_EQ(as_owner.exit_code, 0) << as_owner.err;
    EXPECT_EQ(as_owner.out, "0\n");
    ASSERT_EQ(::stat((theirs / "by-sandbox").c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, 4242u);
    EXPECT_EQ(st.st_gid, 4243u);
}

// A policy with its own user (strict's nobody) writes a bound cwd as its owner when an ordinary
// user owns it, but is never mapped to the host's root: a root-owned cwd stays closed to it
// (CVE-2021-21284: a remapped identity must not gain root's write power on host files).
TEST_F(Identity, StrictWritesTheCwdAsItsOwnerButNeverAsRoot) {
    if (auto idmap = probe_idmapped_mount(dir().string()); !idmap)
        GTEST_SKIP() << "this kernel or file system cannot idmap " << dir() << " ("
                     << idmap.error().describe() << "); README \"Identity\" says what happens then";
    auto in_root_owned = corral(run_sh("strict", "touch by-strict; echo rc=$?"));
    EXPECT_NE(in_root_owned.out.find("rc=1"), std::string::npos)
        << in_root_owned.out << in_root_owned.err;
    EXPECT_FALSE(fs::exists(dir() / "by-strict"));

    const fs::path theirs = this->theirs();
    const RunOptions in_theirs = in(theirs);
    auto got = corral(run_sh("strict", "touch by-strict && id -u"), in_theirs);
    ASSERT_EQ(got.exit_code, 0) << got.err;
    EXPECT_EQ(got.out, "65534\n");
    struct stat st;
    ASSERT_EQ(::stat((theirs / "by-strict").c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, 4242u);
}

// Item 7: root-only host files stay closed to `default` (it is not the host's root).
TEST_F(Identity, RootOnlyHostFilesAreUnreadable) {
    const fs::path secret = "/var/tmp/" + unique_token() + "-secret";
    std::ofstream(secret) << "TOP-SECRET";
    ::chmod(secret.c_str(), 0600);
    for (const char* policy : {"default", "strict"}) {
        SCOPED_TRACE(policy);
        auto got =
            corral(run_sh(policy, "cat /etc/shadow " + secret.string() + " 2>&1; echo rc=$?"));
        EXPECT_EQ(got.out.find("root:"), std::string::npos) << "read /etc/shadow:\n" << got.out;
        EXPECT_EQ(got.out.find("TOP-SECRET"), std::string::npos) << got.out;
        EXPECT_NE(got.out.find("rc=1"), std::string::npos) << got.out << got.err;
    }
    fs::remove(secret);
}

// Root's supplementary groups (group 0 at least; `sudo` adds more) must not reach the sandbox: a
// host group stays effective on host inodes although the namespace does not map it, so a
// group-root file of the sandbox's view (here 0040 root:root) would open to it. Red-team finding
// of round 2 (supplementary groups survived the user namespace under `user: inherit`); precedent:
// CVE-2014-8989 (user namespaces let unprivileged users drop or keep groups to bypass "negative"
// group permissions), which is why setgroups must be decided by the one who writes the maps.
TEST_F(Identity, RootsSupplementaryGroupsDoNotReachTheSandbox) {
    const fs::path group_file = "/var/tmp/" + unique_token() + "-group-root";
    std::ofstream(group_file) << "GROUP-ROOT-ONLY";
    ASSERT_EQ(::chown(group_file.c_str(), 0, 0), 0);
    ::chmod(group_file.c_str(), 0040);
    const gid_t extra[] = {0, 4};  // root and adm, as `sudo` from an admin's login leaves them
    RunOptions options;
    options.in_child = [extra] {
        if (::setgroups(2, extra) != 0) ::_exit(96);
    };
    auto got = corral(run_sh("default", "grep '^Groups:' /proc/self/status; cat " +
                                            group_file.string() + " 2>&1; echo rc=$?"),
                      options);
    fs::remove(group_file);
    ASSERT_NE(got.exit_code, 96) << "could not give the caller its groups";
    EXPECT_EQ(got.out.find("GROUP-ROOT-ONLY"), std::string::npos)
        << "the sandbox read a group-root file through root's groups:\n" << got.out;
    EXPECT_NE(got.out.find("rc=1"), std::string::npos) << got.out << got.err;
    std::istringstream lines(got.out);
    std::string groups_line;
    std::getline(lines, groups_line);
    EXPECT_EQ(groups_line.find_first_of("0123456789"), std::string::npos)
        << "supplementary groups inside: " << groups_line;
}

// Item 6: /dev/null inside is a bind of the host's inode; chmod on it must fail and the host's
// /dev/null keep its mode (a chmod 000 there breaks every host service).
TEST_F(Identity, DeviceNodesCannotBeChangedFromInside) {
    struct stat before, after;
    ASSERT_EQ(::stat("/dev/null", &before), 0);
    for (const char* policy : {"default", "strict"}) {
        SCOPED_TRACE(policy);
        auto got = corral(run_sh(policy,
                                 "chmod 000 /dev/null; echo chmod=$?; chown 1:1 /dev/zero; "
                                 "echo chown=$?; echo ok > /dev/null && echo write=0"));
        EXPECT_NE(got.out.find("chmod=1"), std::string::npos) << got.out << got.err;
        EXPECT_NE(got.out.find("chown=1"), std::string::npos) << got.out;
        EXPECT_NE(got.out.find("write=0"), std::string::npos) << "/dev/null must still work";
        ASSERT_EQ(::stat("/dev/null", &after), 0);
        EXPECT_EQ(after.st_mode, before.st_mode) << "the host's /dev/null was changed";
        EXPECT_EQ(after.st_uid, before.st_uid);
        if (after.st_mode != before.st_mode) ::chmod("/dev/null", before.st_mode & 07777);
    }
}

// Item 3: host unix sockets. A read-only bind does not stop connect(); a 0660 root socket must
// refuse the session's identity, a world-writable one must not be there at all (masked).
TEST_F(Identity, HostUnixSocketsAreUnreachable) {
    const std::string token = unique_token();
    HostSocket open_to_all("/var/tmp/" + token + "-0666.sock", 0666);
    HostSocket root_only("/var/tmp/" + token + "-0660.sock", 0660);
    for (const char* policy : {"default", "strict"}) {
        SCOPED_TRACE(policy);
        for (const auto* socket : {&open_to_all, &root_only}) {
            SCOPED_TRACE(socket->path);
            auto got = attack(policy, {"connect-unix", socket->path});
            auto said = answers(got.out);
            ASSERT_TRUE(said.count("connect")) << got.out << got.err;
            EXPECT_NE(said["connect"], "ok")
                << "a host socket is reachable from `" << policy << "`";
        }
    }
}

// Item 3: the socket of any corrald instance (here a second one, started next to nothing of
// this test's `corral run`) and its state dir are out of reach: connecting gives a sandbox full
// rights on the host (the docker.sock escape).
TEST_F(Identity, AnotherCorraldsSocketAndStateDirAreUnreachable) {
    if (!fs::exists(CORRAL_BINARY_DIR "/supervisor/corrald")) GTEST_SKIP() << "no corrald";
    Daemon other;
    ASSERT_TRUE(other.ready()) << other.log();
    auto got = attack("default", {"connect-unix", other.socket_path()});
    EXPECT_NE(answers(got.out)["connect"], "ok") << got.out << got.err;
    auto listed = attack("default", {"list", other.state_dir()});
    auto said = answers(listed.out);
    for (const auto& [label, result] : said)
        EXPECT_EQ(result.find("sessions"), std::string::npos) << label << " " << result;
}

// Item 4: a setuid copy of `id` planted by the sandbox is worth nothing to another host user:
// in a daemon workspace (the session dir is closed to other users, and the file belongs to the
// session's range anyway) and in a bound cwd owned by an unprivileged user (the file belongs to
// that user). Run as nobody with setpriv, `id -u` must never say 0.
TEST_F(Identity, PlantedSetuidFilesGiveNoHostUserRoot) {
    if (!fs::exists(CORRAL_BINARY_DIR "/supervisor/corrald")) GTEST_SKIP() << "no corrald";
    Daemon daemon;
    ASSERT_TRUE(daemon.ready()) << daemon.log();
    HttpClient c = HttpClient::unix_socket(daemon.socket_path());
    auto created = c.post("/v1/sessions", {{"policy", "default"}});
    ASSERT_EQ(created.status, 201u) << created.body;
    const std::string base = "/v1/sessions/" + created.json()["id"].get<std::string>();
    const fs::path root = c.get(base).json().value("root", std::string());
    auto ran = c.post(base + "/run", {{"command",
                                       "cp /usr/bin/id /workspace/planted; chmod 4755 "
                                       "/workspace/planted; touch /workspace/file; true"}});
    ASSERT_EQ(ran.status, 200u) << ran.body;
    struct stat st;
    ASSERT_EQ(::stat((root / "file").c_str(), &st), 0) << root;
    EXPECT_TRUE(is_corral_range_id(st.st_uid)) << "workspace file owned by " << st.st_uid;
    // The file API writes as the session's owner too, not as the daemon's root.
    ASSERT_EQ(c.request("PUT", base + "/files?path=from-api/a.txt", "x").status, 200u);
    for (const char* made : {"from-api", "from-api/a.txt"}) {
        ASSERT_EQ(::stat((root / made).c_str(), &st), 0) << made;
        EXPECT_TRUE(is_corral_range_id(st.st_uid)) << made << " owned by " << st.st_uid;
    }
    ASSERT_EQ(::stat(root.parent_path().c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 077, 0u) << "the session dir is open to other host users";
    if (fs::exists(root / "planted")) {
        EXPECT_NE(run_as_nobody((root / "planted").string(), "-u"), "0\n");
    }

    const fs::path theirs = this->theirs();
    const RunOptions in_theirs = in(theirs);
    corral(run_sh("default", "cp /usr/bin/id planted; chmod 4755 planted; true"), in_theirs);
    if (fs::exists(theirs / "planted")) {
        ASSERT_EQ(::stat((theirs / "planted").c_str(), &st), 0);
        EXPECT_NE(st.st_uid, 0u) << "the planted file belongs to the host's root";
        EXPECT_NE(run_as_nobody((theirs / "planted").string(), "-u"), "0\n");
    }
}

// Item 4 (mount half): every writable mount inside is nosuid,nodev.
TEST_F(Identity, WritableMountsAreNosuidNodev) {
    auto got = corral(run_sh("default", "cat /proc/self/mountinfo"));
    ASSERT_EQ(got.exit_code, 0) << got.err;
    std::istringstream lines(got.out);
    std::string line;
    int writable = 0;
    while (std::getline(lines, line)) {
        // "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS ..."
        std::istringstream fields(line);
        std::string id, parent, dev, root, point, options;
        fields >> id >> parent >> dev >> root >> point >> options;
        if (options.rfind("rw", 0) != 0) continue;
        if (point.rfind("/dev/pts", 0) == 0) continue;  // ptys are device nodes by design
        ++writable;
        SCOPED_TRACE(line);
        EXPECT_NE(options.find("nosuid"), std::string::npos) << point;
        if (point != "/proc") {
            EXPECT_NE(options.find("nodev"), std::string::npos) << point;
        }
    }
    EXPECT_GT(writable, 0) << got.out;
}

// Item 3, the daemon's own layer: should a session ever reach a corrald socket (a socket made
// world-writable by an admin, one bound after the session started), corrald serves nothing to a
// client whose credentials are a corral session range's.
TEST_F(Identity, CorraldServesNoClientRunningAsASessionIdentity) {
    if (!fs::exists(CORRAL_BINARY_DIR "/supervisor/corrald")) GTEST_SKIP() << "no corrald";
    Daemon daemon;
    ASSERT_TRUE(daemon.ready()) << daemon.log();
    ASSERT_EQ(::chmod(daemon.socket_path().c_str(), 0666), 0);
    EXPECT_NE(health_as(daemon.socket_path(), 0).find("HTTP/1.1 200"), std::string::npos)
        << "control: root is served";
    const uid_t session_root = kIdRangeFirst + 7 * kIdRangeSize;
    const std::string answer = health_as(daemon.socket_path(), session_root);
    EXPECT_EQ(answer.find("HTTP/1.1 200"), std::string::npos) << answer;
    EXPECT_EQ(answer.find("connect failed"), std::string::npos) << "the socket must be reachable "
                                                                    "for this test";
}

}  // namespace
}  // namespace corral::security
