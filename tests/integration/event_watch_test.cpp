// EventWatch on the real kernel: a kernfs file's change wakes the epoll descriptor, rearm()
// consumes it, and a plain readable descriptor wakes it too.
#include "isolation/event_watch.hpp"

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "base/file_io.hpp"
#include "isolation/cgroup.hpp"
#include "tests/integration/support/test_helpers.hpp"

namespace corral {
namespace {

bool readable(int fd, int timeout_ms) {
    pollfd pfd{fd, POLLIN, 0};
    return ::poll(&pfd, 1, timeout_ms) == 1;
}

TEST(EventWatch, KernfsChangeWakesAndRearmConsumesIt) {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (cgroups)";
    auto host = discover_cgroup_host();
    ASSERT_TRUE(host) << host.error().describe();
    auto cgroup = Cgroup::create(host->v2_own, test_support::unique_name());
    ASSERT_TRUE(cgroup) << cgroup.error().describe();

    EventWatch watch;
    EXPECT_EQ(watch.fd(), -1) << "nothing watched yet";
    auto watched = watch.watch_file(cgroup->dir_fd(), "cgroup.events", cgroup->path());
    ASSERT_TRUE(watched) << watched.error().describe();
    ASSERT_TRUE(*watched);
    auto missing = watch.watch_file(cgroup->dir_fd(), "no.such.events", cgroup->path());
    ASSERT_TRUE(missing);
    EXPECT_FALSE(*missing) << "a file this hierarchy lacks is skipped";
    EXPECT_FALSE(readable(watch.fd(), 0)) << "nothing changed since watching";

    // A process entering the cgroup flips "populated": a kernfs change.
    pid_t child = ::fork();
    if (child == 0) {
        if (!write_file(cgroup->dir_fd(), "cgroup.procs", "0")) ::_exit(1);
        ::pause();
        ::_exit(0);
    }
    EXPECT_TRUE(readable(watch.fd(), 10'000)) << "populated 1 must wake the watch";
    watch.rearm();
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
    ASSERT_TRUE(cgroup->wait_until_empty(std::chrono::seconds(10)));
    EXPECT_TRUE(readable(watch.fd(), 10'000)) << "populated 0 must wake it again";
    watch.rearm();
    EXPECT_FALSE(readable(watch.fd(), 0)) << "rearm consumed the change";

    int event = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    ASSERT_GE(event, 0);
    ASSERT_TRUE(watch.watch_readable(event));
    uint64_t one = 1;
    ASSERT_EQ(::write(event, &one, sizeof one), 8);
    EXPECT_TRUE(readable(watch.fd(), 1000)) << "a readable descriptor wakes the watch";
    ::close(event);
    EXPECT_TRUE(cgroup->remove());
}

}  // namespace
}  // namespace corral
