// Policies sent to corrald must not become a way to read or probe the host's files, or to stall
// the daemon (issue 10 item 2). Before: `extends: /etc/shadow` in POST /v1/policies/validate
// quoted the file's lines in the diagnostics to any token (a restricted one over TCP included)
// and the messages told whether a path existed — the class of CVE-2021-41091 (moby let
// unprivileged users reach and probe paths under its data dir); `extends:` naming a FIFO in a
// session's workspace blocked the event loop until someone opened it; /dev/zero froze it and took
// RSS past 2 GB; a valid 7 MB policy held it for 7-9 s; `corral policy check` on /dev/zero died
// of bad_alloc. Each test runs a real corrald and talks to it over its real sockets.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>
#include <thread>

#include "../integration/support/http_client.hpp"
#include "support/corrald_instance.hpp"
#include "support/sandbox_harness.hpp"

namespace corral::security {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using nlohmann::json;
using testing::HttpClient;
using testing::HttpResponse;

/// Lines of a file as the test (root) reads it, the non-trivial ones only.
std::vector<std::string> secret_lines(const std::string& path) {
    std::ifstream in(path);
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) {
        if (line.size() >= 6) lines.push_back(line);
    }
    return lines;
}

/// The first line of `secrets` that `text` contains ("" when none): a leak.
std::string leaked(const std::string& text, const std::vector<std::string>& secrets) {
    for (const auto& line : secrets) {
        if (text.find(line) != std::string::npos) return line;
        // A diagnostic quotes a value: the first field of a shadow line is enough to tell.
        const std::string field = line.substr(0, line.find(':'));
        if (field.size() >= 6 && text.find("`" + field) != std::string::npos) return line;
    }
    return "";
}

class PolicyInput : public ::testing::Test {
  protected:
    void SetUp() override {
        if (::geteuid() != 0) GTEST_SKIP() << "needs root (corrald, /etc/shadow, mknod)";
        if (!fs::exists(CORRAL_BINARY_DIR "/supervisor/corrald"))
            GTEST_SKIP() << "corrald is not built";
        daemon_ = std::make_unique<CorraldInstance>();
        ASSERT_TRUE(daemon_->ready()) << "corrald did not start:\n" << daemon_->log();
        // A secret only this test knows, in a root-only file outside the policy dir.
        secret_ = "MARKER-" + unique_token() + ":$6$saltsalt$hashhashhash:19000:0:99999:7:::";
        secret_path_ = daemon_->scratch_dir() + "/secret.yaml";
        std::ofstream(secret_path_) << secret_ << "\n";
        ::chmod(secret_path_.c_str(), 0600);
    }
    void TearDown() override { daemon_.reset(); }

    HttpClient unix_client() const { return HttpClient::unix_socket(daemon_->socket_path()); }

    /// A session under `none`; returns {id, full token, restricted token, root on the host}.
    struct Session {
        std::string id, token, restricted;
        fs::path root;
    };
    Session session() {
        auto c = unix_client();
        auto res = c.post("/v1/sessions", {{"policy", "none"}});
        EXPECT_EQ(res.status, 201u) << res.body;
        Session s{res.json().value("id", ""),
                  res.json().value("token", ""),
                  res.json().value("restrictedToken", ""),
                  {}};
        s.root = c.get("/v1/sessions/" + s.id).json().value("root", "");
        return s;
    }

    /// What validate and session creation answer for a policy body, from every kind of caller.
    std::vector<std::string> answers_for(const std::string& yaml, const Session& s) {
        std::vector<std::string> out;
        auto unix = unix_client();
        auto tcp = HttpClient::tcp("127.0.0.1", daemon_->tcp_port());
        for (const auto& headers :
             {testing::HttpHeaders{}, testing::bearer(s.token), testing::bearer(s.restricted)}) {
            out.push_back(unix.request("POST", "/v1/policies/validate", yaml, headers).body);
            if (!headers.empty())
                out.push_back(tcp.request("POST", "/v1/policies/validate", yaml, headers).body);
        }
        out.push_back(unix.post("/v1/sessions", {{"policyYaml", yaml}}).body);
        return out;
    }

    std::unique_ptr<CorraldInstance> daemon_;
    std::string secret_, secret_path_;
};

