// Deleting a discarded directory tree (base/tree_removal.hpp): whatever a session planted in its
// workspace — links to directories outside, nests deeper than the descriptors held open — goes,
// and nothing outside the tree does; a stop request leaves the rest for later.
#include "base/tree_removal.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "base/unique_fd.hpp"
#include "tests/support/temp_dir.hpp"

namespace corral {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

class TreeRemoval : public ::testing::Test {
  protected:
    void SetUp() override { ASSERT_FALSE(dir_.empty()); }
    static void touch(const fs::path& path) { std::ofstream(path) << "x"; }

    /// A tree with files, a nest 150 deep (beyond the 64 directories held open), and links to
    /// `outside` at the top and at the bottom.
    fs::path make_tree(const std::string& name, const fs::path& outside) {
        const fs::path top = fs::path(dir_) / name;
        fs::path deep = top;
        for (int level = 0; level < 150; ++level) deep /= "d";
        fs::create_directories(deep);
        for (int i = 0; i < 300; ++i) touch(top / ("f" + std::to_string(i)));
        touch(deep / "bottom");
        fs::create_directories(top / "a" / "b");
        touch(top / "a" / "b" / "c");
        fs::create_directory_symlink(outside, top / "link");
        fs::create_directory_symlink(outside, deep / "link");
        fs::create_symlink(outside / "keep", top / "file-link");
        return top;
    }

    test_support::TempDir temp_{"corral-tree-removal"};
    const std::string dir_ = temp_.path();
};

TEST_F(TreeRemoval, RemovesEverythingBeneathWithoutFollowingLinks) {
    const fs::path outside = fs::path(dir_) / "outside";
    fs::create_directories(outside);
    touch(outside / "keep");
    const fs::path top = make_tree("tree", outside);
    UniqueFd parent(::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    auto removed = remove_tree_at(parent.get(), "tree");
    ASSERT_TRUE(removed) << removed.error().describe();
    EXPECT_FALSE(fs::exists(fs::symlink_status(top)));
    EXPECT_TRUE(fs::exists(outside / "keep"));
}

TEST_F(TreeRemoval, ALinkAtTheTopIsRemovedNotFollowed) {
    const fs::path outside = fs::path(dir_) / "outside";
    fs::create_directories(outside);
    touch(outside / "keep");
    fs::create_directory_symlink(outside, fs::path(dir_) / "link");
    UniqueFd parent(::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    ASSERT_TRUE(remove_tree_at(parent.get(), "link"));
    EXPECT_FALSE(fs::exists(fs::symlink_status(fs::path(dir_) / "link")));
    EXPECT_TRUE(fs::exists(outside / "keep"));
}

TEST_F(TreeRemoval, AStopLeavesTheRestAndALaterCallFinishes) {
    const fs::path outside = fs::path(dir_) / "outside";
    fs::create_directories(outside);
    const fs::path top = make_tree("tree", outside);
    UniqueFd parent(::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    size_t budget = 10;
    auto stopped = remove_tree_at(parent.get(), "tree", [&budget] { return budget-- > 0; });
    ASSERT_FALSE(stopped);
    EXPECT_EQ(stopped.error().code, ECANCELED);
    EXPECT_TRUE(fs::exists(top));
    ASSERT_TRUE(remove_tree_at(parent.get(), "tree"));
    EXPECT_FALSE(fs::exists(top));
}

// A bind mount of the same file system has the same st_dev as the tree: only openat2's
// RESOLVE_NO_XDEV tells it apart. What is mounted is never entered; the removal stops there.
TEST_F(TreeRemoval, ABindMountBeneathIsNeverEntered) {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (a bind mount)";
    const fs::path outside = fs::path(dir_) / "outside";
    fs::create_directories(outside);
    touch(outside / "keep");
    const fs::path tree = fs::path(dir_) / "tree";
    fs::create_directories(tree / "inner");
    touch(tree / "file");
    ASSERT_EQ(::mount(outside.c_str(), (tree / "inner").c_str(), nullptr, MS_BIND, nullptr), 0)
        << std::strerror(errno);
    struct Unmount {
        std::string point;
        ~Unmount() { ::umount2(point.c_str(), MNT_DETACH); }
    } unmount{(tree / "inner").string()};
    UniqueFd parent(::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    auto removed = remove_tree_at(parent.get(), "tree");
    ASSERT_FALSE(removed);
    EXPECT_EQ(removed.error().code, EXDEV) << removed.error().describe();
    EXPECT_TRUE(fs::exists(outside / "keep"));
    EXPECT_TRUE(fs::exists(tree / "inner" / "keep"));
}

TEST_F(TreeRemoval, ASmallTreeGoesAtOnceALargeOneIsDiscardedUnderTheMark) {
    const fs::path small = fs::path(dir_) / "small";
    fs::create_directories(small / "root");
    touch(small / "root" / "f");
    auto small_result = remove_or_discard(small.string(), 256);
    ASSERT_TRUE(small_result) << small_result.error().describe();
    EXPECT_FALSE(*small_result);
    EXPECT_FALSE(fs::exists(small));

    const fs::path large = fs::path(dir_) / "large";
    fs::create_directories(large / "root");
    for (int i = 0; i < 1000; ++i) touch(large / "root" / std::to_string(i));
    auto discarded = remove_or_discard(large.string(), 256);
    ASSERT_TRUE(discarded) << discarded.error().describe();
    ASSERT_TRUE(*discarded);
    EXPECT_FALSE(fs::exists(large)) << "the old name is not free";
    const fs::path moved(**discarded);
    EXPECT_EQ(moved.parent_path(), fs::path(dir_));
    EXPECT_TRUE(is_discarded_name(moved.filename().string())) << moved;
    EXPECT_TRUE(fs::exists(moved / "root"));
    // The same name again is discarded beside the first, never onto it.
    fs::create_directories(large / "root");
    touch(large / "root" / "again");
    auto again = discard_directory(large.string());
    ASSERT_TRUE(again) << again.error().describe();
    EXPECT_NE(*again, **discarded);
    EXPECT_TRUE(fs::exists(fs::path(*again) / "root" / "again"));
}

TEST_F(TreeRemoval, NamesWithoutTheMarkAreNotDiscarded) {
    EXPECT_TRUE(is_discarded_name(".corral-discarded-s1-42-1"));
    EXPECT_FALSE(is_discarded_name(".corral-discarded-"));
    EXPECT_FALSE(is_discarded_name("s1"));
    EXPECT_FALSE(is_discarded_name(".corral-discardedx"));
    EXPECT_FALSE(is_discarded_name("x.corral-discarded-s1"));
}

TEST_F(TreeRemoval, TheRemoverDeletesWhatItIsGivenOnItsThread) {
    const fs::path outside = fs::path(dir_) / "outside";
    fs::create_directories(outside);
    touch(outside / "keep");
    const fs::path first = make_tree("first", outside);
    const fs::path second = make_tree("second", outside);
    {
        TreeRemover remover(30s);
        remover.remove(first.string());
        remover.remove(second.string());
        const auto deadline = std::chrono::steady_clock::now() + 60s;
        while (remover.pending() != 0 && std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(5ms);
        EXPECT_EQ(remover.pending(), 0u);
    }
    EXPECT_FALSE(fs::exists(first));
    EXPECT_FALSE(fs::exists(second));
    EXPECT_TRUE(fs::exists(outside / "keep"));
}

}  // namespace
}  // namespace corral
