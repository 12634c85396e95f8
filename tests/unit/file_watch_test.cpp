// FileWatch against the real kernel's inotify (no privileges): a rename is one `move` event even
// when the watch reads its queue between the rename's two inotify events.

#include "sessions/files/file_watch.hpp"

#include <gtest/gtest.h>
#include <poll.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "sessions/files/file_service.hpp"
#include "tests/support/temp_dir.hpp"

namespace corral {
namespace {

namespace fs = std::filesystem;

// rename(2) queues IN_MOVED_FROM, then IN_MOVED_TO a moment later, and the reader that the first
// one woke may read the queue in between. On the emulated pure-v2 kernel that happened to every
// rename of SessionTools.Watch_SeesCreateModifyDeleteAndMove: each came out as a delete and a
// create. Here a second thread renames a file back and forth while the watch reads as soon as
// anything is queued, which opens that window natively too (the old code split some of these
// renames on a loaded two-core host; the exact count varies, the expectation does not).
TEST(FileWatch, RenamesThatRaceTheReaderAreMovesNeverADeleteAndACreate) {
    test_support::TempDir dir("corral-file-watch");
    ASSERT_FALSE(dir.path().empty());
    std::ofstream(dir.path() + "/a") << "x";
    auto opened = FileService::open(dir.path());
    ASSERT_TRUE(opened) << opened.error().describe();
    auto files = std::make_shared<FileService>(std::move(*opened));
    FileWatchOptions options;
    options.recursive = true;
    InotifyBudget budget(InotifyBudget::from_host());
    auto lease = budget.acquire("s1");
    ASSERT_TRUE(lease) << lease.error().describe();
    auto started = FileWatch::start(files, "/", options, std::move(*lease));
    ASSERT_TRUE(started) << started.error().describe();
    FileWatch& watch = **started;

    constexpr int kRenames = 100000;
    constexpr int kAhead = 4000;  // renames not yet read: 2 events each, far below the queue's
                                  // 16384 (fs.inotify.max_queued_events), so it never overflows
    std::atomic<bool> done{false};
    std::atomic<int> taken{0};
    std::thread renamer([&] {
        const std::string a = dir.path() + "/a", b = dir.path() + "/b";
        for (int i = 0; i < kRenames; ++i) {
            while (i - taken.load() > kAhead) std::this_thread::yield();
            const bool forth = i % 2 == 0;
            if (std::rename(forth ? a.c_str() : b.c_str(), forth ? b.c_str() : a.c_str()) != 0)
                break;
        }
        done = true;
    });
    int moves = 0, others = 0;
    std::string other;
    auto take = [&] {
        for (const auto& event : watch.read_events()) {
            if (event.type == WatchEvent::Type::move) {
                ++moves;
            } else if (others++ == 0) {
                other = std::string(watch_event_name(event.type)) + " " + event.path;
            }
        }
        taken = moves + others;  // a split rename counts twice: the renamer only waits less
    };
    while (!done) {
        pollfd p{watch.fd(), POLLIN, 0};
        if (::poll(&p, 1, 100) > 0) take();
    }
    renamer.join();
    take();  // whatever the last renames queued after the loop's final read
    EXPECT_EQ(others, 0) << "first: " << other;
    EXPECT_EQ(moves, kRenames);
}

}  // namespace
// The watch budget (stop 44's red-team finding: one session's restricted token opened a watch
// per connection until the host's root had no inotify instance left).
TEST(InotifyBudget, ASessionPastItsShareIsRefusedAndCorraldPastItsHalfToo) {
    InotifyBudget budget({.instances = 3,
                          .directories = 5,
                          .instances_per_session = 2,
                          .directories_per_session = 4});
    auto a1 = budget.acquire("a");
    auto a2 = budget.acquire("a");
    ASSERT_TRUE(a1 && a2);
    auto a3 = budget.acquire("a");
    ASSERT_FALSE(a3);
    EXPECT_EQ(a3.error().code, EUSERS);
    auto b1 = budget.acquire("b");
    ASSERT_TRUE(b1);
    auto b2 = budget.acquire("b");  // b is within its share, corrald is not
    ASSERT_FALSE(b2);
    EXPECT_EQ(b2.error().code, EMFILE);
    EXPECT_EQ(budget.instances_in_use(), 3u);

    // Directories: the session's share first, then corrald's.
    for (int i = 0; i < 4; ++i) ASSERT_TRUE((*a1)->add_directory());
    auto over_session = (*a2)->add_directory();
    ASSERT_FALSE(over_session);
    EXPECT_EQ(over_session.error().code, E2BIG);
    EXPECT_NE(over_session.error().describe().find("session"), std::string::npos);
    ASSERT_TRUE((*b1)->add_directory());
    auto over_daemon = (*b1)->add_directory();
    ASSERT_FALSE(over_daemon);
    EXPECT_NE(over_daemon.error().describe().find("max_user_watches"), std::string::npos);

    // What a lease held comes back when it goes.
    (*a1)->remove_directories(1);
    EXPECT_TRUE((*b1)->add_directory());
    a1->reset();
    EXPECT_EQ(budget.directories_in_use(), 2u);
    EXPECT_EQ(budget.instances_in_use(), 2u);
    EXPECT_TRUE(budget.acquire("b"));
}

TEST(InotifyBudget, TheHostsLimitsAreHalvedAndASessionsShareNeverExceedsCorralds) {
    const auto limits = InotifyBudget::from_host();
    EXPECT_GE(limits.instances, 1u);
    EXPECT_LE(limits.instances_per_session, limits.instances);
    EXPECT_LE(limits.directories_per_session, limits.directories);
    long host = 0;
    if (FILE* f = std::fopen("/proc/sys/fs/inotify/max_user_instances", "r")) {
        if (std::fscanf(f, "%ld", &host) != 1) host = 0;
        std::fclose(f);
    }
    if (host > 0) {
        EXPECT_EQ(limits.instances, static_cast<size_t>(host / 2));
    }
}

TEST(FileWatch, ARecursiveWatchPastItsLeaseFailsNamingTheShareAndGivesEverythingBack) {
    test_support::TempDir dir("corral-file-watch");
    ASSERT_FALSE(dir.path().empty());
    for (const char* sub : {"/a", "/a/b", "/c"}) std::filesystem::create_directory(dir.path() + sub);
    auto opened = FileService::open(dir.path());
    ASSERT_TRUE(opened) << opened.error().describe();
    auto files = std::make_shared<FileService>(std::move(*opened));
    InotifyBudget budget({.instances = 4,
                          .directories = 100,
                          .instances_per_session = 4,
                          .directories_per_session = 3});
    FileWatchOptions options;
    options.recursive = true;
    {
        auto lease = budget.acquire("s");
        ASSERT_TRUE(lease);
        auto started = FileWatch::start(files, "/", options, std::move(*lease));
        ASSERT_FALSE(started);  // four directories, a share of three
        EXPECT_EQ(started.error().code, E2BIG);
        EXPECT_NE(started.error().describe().find("session's file watches"), std::string::npos);
    }
    EXPECT_EQ(budget.instances_in_use(), 0u);
    EXPECT_EQ(budget.directories_in_use(), 0u);
    {
        auto lease = budget.acquire("s");
        ASSERT_TRUE(lease);
        auto started = FileWatch::start(files, "/a", options, std::move(*lease));
        ASSERT_TRUE(started) << started.error().describe();
        EXPECT_EQ(budget.directories_in_use(), 2u);
        // A directory made later is charged too; past the share the watch ends with the reason.
        std::filesystem::create_directory(dir.path() + "/a/d");
        std::filesystem::create_directory(dir.path() + "/a/e");
        pollfd p{(*started)->fd(), POLLIN, 0};
        ASSERT_EQ(::poll(&p, 1, 5000), 1);
        (void)(*started)->read_events();
        EXPECT_EQ(budget.directories_in_use(), 3u);
        ASSERT_TRUE((*started)->failure().has_value());
        EXPECT_EQ((*started)->failure()->code, E2BIG);
    }
    EXPECT_EQ(budget.directories_in_use(), 0u);
    EXPECT_EQ(budget.instances_in_use(), 0u);
}

}  // namespace corral