// The file's lines never come back, whoever asks and however the path is spelled; and the answer
// does not depend on whether the path exists.
TEST_F(PolicyInput, ExtendsNeverQuotesHostFiles_AnyTokenAnyListener) {
    const Session s = session();
    std::vector<std::string> secrets = secret_lines("/etc/shadow");
    secrets.push_back(secret_);
    // A link in the policy dir that points out of it must not be followed either.
    fs::create_symlink(secret_path_, daemon_->policy_dir() + "/linked.yaml");
    fs::create_symlink(
        "../" + fs::path(daemon_->scratch_dir()).filename().string() + "/secret.yaml",
        daemon_->policy_dir() + "/relative-link.yaml");
    const std::string climb = "../../../../../../.." + secret_path_;
    for (const std::string& target :
         {std::string("/etc/shadow"), secret_path_, climb, std::string("linked.yaml"),
          std::string("relative-link.yaml"), std::string("linked"),
          std::string("./../../../../../../etc/shadow")}) {
        for (const auto& answer : answers_for(std::string("extends: ") + target + "\n", s)) {
            EXPECT_EQ(leaked(answer, secrets), "") << "extends: " << target << "\n" << answer;
            EXPECT_EQ(answer.find("$6$"), std::string::npos) << answer;
        }
    }
    // The same for a session created by name.
    auto c = unix_client();
    for (const std::string& name : {std::string("/etc/shadow"), secret_path_, climb}) {
        auto res = c.post("/v1/sessions", {{"policy", name}});
        EXPECT_NE(res.status, 201u) << res.body;
        EXPECT_EQ(leaked(res.body, secrets), "") << res.body;
    }
}

TEST_F(PolicyInput, AnswerDoesNotTellWhetherAHostPathExists) {
    auto c = unix_client();
    auto text_for = [&](const std::string& path) {
        auto res = c.request("POST", "/v1/policies/validate", "extends: " + path + "\n");
        std::string body = res.body;
        for (size_t at; (at = body.find(path)) != std::string::npos;)
            body.replace(at, path.size(), "P");
        return std::to_string(res.status) + " " + body;
    };
    const std::string missing = "/var/lib/" + unique_token() + "-missing/x.yaml";
    const std::string exists = text_for(secret_path_);
    EXPECT_EQ(exists, text_for(missing));
    EXPECT_EQ(exists, text_for("/etc/shadow"));
    EXPECT_EQ(exists, text_for(daemon_->scratch_dir()));  // a directory
}

// Presets and the policy dir still work, by name and by relative path inside the dir.
TEST_F(PolicyInput, PresetsAndPolicyDirStillExtend) {
    fs::create_directories(daemon_->policy_dir() + "/teams");
    std::ofstream(daemon_->policy_dir() + "/base.yaml") << "extends: none\nlimits: { pids: 77 }\n";
    std::ofstream(daemon_->policy_dir() + "/teams/web.yaml") << "extends: ../base.yaml\n";
    auto c = unix_client();
    for (const char* target : {"base", "base.yaml", "teams/web.yaml", "strict"}) {
        auto res =
            c.request("POST", "/v1/policies/validate", std::string("extends: ") + target + "\n");
        EXPECT_TRUE(res.json().value("valid", false)) << target << ": " << res.body;
    }
    auto created = c.post("/v1/sessions", {{"policy", "base"}});
    EXPECT_EQ(created.status, 201u) << created.body;
    // An invalid parent of the dir is named as invalid, but its text is not passed on.
    std::ofstream(daemon_->policy_dir() + "/broken.yaml") << "limits: { pids: SECRET-VALUE }\n";
    auto broken = c.request("POST", "/v1/policies/validate", "extends: broken\n");
    EXPECT_FALSE(broken.json().value("valid", true));
    EXPECT_NE(broken.body.find("broken"), std::string::npos) << broken.body;
    EXPECT_EQ(broken.body.find("SECRET-VALUE"), std::string::npos) << broken.body;
}

