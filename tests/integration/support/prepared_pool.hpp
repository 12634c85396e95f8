#pragma once
// A real corrald with a pool of prepared sessions (`--prepare POLICY=N`, issue 18), for the suites
// that look at what a prepared session holds: its first process started ahead (the "waiting
// child" in the p1 leaf, isolation/launch_ahead.hpp) and what is left of it when it ends.

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/directory_listing.hpp"
#include "corrald_process.hpp"
#include "http_client.hpp"
#include "test_helpers.hpp"

namespace corral::testing {

/// The pids in a session's leaf (or holder) cgroup.
inline std::vector<pid_t> pids_in(const CorraldProcess& daemon, const std::string& id,
                                  const std::string& leaf) {
    std::ifstream procs(daemon.instance_cgroup() + "/sessions/" + id + "/" + leaf +
                        "/cgroup.procs");
    std::vector<pid_t> pids;
    for (pid_t pid; procs >> pid;) pids.push_back(pid);
    return pids;
}

/// Running, as opposed to gone or a zombie nobody reaped yet.
inline bool running(pid_t pid) {
    const char state = process_state(pid);
    return state != 0 && state != 'Z';
}

/// Gone altogether within `limit`: not even a zombie (a child nobody reaps would stay one for
/// corrald's life).
inline bool gone_within(pid_t pid, std::chrono::milliseconds limit) {
    const auto until = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < until) {
        if (test_support::proc_text(pid, "stat").empty()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
}

/// Whether `path` is gone within `limit` (a cgroup corrald removes once it is empty).
inline bool removed_within(const std::string& path, std::chrono::milliseconds limit) {
    const auto until = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < until) {
        if (!test_support::exists(path)) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return !test_support::exists(path);
}

/// Whether the pool of `policy` holds `n` ready sessions and prepares none (2 minutes at most).
inline bool wait_pool_ready(HttpClient& c, const std::string& policy, size_t n) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (std::chrono::steady_clock::now() < until) {
        auto health = c.get("/v1/health");
        if (health.status == 200) {
            const nlohmann::json pool = health.json()["prepared"][policy];
            if (pool["ready"] == n && pool["preparing"] == 0) return true;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
}

/// A test with a real corrald that keeps a pool of prepared sessions; the daemon and what it
/// left on the host go with the test, however it ends (CorraldProcess).
class PreparedPoolTest : public ::testing::Test {
  protected:
    void SetUp() override {
        std::string why;
        if (!corrald_can_run(why)) GTEST_SKIP() << why;
    }

    /// corrald with a pool of `pool` `default` sessions, once the pool is full.
    void start(size_t pool) { start_with({}, "default", pool); }

    /// corrald with `extra` arguments and a pool of `pool` sessions of `policy`, once it is full.
    void start_with(std::vector<std::string> extra, const std::string& policy, size_t pool) {
        extra.insert(extra.end(), {"--prepare", policy + "=" + std::to_string(pool)});
        daemon_.emplace(std::move(extra));
        ASSERT_TRUE(daemon_->ready()) << daemon_->log();
        client_.emplace(daemon_->client());
        ASSERT_TRUE(wait_pool_ready(*client_, policy, pool)) << daemon_->log();
    }

    /// Claims one prepared session of `policy`; its id ("" when the creation failed).
    std::string claim(HttpClient& c, const std::string& policy = "default") {
        auto made = c.post("/v1/sessions", {{"policy", policy}});
        EXPECT_EQ(made.status, 201u) << made.body;
        return made.status == 201 ? made.json()["id"].get<std::string>() : std::string();
    }

    /// The one child waiting in session `id`'s p1 leaf, once it has entered its session: its
    /// host pid; 0 when there is not exactly one, with a failure. Named `corrald-first` once it
    /// has (launch_ahead.cpp), which may come just after the pool says ready: until then it may
    /// still hold the session's descriptors and its full capability bounding set.
    pid_t waiting_child(const std::string& id) {
        const auto waiting = pids_in(*daemon_, id, "p1");
        EXPECT_EQ(waiting.size(), 1u) << "one child waits in p1\n" << daemon_->log();
        if (waiting.size() != 1) return 0;
        for (int i = 0; i < 500 && test_support::proc_text(waiting[0], "comm") != "corrald-first\n";
             ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        EXPECT_EQ(test_support::proc_text(waiting[0], "comm"), "corrald-first\n");
        return waiting[0];
    }

    /// The ids of the sessions that have a cgroup now (prepared ones included: they are not
    /// listed by the API).
    std::vector<std::string> session_cgroups() const {
        return subdirectory_names(daemon_->instance_cgroup() + "/sessions");
    }

    std::optional<CorraldProcess> daemon_;
    std::optional<HttpClient> client_;
};

}  // namespace corral::testing
