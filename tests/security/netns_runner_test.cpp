// corrald's one namespace thread (sessions/network/netns_runner.hpp) enters a session's network
// namespace for each job and returns to its own after it. Misused, a thread shared between
// namespaces makes a socket in the wrong one: a session's listener reachable from another
// session, or one of corrald's own sockets opened in a sandbox. Precedent: the thread-reuse class
// of "Linux namespaces and Go don't mix" (Weaveworks, 2017; containernetworking/plugins `ns.Do`),
// where work meant for one namespace ran on a thread left in another.

#include "sessions/network/netns_runner.hpp"

#include <fcntl.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "tests/integration/netns_fixture.hpp"

namespace corral {
namespace {

using namespace nettest;

/// The inode of the network namespace a socket belongs to (SIOCGSKNS), 0 when unknown.
ino_t namespace_of_socket(int socket_fd) {
    const UniqueFd netns(::ioctl(socket_fd, SIOCGSKNS));
    if (!netns) return 0;
    return inode_of(netns.get());
}

ino_t own_namespace() {
    const UniqueFd netns(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
    return netns ? inode_of(netns.get()) : 0;
}

class NetnsRunnerAbuse : public ::testing::Test {
  protected:
    void SetUp() override {
        if (::geteuid() != 0) GTEST_SKIP() << "needs root (network namespaces)";
        for (auto* slot : {&first_, &second_}) {
            auto ns = new_network_namespace();
            ASSERT_TRUE(ns) << ns.error().describe();
            slot->inode = inode_of(ns->get());
            auto runner = NetnsRunner::start(std::move(*ns));
            ASSERT_TRUE(runner) << runner.error().describe();
            slot->runner = std::move(*runner);
        }
    }
    void TearDown() override {
        for (auto* slot : {&first_, &second_})
            if (slot->runner) slot->runner->stop();
    }

    struct Slot {
        std::shared_ptr<NetnsRunner> runner;
        ino_t inode = 0;
    };
    Slot first_, second_;
};

TEST_F(NetnsRunnerAbuse, Control_ASocketIsMadeInItsRunnersNamespace) {
    auto socket = first_.runner->tcp_socket(AF_INET);
    ASSERT_TRUE(socket) << socket.error().describe();
    EXPECT_EQ(namespace_of_socket(socket->get()), first_.inode);
    EXPECT_NE(first_.inode, own_namespace());
}

// Two callers at once, each alternating between the two namespaces: every socket lands in the
// namespace of the runner that made it, never in the other's or in the test's own.
TEST_F(NetnsRunnerAbuse, InterleavedJobsOfTwoNamespacesNeverLandInTheOther) {
    std::atomic<int> wrong{0}, failed{0};
    auto caller = [&](int offset) {
        for (int i = 0; i < 100; ++i) {
            const Slot& slot = (i + offset) % 2 == 0 ? first_ : second_;
            auto listener = slot.runner->tcp_listener({AF_INET, "127.0.0.1", 0});
            if (!listener) {
                ++failed;
                continue;
            }
            if (namespace_of_socket(listener->get()) != slot.inode) ++wrong;
        }
    };
    std::thread one(caller, 0), other(caller, 1);
    one.join();
    other.join();
    EXPECT_EQ(failed.load(), 0);
    EXPECT_EQ(wrong.load(), 0);
}

// After its jobs the namespace thread is back in corrald's namespace: it keeps no session's
// namespace alive, and a job queued after stop() never runs (no socket in any namespace).
TEST_F(NetnsRunnerAbuse, AStoppedRunnersJobNeverRunsAndNoThreadStaysInside) {
    auto socket = first_.runner->tcp_socket(AF_INET);
    ASSERT_TRUE(socket) << socket.error().describe();
    EXPECT_FALSE(some_thread_in_namespace(first_.inode));

    first_.runner->stop();
    std::atomic<bool> ran{false};
    auto after = first_.runner->run([&ran] {
        ran = true;
        return make_tcp_socket(AF_INET);
    });
    ASSERT_FALSE(after);
    EXPECT_EQ(after.error().code, ESHUTDOWN);
    EXPECT_FALSE(ran.load());
    // The other runner still works: one stopped namespace does not stop the thread.
    auto still = second_.runner->tcp_socket(AF_INET);
    ASSERT_TRUE(still) << still.error().describe();
    EXPECT_EQ(namespace_of_socket(still->get()), second_.inode);
}

// A descriptor that is no network namespace: start() fails with setns's answer, and nothing ran
// in whatever namespace the thread was in.
TEST_F(NetnsRunnerAbuse, ARunnerOfSomethingElseThanANamespaceIsRefused) {
    UniqueFd not_a_namespace(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    ASSERT_TRUE(not_a_namespace);
    auto runner = NetnsRunner::start(std::move(not_a_namespace));
    ASSERT_FALSE(runner);
    EXPECT_EQ(runner.error().code, EINVAL) << runner.error().describe();
    // And the thread still serves the others in theirs.
    auto socket = second_.runner->tcp_socket(AF_INET);
    ASSERT_TRUE(socket) << socket.error().describe();
    EXPECT_EQ(namespace_of_socket(socket->get()), second_.inode);
}

// A job that stops its own runner would wait for itself (stop() waits for the running job), and
// the namespace thread with every session's network set-up behind it would hang without a word:
// corrald aborts with a message instead. "threadsafe" death tests re-run the test in a fresh
// process: a forked child would have no namespace thread to run the job at all.
TEST_F(NetnsRunnerAbuse, StopCalledByAJobAbortsInsteadOfHanging) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_DEATH(first_.runner->run([this] {
        first_.runner->stop();
        return Result<UniqueFd>(UniqueFd());
    }),
                 "NetnsRunner::stop\\(\\) called by a namespace job");
}

// A job that calls run() queues a job behind itself on the one namespace thread, whichever
// runner it calls, and waits for it forever: corrald aborts with a message instead.
TEST_F(NetnsRunnerAbuse, RunCalledByAJobAbortsInsteadOfHanging) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_DEATH(first_.runner->run([this] { return first_.runner->tcp_socket(AF_INET); }),
                 "NetnsRunner::run\\(\\) called by a namespace job");
    EXPECT_DEATH(first_.runner->run([this] { return second_.runner->tcp_socket(AF_INET); }),
                 "NetnsRunner::run\\(\\) called by a namespace job");
}

}  // namespace
}  // namespace corral
