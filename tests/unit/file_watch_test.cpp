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
    auto started = FileWatch::start(files, "/", options);
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
}  // namespace corral
