// open_path_beneath_without_links (base/openat2.hpp): what the holder covers beneath a fresh /proc
// or /sys, and where it attaches a tree, is what is at the path, never what a link there leads
// to. A hide that followed /proc/net (self/net) covered the holder's own /proc/<pid>/net/unix
// and nothing of any session process (helper 27's H1; the silent-mask class of CVE-2023-27561).

#include "base/openat2.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "base/unique_fd.hpp"
#include "tests/support/temp_dir.hpp"

namespace corral {
namespace {

namespace fs = std::filesystem;

class OpenBeneathWithoutLinks : public ::testing::Test {
  protected:
    void SetUp() override {
        ASSERT_FALSE(temp_.path().empty());
        fs::create_directories(dir_ / "a");
        std::ofstream(dir_ / "a" / "b") << "x";
        fs::create_directory_symlink("a", dir_ / "mid");
        fs::create_symlink("a/b", dir_ / "last");
        fs::create_directory_symlink("/proc/self/root", dir_ / "magic");
        root_ = UniqueFd(::open(dir_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
        ASSERT_TRUE(root_);
    }
    /// errno of a failed open, 0 where it opened; `link`: whether what it opened is a link.
    int open_errno(const char* relative, bool* link = nullptr) {
        UniqueFd fd(open_path_beneath_without_links(root_.get(), relative));
        if (!fd) return errno;
        struct stat st {};
        EXPECT_EQ(::fstat(fd.get(), &st), 0);
        if (link != nullptr) *link = S_ISLNK(st.st_mode);
        return 0;
    }

    test_support::TempDir temp_{"corral-openat2"};
    const fs::path dir_ = temp_.path();
    UniqueFd root_;
};

TEST_F(OpenBeneathWithoutLinks, OpensWhatIsThereAndNothingALinkLeadsTo) {
    bool link = true;
    EXPECT_EQ(open_errno("a/b", &link), 0);
    EXPECT_FALSE(link);
    EXPECT_EQ(open_errno("mid/b"), ELOOP) << "a link on the way is not followed";
    EXPECT_EQ(open_errno("magic/etc"), ELOOP) << "nor one to a magic link";
    EXPECT_EQ(open_errno("last", &link), 0) << "a last link is opened as itself";
    EXPECT_TRUE(link) << "the caller must be able to see it is a link";
    EXPECT_EQ(open_errno("a/missing"), ENOENT);
    EXPECT_EQ(open_errno("../etc"), EXDEV) << "never above the directory";
    EXPECT_EQ(open_errno("/etc"), EXDEV) << "an absolute path is above it too";
}

// Magic links of procfs itself: /proc/self/root leads out of any root.
TEST(OpenBeneathWithoutLinksInProc, DoesNotFollowProcsMagicLinks) {
    UniqueFd self(::open("/proc/self", O_PATH | O_DIRECTORY | O_CLOEXEC));
    ASSERT_TRUE(self);
    UniqueFd through(open_path_beneath_without_links(self.get(), "root/etc"));
    EXPECT_FALSE(through);
    EXPECT_EQ(errno, ELOOP);
    UniqueFd status(open_path_beneath_without_links(self.get(), "status"));
    EXPECT_TRUE(status) << "a plain entry opens";
}

}  // namespace
}  // namespace corral
