// The seccomp program cache (isolation/seccomp_cache.hpp) may make launches cheaper but must never
// change a filter: an entry that is not exactly the one asked for, from a file the caller alone
// wrote, is a miss. Each test plants what an attacker or an accident could leave in the cache
// directory and checks that the program returned is the freshly compiled one. Precedent: caches
// trusted by privileged code (CVE-2018-1000001-style "trusted cache file" bugs, and systemd's
// refusal of unit files in world-writable directories): a cache is data, never authority.

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "isolation/confinement.hpp"
#include "isolation/seccomp_cache.hpp"

namespace corral {
namespace {

namespace fs = std::filesystem;

SeccompSpec spec_of(std::string preset, std::vector<std::string> deny = {},
                    std::vector<std::string> allow = {}) {
    SeccompSpec spec;
    spec.preset = std::move(preset);
    spec.deny = std::move(deny);
    spec.allow = std::move(allow);
    return spec;
}

bool same(const std::vector<sock_filter>& a, const std::vector<sock_filter>& b) {
    return a.size() == b.size() &&
           (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(sock_filter)) == 0);
}

// The cache holds the marked program (isolation/seccomp_refusals.hpp).
std::vector<sock_filter> fresh(const SeccompSpec& spec) {
    auto program = compile_marked_seccomp(spec);
    EXPECT_TRUE(program.ok());
    return program.ok() ? *program : std::vector<sock_filter>{};
}

std::vector<sock_filter> cached(const SeccompSpec& spec, const std::string& dir) {
    auto program = compile_seccomp_cached(spec, dir);
    EXPECT_TRUE(program.ok());
    return program.ok() ? *program : std::vector<sock_filter>{};
}

std::string slurp(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void spit(const fs::path& path, const std::string& data) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
}

class SeccompCache : public ::testing::Test {
  protected:
    void SetUp() override {
        if (seccomp_cache_key(spec_of("default")).empty())
            GTEST_SKIP() << "this test binary has no GNU build id, so nothing is ever cached";
        char templ[] = "/tmp/corral-seccomp-cache-XXXXXX";
        ASSERT_NE(mkdtemp(templ), nullptr);
        dir_ = templ;  // mkdtemp makes it 0700
    }
    void TearDown() override {
        std::error_code ignored;
        if (!dir_.empty()) fs::remove_all(dir_, ignored);
    }
    /// The one entry file the cache wrote so far.
    fs::path only_entry() {
        std::vector<fs::path> entries;
        for (const auto& e : fs::directory_iterator(dir_)) entries.push_back(e.path());
        EXPECT_EQ(entries.size(), 1u);
        return entries.empty() ? fs::path() : entries.front();
    }
    std::string dir_;
};

TEST_F(SeccompCache, AHitReturnsExactlyWhatTheCompilerReturns) {
    std::vector<SeccompSpec> specs = {spec_of("default"), spec_of("strict"),
                                      spec_of("default", {"chmod"}, {"ptrace"}),
                                      spec_of("none", {"mount"})};
    specs[1].ptrace_own = true;
    specs[3].action = SeccompAction::kill_process;
    for (const auto& spec : specs) {
        const auto expected = fresh(spec);
        EXPECT_TRUE(same(cached(spec, dir_), expected)) << spec.preset << " (miss, stored)";
        EXPECT_TRUE(same(cached(spec, dir_), expected)) << spec.preset << " (hit)";
    }
    EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 4);
}

TEST_F(SeccompCache, RepeatedOrReorderedNamesShareOneBoundedEntry) {
    // A policy body may repeat a name as often as its size cap allows: the key stays canonical.
    std::vector<std::string> many(50000, "chmod");
    many.push_back("mount");
    const auto repeated = spec_of("default", many);
    const auto plain = spec_of("default", {"mount", "chmod"});
    EXPECT_TRUE(same(cached(repeated, dir_), fresh(plain)));
    EXPECT_TRUE(same(cached(plain, dir_), fresh(plain)));
    const fs::path entry = only_entry();
    EXPECT_LT(fs::file_size(entry), 64u << 10) << "the repeats went into the key";
}