// A FIFO in a session's workspace (which the sandbox can create) must not stall the daemon.
TEST_F(PolicyInput, FifoDoesNotBlockTheEventLoop) {
    const Session s = session();
    ASSERT_FALSE(s.root.empty());
    const std::string fifo = (s.root / "trap.yaml").string();
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0666), 0);
    const std::string dir_fifo = daemon_->policy_dir() + "/pipe.yaml";
    ASSERT_EQ(::mkfifo(dir_fifo.c_str(), 0666), 0);
    const std::string socket = daemon_->socket_path();
    for (const std::string& body : {"extends: " + fifo + "\n", std::string("extends: pipe.yaml\n"),
                                    std::string("extends: pipe\n")}) {
        auto answer = request_within(
            socket, post_request("/v1/policies/validate", body, "application/yaml"), 20s);
        EXPECT_TRUE(health_within(socket, 10s)) << "health stalled after: " << body;
        ASSERT_TRUE(answer.has_value()) << "no answer to: " << body;
        EXPECT_NE(body_of(*answer).find("\"valid\":false"), std::string::npos) << *answer;
    }
    auto by_name =
        request_within(socket, post_request("/v1/sessions", json{{"policy", "pipe"}}.dump()), 20s);
    ASSERT_TRUE(by_name.has_value());
    EXPECT_NE(status_of(*by_name), 201u) << *by_name;
    EXPECT_NE(by_name->find("FIFO"), std::string::npos) << *by_name;
    EXPECT_TRUE(health_within(socket, 10s));
    // Unblock a daemon that did open it (so a failing run still ends).
    for (const auto& path : {fifo, dir_fifo}) {
        const int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK);
        if (fd >= 0) ::close(fd);
    }
}

// /dev/zero never ends: refused before a byte is read, whichever way it is named.
TEST_F(PolicyInput, DeviceIsRefusedQuicklyAndMemoryStaysBounded) {
    const std::string socket = daemon_->socket_path();
    const std::string zero = daemon_->policy_dir() + "/zero.yaml";
    ASSERT_EQ(::mknod(zero.c_str(), S_IFCHR | 0666, ::makedev(1, 5)), 0);  // /dev/zero's numbers
    fs::create_symlink("/dev/zero", daemon_->policy_dir() + "/zero-link.yaml");
    const long rss_before = daemon_->rss_kib();
    const std::vector<std::string> requests = {
        post_request("/v1/policies/validate", "extends: /dev/zero\n", "application/yaml"),
        post_request("/v1/policies/validate", "extends: zero\n", "application/yaml"),
        post_request("/v1/policies/validate", "extends: zero-link.yaml\n", "application/yaml"),
        post_request("/v1/sessions", json{{"policy", "/dev/zero"}}.dump()),
        post_request("/v1/sessions", json{{"policy", "zero"}}.dump()),
        post_request("/v1/sessions", json{{"policyYaml", "extends: /dev/zero\n"}}.dump())};
    for (const auto& request : requests) {
        auto answer = request_within(socket, request, 20s);
        ASSERT_TRUE(answer.has_value()) << "no answer to:\n" << request;
        EXPECT_NE(status_of(*answer), 201u) << *answer;
        EXPECT_TRUE(health_within(socket, 10s));
    }
    auto device = request_within(socket, requests[1], 20s);
    ASSERT_TRUE(device.has_value());
    EXPECT_NE(device->find("character device"), std::string::npos) << *device;
    // Generous: a read of /dev/zero grows by gigabytes.
    EXPECT_LT(daemon_->rss_kib() - rss_before, 200 * 1024) << "RSS grew from " << rss_before;
}

// Bodies are capped at 1 MiB (413 at once from Content-Length); a body under the cap is parsed
// away from the event loop.
TEST_F(PolicyInput, LargeBodiesAreRefusedAndNeverStallHealth) {
    const std::string socket = daemon_->socket_path();
    std::string big = "name: big\nextends: none\nenv:\n  set:\n";
    for (int i = 0; big.size() < (7u << 20); ++i)
        big += "    V" + std::to_string(i) + ": \"" + std::string(40, 'x') + "\"\n";
    auto pending = std::async(std::launch::async, [&] {
        return request_within(socket,
                              post_request("/v1/policies/validate", big, "application/yaml"), 60s);
    });
    std::this_thread::sleep_for(50ms);
    EXPECT_TRUE(health_within(socket, 5s)) << "health stalled during a 7 MB policy";
    auto answer = pending.get();
    ASSERT_TRUE(answer.has_value());
    EXPECT_EQ(status_of(*answer), 413u) << answer->substr(0, 300);
    EXPECT_NE(answer->find("1048576"), std::string::npos) << answer->substr(0, 300);
    auto inline_big =
        request_within(socket, post_request("/v1/sessions", json{{"policyYaml", big}}.dump()), 60s);
    ASSERT_TRUE(inline_big.has_value());
    EXPECT_EQ(status_of(*inline_big), 413u) << inline_big->substr(0, 300);
    EXPECT_NE(inline_big->find("policyYaml"), std::string::npos) << inline_big->substr(0, 300);

    // Just under the cap: valid, and answered without holding anyone else.
    big.resize(1000000);
    big.resize(big.rfind('\n') + 1);
    auto near_cap = std::async(std::launch::async, [&] {
        return request_within(socket,
                              post_request("/v1/policies/validate", big, "application/yaml"), 120s);
    });
    std::this_thread::sleep_for(50ms);
    EXPECT_TRUE(health_within(socket, 5s));
    auto valid = near_cap.get();
    ASSERT_TRUE(valid.has_value());
    EXPECT_NE(body_of(*valid).find("\"valid\":true"), std::string::npos) << valid->substr(0, 300);
}

