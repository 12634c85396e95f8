// Refusal counting in the daemon (issue 17.6, docs/SECCOMP.md "Refusals in reports"): process
// records count refused syscalls by name, and the sandbox can neither stall the daemon, grow its
// memory, nor forge or reset the counts.
//
// The precedents: seccomp_unotify(2) "Caveats" (a supervisor that decides on memory the caller
// can still change loses a TOCTOU race; one that "continues" a call lets it run unchecked) and the
// CVE-2022-30594 class (ptrace/seccomp interplay that let a process escape its filter): the
// daemon answers from the registers the kernel froze, never continues a refused call, and the
// job never holds a listener. A listener held by the job could answer its own refused calls
// "continue"; a daemon loop that served a flood to its end would be a DoS of every session.

#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "support/sandbox_harness.hpp"
#include "support/security_daemon.hpp"

namespace corral::security {
namespace {

using testing::HttpClient;
using Counts = std::map<std::string, uint64_t>;

/// Resident memory of a process in KiB (VmRSS), 0 when unreadable.
uint64_t rss_kib(pid_t pid) {
    std::ifstream status("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(status, line)) {
        if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6));
    }
    return 0;
}

class SeccompRefusalsDaemon : public DaemonTest {
  protected:
    std::string prepared_session(HttpClient& c, const std::string& policy = "default") {
        auto [base, root] = session(c, policy);
        upload_probe(c, base, CORRAL_SYSCALL_PROBE, "sprobe");
        run(c, base, "chmod 755 sprobe");
        return base;
    }
    /// Starts `command` as a process of the session; returns its path.
    std::string spawn(HttpClient& c, const std::string& base, const std::string& command) {
        auto res = c.post(base + "/processes", {{"command", command}});
        EXPECT_EQ(res.status, 201u) << res.body;
        return base + "/processes/" + res.json().value("id", std::string());
    }
    nlohmann::json wait_for(HttpClient& c, const std::string& process) {
        auto res = c.get(process + "/wait?timeoutMs=120000");
        EXPECT_EQ(res.status, 200u) << res.body;
        return c.get(process).json();
    }
    std::string stdout_of(HttpClient& c, const std::string& process) {
        return c.get(process + "/logs?stream=stdout").json().value("data", std::string());
    }
};

// The run result and the process record count exactly the refused calls, and each call still
// got the policy's errno.
TEST_F(SeccompRefusalsDaemon, RecordsCountRefusalsByName) {
    auto c = client();
    const std::string base = prepared_session(c);
    auto res = c.post(base + "/run",
                      {{"command", "./sprobe repeat 3 ptrace; ./sprobe repeat 1 mount"}});
    ASSERT_EQ(res.status, 200u) << res.body;
    auto result = res.json();
    auto a = answers(result.value("stdout", std::string()));
    EXPECT_EQ(a["ptrace"], "EPERM") << result.dump();
    EXPECT_EQ(a["mount"], "EPERM") << result.dump();
    EXPECT_EQ(result["seccomp"]["counted"], true) << result.dump();
    EXPECT_EQ(result["seccomp"]["refused"].get<Counts>(), (Counts{{"mount", 1}, {"ptrace", 3}}))
        << result.dump();
    EXPECT_EQ(result["seccomp"]["refusedTotal"], 4);

    const std::string process = spawn(c, base, "./sprobe repeat 2 keyctl");
    auto record = wait_for(c, process);
    EXPECT_EQ(answers(stdout_of(c, process))["keyctl"], "EPERM");
    EXPECT_EQ(record["seccomp"]["refused"].get<Counts>(), (Counts{{"keyctl", 2}}))
        << record.dump();
    // A session under `none` has no filter: nothing to count.
    auto [open_base, open_root] = session(c, "none");
    auto open = c.post(open_base + "/run", {{"command", "true"}});
    EXPECT_TRUE(open.json()["seccomp"].is_null()) << open.body;
}

// 16 threads call a refused syscall as fast as they can. The daemon keeps answering other
// requests meanwhile (each within a bound generous enough to only catch a stalled loop), its
// memory stays put, and the count is exactly the number of calls the flood made.
TEST_F(SeccompRefusalsDaemon, AFloodOfRefusalsStallsNothingAndStaysBounded) {
    auto c = client();
    const std::string base = prepared_session(c);
    const uint64_t rss_before = rss_kib(daemon_->pid());
    const std::string flood = spawn(c, base, "./sprobe flood 16 4 ptrace");
    uint64_t rss_peak = rss_before;
    auto watcher = client();
    int answered = 0;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    while (std::chrono::steady_clock::now() < until) {
        const auto asked = std::chrono::steady_clock::now();
        auto health = watcher.get("/v1/health");
        const auto took = std::chrono::steady_clock::now() - asked;
        EXPECT_EQ(health.status, 200u);
        EXPECT_LT(took, std::chrono::seconds(5)) << "the daemon's loop stalled under the flood";
        auto listing = watcher.get(base + "/processes");
        EXPECT_EQ(listing.status, 200u);
        ++answered;
        rss_peak = std::max(rss_peak, rss_kib(daemon_->pid()));
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    EXPECT_GT(answered, 5) << "the daemon answered only " << answered << " requests in 3 s";
    auto record = wait_for(c, flood);
    auto a = answers(stdout_of(c, flood));
    ASSERT_TRUE(a.count("flood-calls")) << record.dump();
    const uint64_t calls = std::stoull(a["flood-calls"]);
    EXPECT_GT(calls, 1000u) << "the flood hardly ran";
    EXPECT_EQ(a["flood-errno"], "EPERM");
    EXPECT_EQ(record["seccomp"]["refused"].get<Counts>(), (Counts{{"ptrace", calls}}))
        << record.dump();
    EXPECT_EQ(record["seccomp"]["refusedTotal"].get<uint64_t>(), calls);
    EXPECT_LT(rss_peak, rss_before + 16 * 1024)
        << "the daemon grew from " << rss_before << " to " << rss_peak << " KiB under the flood";
}

// The job holds no listener and no descriptor that answers a listener's ioctl; it cannot get one
// of its own (EBUSY), so it can neither answer its own refused calls nor touch the counts. Each
// process's counts are its own: a second process's refusals do not change the first's record.
TEST_F(SeccompRefusalsDaemon, TheSandboxCannotForgeOrResetCounts) {
    auto c = client();
    const std::string base = prepared_session(c);
    auto a = answers(run(c, base, "./sprobe own-listener"));
    EXPECT_EQ(a["listener-fds"], "0");
    EXPECT_EQ(a["listener-ioctl-fds"], "0");
    EXPECT_EQ(a["new-listener"], "EBUSY") << "a job with a listener could continue its own calls";

    const std::string first = spawn(c, base, "./sprobe repeat 5 ptrace");
    auto first_record = wait_for(c, first);
    EXPECT_EQ(first_record["seccomp"]["refused"].get<Counts>(), (Counts{{"ptrace", 5}}));
    // Another process tries everything it can: its own listener, a nested filter, more refusals.
    const std::string second = spawn(c, base,
                                     "./sprobe own-listener; ./sprobe nested-filter mount; "
                                     "./sprobe repeat 2 ptrace");
    auto second_record = wait_for(c, second);
    EXPECT_EQ(second_record["seccomp"]["refused"].get<Counts>(),
              (Counts{{"mount", 1}, {"ptrace", 2}}))
        << second_record.dump();
    EXPECT_EQ(c.get(first).json()["seccomp"]["refused"].get<Counts>(), (Counts{{"ptrace", 5}}))
        << "another process changed the first one's counts";
}

}  // namespace
}  // namespace corral::security