TEST_F(SeccompCache, AnEntryForAnotherSpecUnderThisSpecsNameIsNotUsed) {
    // A hash collision (or a renamed file): the name matches, the full key inside does not.
    const auto weak = spec_of("none", {"mount"});
    const auto strong = spec_of("strict");
    cached(weak, dir_);
    const fs::path weak_entry = only_entry();
    cached(strong, dir_);
    fs::path strong_entry;
    for (const auto& e : fs::directory_iterator(dir_))
        if (e.path() != weak_entry) strong_entry = e.path();
    ASSERT_FALSE(strong_entry.empty());
    fs::copy_file(weak_entry, strong_entry, fs::copy_options::overwrite_existing);
    EXPECT_TRUE(same(cached(strong, dir_), fresh(strong)));
}

TEST_F(SeccompCache, ACorruptedOrTruncatedEntryIsACompileNotAFilter) {
    const auto spec = spec_of("default");
    const auto expected = fresh(spec);
    cached(spec, dir_);
    const fs::path entry = only_entry();
    const std::string good = slurp(entry);

    std::string flipped = good;
    flipped[good.size() / 2] ^= 0x01;  // one bit inside the program
    spit(entry, flipped);
    EXPECT_TRUE(same(cached(spec, dir_), expected)) << "bit flip";
    EXPECT_EQ(slurp(entry), good) << "the bad entry is rewritten";

    spit(entry, good.substr(0, good.size() - 20));
    EXPECT_TRUE(same(cached(spec, dir_), expected)) << "truncated";

    spit(entry, good + std::string(1 << 20, 'x'));
    EXPECT_TRUE(same(cached(spec, dir_), expected)) << "oversized";
}

TEST_F(SeccompCache, ASymlinkedEntryIsNotFollowed) {
    const auto spec = spec_of("default");
    cached(spec, dir_);
    const fs::path entry = only_entry();
    // A valid-looking entry elsewhere, reached through a link at the entry's name.
    const std::string elsewhere = dir_ + "-elsewhere";
    fs::create_directory(elsewhere);
    fs::copy_file(entry, elsewhere + "/entry");
    fs::remove(entry);
    fs::create_symlink(elsewhere + "/entry", entry);
    EXPECT_TRUE(same(cached(spec, dir_), fresh(spec)));
    EXPECT_FALSE(fs::is_symlink(entry)) << "read through the link instead of replacing it";
    fs::remove_all(elsewhere);
}

TEST_F(SeccompCache, ADirectoryOthersCanWriteIsNotUsedAtAll) {
    chmod(dir_.c_str(), 0777);
    const auto spec = spec_of("default");
    EXPECT_TRUE(same(cached(spec, dir_), fresh(spec)));
    EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 0)
        << "nothing is stored where others could replace it";
    // A symlink to a private directory is not a private directory either.
    chmod(dir_.c_str(), 0700);
    const std::string link = dir_ + "-link";
    fs::create_directory_symlink(dir_, link);
    EXPECT_TRUE(same(cached(spec, link), fresh(spec)));
    EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 0);
    fs::remove(link);
}

TEST_F(SeccompCache, TheCacheStaysBoundedAndTouchesOnlyItsOwnNames) {
    // Entries of 300 other builds or policies, and a file the cache did not write.
    for (int i = 0; i < 300; ++i) spit(fs::path(dir_) / ("seccomp-old" + std::to_string(i) + ".bpf"), "x");
    spit(fs::path(dir_) / "notes.txt", "keep me");
    const auto spec = spec_of("default");
    EXPECT_TRUE(same(cached(spec, dir_), fresh(spec)));
    size_t entries = 0;
    for (const auto& e : fs::directory_iterator(dir_))
        if (e.path().filename().string().starts_with("seccomp-")) ++entries;
    EXPECT_EQ(entries, 1u);
    EXPECT_TRUE(fs::exists(fs::path(dir_) / "notes.txt"));
    EXPECT_TRUE(same(cached(spec, dir_), fresh(spec))) << "the fresh entry survived the pruning";
}

TEST_F(SeccompCache, AnEntryOwnedBySomeoneElseIsIgnored) {
    if (geteuid() != 0) GTEST_SKIP() << "needs root to give a file to another uid";
    const auto strong = spec_of("strict");
    cached(strong, dir_);
    const fs::path entry = only_entry();
    // Give the caller's real entry to another uid: were it read, nothing would rewrite it.
    ASSERT_EQ(chown(entry.c_str(), 65534, 65534), 0);
    struct stat before{};
    stat(entry.c_str(), &before);
    EXPECT_TRUE(same(cached(strong, dir_), fresh(strong)));
    struct stat after{};
    stat(entry.c_str(), &after);
    EXPECT_EQ(after.st_uid, 0u) << "the foreign entry was replaced by one of the caller's own";
}

}  // namespace
}  // namespace corral