// Billion laughs with YAML anchors: a small document naming one large value thousands of times.
TEST_F(PolicyInput, AliasBombIsBounded) {
    std::string bomb = "name: bomb\nextends: none\nx-big: &big \"" + std::string(200000, 'a') +
                       "\"\nfilesystem:\n  hidden: [";
    for (int i = 0; i < 20000; ++i) bomb += (i ? ",*big" : "*big");
    bomb += "]\n";
    ASSERT_LT(bomb.size(), 1u << 20);
    auto answer =
        request_within(daemon_->socket_path(),
                       post_request("/v1/policies/validate", bomb, "application/yaml"), 60s);
    ASSERT_TRUE(answer.has_value());
    EXPECT_NE(body_of(*answer).find("\"valid\":false"), std::string::npos);
    EXPECT_LT(answer->size(), 1u << 20) << "diagnostics grew past the document";
    EXPECT_TRUE(health_within(daemon_->socket_path(), 10s));
}

/// Runs `corral ARGS` with a bound; {exit code, stderr}; exit code -1 when it had to be killed.
std::pair<int, std::string> corral_with_bound(const std::vector<std::string>& args) {
    int err_pipe[2];
    if (::pipe(err_pipe) != 0) return {-2, "pipe failed"};
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::dup2(err_pipe[1], 2);
        const int null = ::open("/dev/null", O_WRONLY);
        ::dup2(null, 1);
        std::vector<std::string> all = {CORRAL_BINARY_DIR "/supervisor/corral"};
        all.insert(all.end(), args.begin(), args.end());
        std::vector<char*> argv;
        for (auto& arg : all) argv.push_back(arg.data());
        argv.push_back(nullptr);
        ::execv(argv[0], argv.data());
        ::_exit(127);
    }
    ::close(err_pipe[1]);
    int status = 0;
    bool killed = false;
    const auto until = std::chrono::steady_clock::now() + 20s;
    while (::waitpid(pid, &status, WNOHANG) == 0) {
        if (std::chrono::steady_clock::now() > until) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, &status, 0);
            killed = true;
            break;
        }
        std::this_thread::sleep_for(20ms);
    }
    std::string err;
    char buf[4096];
    for (ssize_t n; (n = ::read(err_pipe[0], buf, sizeof buf)) > 0;) err.append(buf, n);
    ::close(err_pipe[0]);
    if (killed) return {-1, err};
    return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), err};
}

// `corral policy check` is the user's own tool and may read their files, but a FIFO, a device or
// a socket is refused with a clear message instead of hanging or aborting (bad_alloc).
TEST_F(PolicyInput, PolicyCheckRefusesNonRegularFiles) {
    const std::string dir = daemon_->scratch_dir();
    const std::string fifo = dir + "/fifo.yaml";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    const std::string sock = dir + "/sock.yaml";
    const int listener = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, sock.c_str(), sizeof address.sun_path - 1);
    ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
    std::ofstream(dir + "/extends-zero.yaml") << "extends: /dev/zero\n";
    std::ofstream(dir + "/extends-fifo.yaml") << "extends: fifo.yaml\n";
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"/dev/zero", "character device"},
        {fifo, "FIFO"},
        {sock, "socket"},
        {dir + "/extends-zero.yaml", "character device"},
        {dir + "/extends-fifo.yaml", "FIFO"}};
    for (const auto& [file, kind] : cases) {
        auto [code, err] = corral_with_bound({"policy", "check", file});
        EXPECT_EQ(code, 1) << file << ": " << err;
        EXPECT_NE(err.find(kind), std::string::npos) << file << ": " << err;
        EXPECT_EQ(err.find("bad_alloc"), std::string::npos) << err;
    }
    ::close(listener);
    const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    if (fd >= 0) ::close(fd);
}

}  // namespace
}  // namespace corral::security
