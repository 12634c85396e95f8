// What corrald starts lives outside corrald's own session and process group from its birth: the
// launch zygote, every session's holder (its PID 1), a prepared session's waiting child and every
// command. In corrald's group they shared its terminal's ^C, ^Z and hang-up (corrald started in
// the foreground of a terminal), and a stopped one among them made corrald's group an orphaned
// process group with a stopped member once the shell that started corrald exited: the kernel then
// sends SIGHUP and SIGCONT to the whole group (kernel/exit.c, kill_orphaned_pgrp), and corrald,
// which does not handle SIGHUP, died of it (seen at stop 42: a stopped waiting child of a test's
// corrald, with ctest started from a shell that exited). The precedent for keeping a sandbox out of
// its supervisor's terminal session: CVE-2017-5226 (bubblewrap's --new-session, TIOCSTI).

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/corrald_process.hpp"
#include "support/http_client.hpp"
#include "support/prepared_pool.hpp"
#include "support/test_helpers.hpp"

namespace corral {
namespace {

using namespace std::chrono_literals;
using test_support::proc_text;
using testing::children_named;
using testing::CorraldProcess;
using testing::HttpClient;
using testing::pids_in;
using testing::running;
using testing::StartedBy;

/// A process's process group and session (/proc/<pid>/stat fields 5 and 6).
struct GroupAndSession {
    pid_t group = -1;
    pid_t session = -1;
};

GroupAndSession group_and_session(pid_t pid) {
    const std::string stat = proc_text(pid, "stat");
    GroupAndSession found;
    const auto name_end = stat.rfind(')');
    if (name_end == std::string::npos) return found;
    std::istringstream fields(stat.substr(name_end + 1));
    char state = 0;
    pid_t parent = -1;
    fields >> state >> parent >> found.group >> found.session;
    return found;
}

/// Whether `pid`'s state letter becomes `state` within two seconds.
bool reaches_state(pid_t pid, char state) {
    for (int i = 0; i < 200; ++i) {
        if (testing::process_state(pid) == state) return true;
        std::this_thread::sleep_for(10ms);
    }
    return false;
}

class DaemonProcessGroups : public testing::PreparedPoolTest {
  protected:
    /// The session's holder: the one process in its cgroup outside the process leaves (in a
    /// `holder` leaf where controllers are enabled below the session, else in the session's own).
    pid_t holder_of(const std::string& id) {
        auto holders = pids_in(*daemon_, id, "holder");
        if (holders.empty()) holders = pids_in(*daemon_, id, "");
        EXPECT_EQ(holders.size(), 1u) << "one holder in session " << id;
        return holders.size() == 1 ? holders[0] : 0;
    }
};

TEST_F(DaemonProcessGroups, EverythingCorraldStartsLeadsASessionOfItsOwn) {
    ASSERT_NO_FATAL_FAILURE(start(1));
    HttpClient& c = *client_;
    const pid_t daemon = daemon_->pid();
    const GroupAndSession corrald = group_and_session(daemon);
    // 0 where corrald's ancestors never made a session (the pure-v2 VM runs tests under init's).
    ASSERT_GE(corrald.session, 0) << proc_text(daemon, "stat");

    const std::string id = claim(c);
    ASSERT_FALSE(id.empty());
    // A child the zygote has just cloned (the pool's refill's waiting child) carries its name
    // until it names itself: the zygote is the one left.
    std::vector<pid_t> zygotes;
    for (int i = 0; i < 200; ++i) {
        zygotes = children_named(daemon, "corrald-launch");
        if (zygotes.size() == 1) break;
        std::this_thread::sleep_for(10ms);
    }
    ASSERT_EQ(zygotes.size(), 1u) << daemon_->log();
    std::vector<std::pair<std::string, pid_t>> started;
    started.emplace_back("the launch zygote", zygotes[0]);
    started.emplace_back("the session's holder", holder_of(id));
    started.emplace_back("the waiting child", waiting_child(id));
    // The first spawn becomes the waiting child; the second is a fresh clone of the zygote.
    for (int i = 0; i < 2; ++i) {
        auto spawned =
            c.post("/v1/sessions/" + id + "/processes", {{"argv", {"/bin/sleep", "60"}}});
        ASSERT_EQ(spawned.status, 201u) << spawned.body;
        const auto pids = pids_in(*daemon_, id, "p" + std::to_string(i + 1));
        ASSERT_EQ(pids.size(), 1u) << spawned.body;
        started.emplace_back("spawned command " + std::to_string(i + 1), pids[0]);
    }
    for (const auto& [what, pid] : started) {
        ASSERT_GT(pid, 0) << what;
        const GroupAndSession seen = group_and_session(pid);
        EXPECT_EQ(seen.session, pid) << what << " leads a session of its own";
        EXPECT_EQ(seen.group, pid) << what << " leads a process group of its own";
        EXPECT_NE(seen.session, corrald.session) << what << " is outside corrald's session";
        EXPECT_NE(seen.group, corrald.group) << what << " is outside corrald's process group";
    }
    EXPECT_EQ(c.del("/v1/sessions/" + id).status, 200u);
}

TEST_F(DaemonProcessGroups, ACorraldWhoseShellEndsLivesOnBesideAStoppedWaitingChild) {
    daemon_.emplace(std::vector<std::string>{"--prepare", "default=1"},
                    StartedBy::shell_that_ends);
    ASSERT_TRUE(daemon_->ready()) << daemon_->log();
    client_.emplace(daemon_->client());
    HttpClient& c = *client_;
    ASSERT_TRUE(testing::wait_pool_ready(c, "default", 1)) << daemon_->log();
    const std::string id = claim(c);
    ASSERT_FALSE(id.empty());
    const pid_t waiting = waiting_child(id);
    ASSERT_NE(waiting, 0);
    ASSERT_EQ(::kill(waiting, SIGSTOP), 0);  // this test's daemon's child, by its pid
    ASSERT_TRUE(reaches_state(waiting, 'T'));

    daemon_->end_starting_shell();  // corrald's group is orphaned now
    std::this_thread::sleep_for(300ms);
    // A zombie (ours to reap, as its subreaper) is not running: the destructor reaps it.
    ASSERT_TRUE(running(daemon_->pid())) << "corrald was hung up\n" << daemon_->log();
    EXPECT_EQ(testing::process_state(waiting), 'T')
        << "the waiting child was not continued by a hang-up of corrald's group";
    ASSERT_EQ(::kill(waiting, SIGCONT), 0);

    // Still corrald's own: it answers, runs in the session and ends it.
    ASSERT_EQ(c.get("/v1/health").status, 200u) << daemon_->log();
    auto ran = c.post("/v1/sessions/" + id + "/run", {{"argv", {"/bin/echo", "fine"}}});
    ASSERT_EQ(ran.status, 200u) << ran.body;
    EXPECT_EQ(ran.json()["stdout"], "fine\n") << ran.body;
    EXPECT_EQ(c.del("/v1/sessions/" + id).status, 200u);
}

}  // namespace
}  // namespace corral
