// A forged, garbage, torn or huge journal never makes corrald adopt or kill a process that is not
// its own, and never stops it from starting (issue 12 item 2; the journal is a list of pids, and
// pid-reuse and pid-forgery attacks on supervisors are old: CVE-2019-6133, polkit's start-time
// race, is why every adopted pid is checked by pidfd + start time + cgroup membership).
// Every case keeps a "victim": a process of the test's own, outside corral's cgroups, whose pid
// and real start time the forged journal names. It must be alive after every restart.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "../integration/support/corrald_process.hpp"
#include "isolation/pid_ref.hpp"
#include "sessions/recovery/journal.hpp"
#include "sessions/recovery/journal_records.hpp"

namespace corral {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using testing::corrald_can_run;
using testing::CorraldProcess;
using testing::HttpClient;

/// A process of the test's own (in the test's cgroup, not corral's), killed when this goes.
class Victim {
  public:
    Victim() {
        pid_ = ::fork();
        if (pid_ == 0) {
            ::execl("/bin/sleep", "sleep", "600", nullptr);
            ::_exit(127);
        }
        for (int i = 0; i < 200; ++i) {
            if (auto ticks = process_start_ticks(pid_)) start_ = *ticks;
            std::ifstream comm("/proc/" + std::to_string(pid_) + "/comm");
            std::string name;
            if (comm >> name && name == "sleep") break;
            std::this_thread::sleep_for(5ms);
        }
    }
    ~Victim() {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
    }
    bool alive() const {
        int status = 0;
        return ::waitpid(pid_, &status, WNOHANG) == 0;
    }
    pid_t pid() const { return pid_; }
    uint64_t start() const { return start_; }

