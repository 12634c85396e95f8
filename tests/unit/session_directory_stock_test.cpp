// Spare session directories made off corrald's loop (sessions/session_directory_stock.hpp): what a
// creation takes is exactly what it would have made itself, whatever the umask of the moment;
// a spare never replaces anything; and the stock leaves nothing of its own behind, from this run
// or from a crashed one, without following what it finds there.
#include "sessions/session_directory_stock.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "tests/support/temp_dir.hpp"

namespace corral {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

class SessionDirectoryStockTest : public ::testing::Test {
  protected:
    void SetUp() override {
        ASSERT_FALSE(temp_.path().empty());
        fs::create_directory(sessions());
    }
    fs::path sessions() const { return state_ / "sessions"; }
    fs::path spares() const { return state_ / "spare-sessions"; }
    static bool wait_ready(const SessionDirectoryStock& stock, size_t n) {
        for (int i = 0; i < 500 && stock.ready() < n; ++i) std::this_thread::sleep_for(10ms);
        return stock.ready() >= n;
    }
    static mode_t mode_of(const fs::path& path) {
        struct stat st {};
        if (::lstat(path.c_str(), &st) != 0) return 0;
        return st.st_mode & 07777;
    }

    test_support::TempDir temp_{"corral-stock"};
    const fs::path state_ = temp_.path();
};

TEST_F(SessionDirectoryStockTest, ATakenSpareIsTheSessionsDirectoryWithItsRootAndMarker) {
    SessionDirectoryStock stock(spares(), sessions(), 3, ".prepared");
    ASSERT_TRUE(wait_ready(stock, 3));
    ASSERT_TRUE(stock.take("s1"));
    EXPECT_EQ(mode_of(sessions() / "s1"), 0700u);
    EXPECT_EQ(mode_of(sessions() / "s1" / "root"), 0755u);
    EXPECT_EQ(mode_of(sessions() / "s1" / ".prepared"), 0600u);
    EXPECT_TRUE(fs::is_empty(sessions() / "s1" / "root"));
    size_t entries = 0;
    for ([[maybe_unused]] const auto& entry : fs::directory_iterator(sessions() / "s1")) ++entries;
    EXPECT_EQ(entries, 2u) << "the root and the marker, nothing else";
    // The stock makes up what was taken.
    EXPECT_TRUE(wait_ready(stock, 3));
}

// The API socket is bound under umask 0117 (unix_listener.cpp) on corrald's loop while the stock's
// thread makes its first spares: the umask is the process's, and the spares came out 0600/0640,
// so a sandbox running as its own uid could not enter its workspace (found by
// PreparedSessions.TwoClaimsShareNothingAndATokenReachesNoPreparedSession).
TEST_F(SessionDirectoryStockTest, SparesHaveTheirModesWhateverTheUmaskOfTheMoment) {
    const mode_t saved = ::umask(0177);
    SessionDirectoryStock stock(spares(), sessions(), 2, ".prepared");
    const bool ready = wait_ready(stock, 2);
    ::umask(saved);
    ASSERT_TRUE(ready);
    ASSERT_TRUE(stock.take("s1"));
    EXPECT_EQ(mode_of(sessions() / "s1"), 0700u);
    EXPECT_EQ(mode_of(sessions() / "s1" / "root"), 0755u);
    EXPECT_EQ(mode_of(sessions() / "s1" / ".prepared"), 0600u);
}

// A session id that exists already (a directory or a link someone placed) is never replaced:
// the take fails and the creation's own mkdir says EEXIST.
TEST_F(SessionDirectoryStockTest, ATakeNeverReplacesWhatIsThere) {
    SessionDirectoryStock stock(spares(), sessions(), 1, ".prepared");
    ASSERT_TRUE(wait_ready(stock, 1));
    fs::create_directory(sessions() / "taken");
    std::ofstream(sessions() / "taken" / "keep") << "x";
    fs::create_directory_symlink(state_ / "elsewhere", sessions() / "link");
    EXPECT_FALSE(stock.take("taken"));
    EXPECT_TRUE(fs::exists(sessions() / "taken" / "keep"));
    ASSERT_TRUE(wait_ready(stock, 1));
    EXPECT_FALSE(stock.take("link"));
    EXPECT_TRUE(fs::is_symlink(sessions() / "link"));
    EXPECT_FALSE(fs::exists(state_ / "elsewhere"));
}

// What a crash left in the spare directory goes when the next stock starts, and a link found
// there is removed, never followed (the class of CVE-2018-6954, systemd-tmpfiles following a
// link while cleaning up); a stock that ends leaves no directory of its own.
TEST_F(SessionDirectoryStockTest, LeftoversGoAtStartWithoutFollowingLinksAndNothingStaysAtTheEnd) {
    const fs::path outside = state_ / "outside";
    fs::create_directory(outside);
    std::ofstream(outside / "precious") << "x";
    fs::create_directories(spares() / "7" / "root");
    std::ofstream(spares() / "7" / ".prepared") << "";
    fs::create_directory_symlink(outside, spares() / "8");
    fs::create_directory_symlink(outside, spares() / "7" / "root" / "link");
    {
        SessionDirectoryStock stock(spares(), sessions(), 2, ".prepared");
        ASSERT_TRUE(wait_ready(stock, 2));
        EXPECT_FALSE(fs::exists(spares() / "7"));
        EXPECT_FALSE(fs::is_symlink(spares() / "8"));
        EXPECT_TRUE(fs::exists(outside / "precious"));
        EXPECT_TRUE(fs::is_empty(sessions())) << "spares live beside the sessions, not among them";
    }
    EXPECT_FALSE(fs::exists(spares()));
    EXPECT_TRUE(fs::exists(outside / "precious"));
}

// Without a spare directory to make (its parent is gone), there is no stock: every take says so
// and the creation makes its directory itself.
TEST_F(SessionDirectoryStockTest, WithoutItsDirectoryEveryTakeFallsBackToTheCreation) {
    SessionDirectoryStock stock(state_ / "missing" / "spare-sessions", sessions(), 2, ".prepared");
    std::this_thread::sleep_for(50ms);
    EXPECT_EQ(stock.ready(), 0u);
    EXPECT_FALSE(stock.take("s1"));
    EXPECT_FALSE(fs::exists(sessions() / "s1"));
}

}  // namespace
}  // namespace corral