  private:
    pid_t pid_ = -1;
    uint64_t start_ = 0;
};

/// Rewrites the journal: `edit` changes the replayed records (a root-owned 0600 file, as the
/// daemon's own would be, so only the content is forged).
void forge_journal(const std::string& path, const std::function<void(std::vector<json>&)>& edit) {
    auto contents = read_journal(path);
    ASSERT_TRUE(contents) << contents.error().describe();
    std::vector<json> records = contents->records;
    edit(records);
    std::string bytes = frame_journal_record({{"t", "header"}, {"version", 1}, {"minReader", 1}});
    for (const auto& record : records) bytes += frame_journal_record(record);
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
    ::chmod(path.c_str(), 0600);
}

/// Creates a session (policy `policy`) with a running process; returns its id.
std::string session_with_process(HttpClient& c, const std::string& policy) {
    auto made = c.post("/v1/sessions", {{"policy", policy}});
    EXPECT_EQ(made.status, 201u) << made.body;
    const std::string id = made.json()["id"];
    EXPECT_EQ(c.post("/v1/sessions/" + id + "/processes", {{"command", "sleep 600"}}).status,
              201u);
    return id;
}

// A process record pointing at a pid that is not in the session's cgroup (the victim, with its
// real start time, so only the cgroup check stands between it and the daemon): the leaf's own
// processes are still adopted, the forged main is refused with a log line, and ending the
// session kills the leaf, never the victim.
TEST(JournalForgery, APidOutsideTheSessionsCgroupIsNeverAdoptedOrKilled) {
    std::string why;
    if (!corrald_can_run(why)) GTEST_SKIP() << why;
    Victim victim;
    CorraldProcess daemon;
    ASSERT_TRUE(daemon.ready()) << daemon.log();
    HttpClient c = daemon.client();
    const std::string id = session_with_process(c, "none");
    daemon.kill_hard();
    forge_journal(daemon.state_dir() + "/journal", [&](std::vector<json>& records) {
        for (auto& r : records)
            if (r["t"] == "process") {
                r["pid"] = victim.pid();
                r["start"] = victim.start();
            }
    });
    ASSERT_TRUE(daemon.start()) << daemon.log();
    EXPECT_NE(daemon.log().find("is not in"), std::string::npos) << daemon.log();
    auto sig = c.post("/v1/sessions/" + id + "/processes/p1/signal", {{"signal", "KILL"}});
    EXPECT_NE(sig.status, 200u) << sig.body;  // no main process was taken to signal
    EXPECT_EQ(c.del("/v1/sessions/" + id).status, 200u);
    EXPECT_TRUE(victim.alive());
    EXPECT_TRUE(daemon.footprint().empty()) << daemon.footprint().describe();
}

// A holder pid that is not the session's holder: the session is not adopted (its namespaces
// cannot be trusted), it is reaped as anything unowned is, and the victim lives.
TEST(JournalForgery, AForgedHolderRefusesTheSessionAndSparesTheVictim) {
    std::string why;
    if (!corrald_can_run(why)) GTEST_SKIP() << why;
    Victim victim;
    CorraldProcess daemon;
    ASSERT_TRUE(daemon.ready()) << daemon.log();
    HttpClient c = daemon.client();
    const std::string id = session_with_process(c, "default");
    daemon.kill_hard();
    forge_journal(daemon.state_dir() + "/journal", [&](std::vector<json>& records) {
        for (auto& r : records)
            if (r["t"] == "session") {
                r["holderPid"] = victim.pid();
                r["holderStart"] = victim.start();
            }
    });
    ASSERT_TRUE(daemon.start()) << daemon.log();
    EXPECT_NE(daemon.log().find("not re-adopted: " + id), std::string::npos) << daemon.log();
    EXPECT_TRUE(victim.alive());
    EXPECT_EQ(c.get("/v1/sessions/" + id).json()["state"], "ended");
    EXPECT_TRUE(daemon.footprint().empty()) << daemon.footprint().describe();
}

// Ids that climb out of the instance and records that name cgroup paths: a journal names no
// path, so they are skipped with a log line; the victim's cgroup is never touched.
TEST(JournalForgery, IdsAndPathsThatLeaveTheInstanceAreIgnored) {
    std::string why;
    if (!corrald_can_run(why)) GTEST_SKIP() << why;
    Victim victim;
    CorraldProcess daemon;
    ASSERT_TRUE(daemon.ready()) << daemon.log();
    HttpClient c = daemon.client();
    const std::string id = session_with_process(c, "none");
    daemon.kill_hard();
    std::string victim_cgroup;
    {
        std::ifstream cg("/proc/" + std::to_string(victim.pid()) + "/cgroup");
        std::getline(cg, victim_cgroup);
    }
    forge_journal(daemon.state_dir() + "/journal", [&](std::vector<json>& records) {
        json evil = records.front();
        evil["sid"] = "../../..";
        evil["cgroup"] = "/sys/fs/cgroup/unified";
        records.push_back(evil);
        for (auto r : std::vector<json>(records)) {
            if (r["t"] != "process") continue;
            r["id"] = "../../../../";
            r["pid"] = victim.pid();
            r["start"] = victim.start();
            r["cgroup"] = victim_cgroup;
            records.push_back(r);
        }
    });
    ASSERT_TRUE(daemon.start()) << daemon.log();
    EXPECT_NE(daemon.log().find("bad session id"), std::string::npos) << daemon.log();
    EXPECT_NE(daemon.log().find("bad process id"), std::string::npos) << daemon.log();
    EXPECT_EQ(c.get("/v1/sessions/" + id).json()["state"], "active");
    EXPECT_EQ(c.del("/v1/sessions/" + id).status, 200u);
    EXPECT_TRUE(victim.alive());
    EXPECT_TRUE(daemon.footprint().empty()) << daemon.footprint().describe();
}

// Garbage, a huge file and a journal somebody else could write: refused whole with a log line,
// the daemon starts, and what the previous run left is reaped as without a journal.
TEST(JournalForgery, GarbageHugeOrForeignJournalsAreRefusedAndTheDaemonStarts) {
    std::string why;
    if (!corrald_can_run(why)) GTEST_SKIP() << why;
    Victim victim;
    CorraldProcess daemon;
    ASSERT_TRUE(daemon.ready()) << daemon.log();
    HttpClient c = daemon.client();
    const std::string journal = daemon.state_dir() + "/journal";
    const std::vector<std::pair<std::string, std::function<void()>>> cases = {
        {"ignored the last 4096 bytes from offset 0",
         [&] {
             std::ofstream(journal, std::ios::trunc) << std::string(4096, '\x42');
             ::chmod(journal.c_str(), 0600);
         }},
        {"more than any this daemon writes",
         [&] { ASSERT_EQ(::truncate(journal.c_str(), off_t(1) << 30), 0); }},
        {"writable by group or others", [&] { ::chmod(journal.c_str(), 0666); }},
        {"owned by uid 65534", [&] { ASSERT_EQ(::chown(journal.c_str(), 65534, 65534), 0); }},
    };
    for (const auto& [expected, spoil] : cases) {
        SCOPED_TRACE(expected);
        const std::string id = session_with_process(c, "none");
        daemon.kill_hard();
        spoil();
        ASSERT_TRUE(daemon.start()) << daemon.log();
        EXPECT_NE(daemon.log().find(expected), std::string::npos) << daemon.log();
        EXPECT_EQ(c.get("/v1/sessions/" + id).json()["state"], "ended");
        EXPECT_TRUE(daemon.footprint().empty()) << daemon.footprint().describe();
        EXPECT_TRUE(victim.alive());
        struct stat st {};
        ASSERT_EQ(::stat(journal.c_str(), &st), 0);  // replaced by a fresh one of its own
        EXPECT_EQ(st.st_uid, 0u);
        EXPECT_EQ(st.st_mode & 0777, 0600u);
        EXPECT_LT(st.st_size, 4096);
    }
}

}  // namespace
}  // namespace corral
