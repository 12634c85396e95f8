// FileService against the real kernel: every path stays inside the session root, whatever `..`,
// absolute or relative symlinks, /proc magic links or a concurrent symlink swap try.
//
// Precedents guarded against: CVE-2018-15664 (docker cp: a directory swapped for a symlink between
// check and use), CVE-2019-14271 / CVE-2019-5736 (/proc/self magic links reaching the host).
#include "sessions/files/file_service.hpp"

#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <stdio.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace corral {
namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

void spit(const fs::path& path, const std::string& content) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << content;
}

/// Reads everything from an fd.
std::string read_fd(int fd) {
    std::string out;
    char buf[65536];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<std::size_t>(n));
    return out;
}

/// Reads a file through the service; the error's errno as a negative "content" marker.
Result<std::string> service_read(const FileService& files, std::string_view path) {
    auto handle = files.open_read(path);
    if (!handle) return std::move(handle.error());
    return read_fd(handle->fd.get());
}

/// A temp directory "corral-test-<pid>-<n>" holding `root/` (the session root) and `outside/`
/// (host files a session must never reach, with a `secret`). Removed, without following
/// symlinks, even when the test fails.
class FileServiceTest : public ::testing::Test {
  protected:
    void SetUp() override {
        static int counter = 0;
        base_ = fs::temp_directory_path() /
                ("corral-test-" + std::to_string(::getpid()) + "-" + std::to_string(++counter));
        fs::create_directories(base_ / "root");
        fs::create_directories(base_ / "outside");
        spit(base_ / "outside" / "secret", "OUTSIDE");
        auto service = FileService::open((base_ / "root").string());
        ASSERT_TRUE(service.ok()) << service.error().describe();
        files_.emplace(std::move(*service));
    }
    void TearDown() override {
        std::error_code ec;
        fs::remove_all(base_, ec);  // remove_all does not follow symlinks
    }

    fs::path root() const { return base_ / "root"; }
    fs::path outside() const { return base_ / "outside"; }
    const FileService& files() const { return *files_; }

    /// Writes `content` to `path` through the service (create parents) and commits.
    Status put(std::string_view path, const std::string& content) {
        auto tx = files().open_write(path, true);
        if (!tx) return std::move(tx.error());
        CORRAL_TRY(tx->write_all(content), "");
        return tx->commit();
    }

    fs::path base_;
    std::optional<FileService> files_;
};

TEST_F(FileServiceTest, DotDotTraversalIsRefusedNamingThePath) {
    for (std::string_view path : {"../../etc/passwd", "..", "a/../../outside/secret",
                                  "/../outside/secret", "./x/../../y"}) {
        auto read = files().open_read(path);
        ASSERT_FALSE(read.ok()) << path;
        EXPECT_EQ(read.error().code, EXDEV) << path;
        EXPECT_EQ(classify(read.error()), FileErrorKind::escapes_root);
        EXPECT_NE(
            read.error().message.find("path `" + std::string(path) + "` escapes the session root"),
            std::string::npos)
            << read.error().message;
    }
    EXPECT_EQ(files().open_write("../outside/new", true).error().code, EXDEV);
    EXPECT_EQ(files().remove("../outside/secret", false).error().code, EXDEV);
    EXPECT_EQ(files().mkdir("../outside/d", true).error().code, EXDEV);
    EXPECT_EQ(files().move("../outside/secret", "stolen").error().code, EXDEV);
    EXPECT_EQ(files().list("..").error().code, EXDEV);
    EXPECT_FALSE(fs::exists(outside() / "new"));
    EXPECT_FALSE(fs::exists(outside() / "d"));
    EXPECT_EQ(slurp(outside() / "secret"), "OUTSIDE");
    EXPECT_FALSE(fs::exists(root() / "stolen"));
}

TEST_F(FileServiceTest, DotDotThatStaysInsideIsFineAndLeadingSlashMeansTheRoot) {
    ASSERT_TRUE(put("a/b/file", "x").ok());
    EXPECT_EQ(*service_read(files(), "a/b/../b/./file"), "x");
    EXPECT_EQ(*service_read(files(), "/a//b/file"), "x");
}

TEST_F(FileServiceTest, AbsoluteSymlinkResolvesInsideTheRootNeverTheHost) {
    fs::create_symlink("/etc", root() / "etc_link");
    fs::create_symlink("/etc/passwd", root() / "pw");
    fs::create_symlink(outside() / "secret", root() / "abs_secret");
    for (std::string_view path : {"etc_link/passwd", "pw", "abs_secret"}) {
        auto read = service_read(files(), path);
        ASSERT_FALSE(read.ok()) << path << " read: " << *read;
        EXPECT_EQ(read.error().code, ENOENT) << path;
    }
    // With an /etc inside the root, the same links reach that one.
    ASSERT_TRUE(put("etc/passwd", "inside").ok());
    EXPECT_EQ(*service_read(files(), "etc_link/passwd"), "inside");
    EXPECT_EQ(*service_read(files(), "pw"), "inside");
    // Writing through an absolute link to an outside directory creates nothing outside.
    fs::create_symlink(outside(), root() / "out");
    auto tx = files().open_write("out/planted", false);
    EXPECT_FALSE(tx.ok());
    EXPECT_FALSE(fs::exists(outside() / "planted"));
}

TEST_F(FileServiceTest, RelativeSymlinkClimbingOutIsClampedToTheRoot) {
    fs::create_symlink("../../../../../../..", root() / "up");
    fs::create_symlink("../outside/secret", root() / "rel_secret");
    fs::create_symlink("../outside", root() / "rel_dir");
    auto via_up = service_read(files(), "up" + (outside() / "secret").string());
    ASSERT_FALSE(via_up.ok()) << *via_up;
    EXPECT_EQ(via_up.error().code, ENOENT);
    EXPECT_EQ(service_read(files(), "rel_secret").error().code, ENOENT);
    EXPECT_EQ(service_read(files(), "rel_dir/secret").error().code, ENOENT);
    EXPECT_EQ(files().list("rel_dir").error().code, ENOENT);
    // "up" is the root itself: listing it shows the root's own entries.
    auto listing = files().list("up");
    ASSERT_TRUE(listing.ok()) << listing.error().describe();
    EXPECT_EQ(listing->size(), 3u);
}

// A path through /proc/self/root would reach the daemon's "/" (CVE-2019-5736 style). Without a
// /proc inside the root the link resolves to nothing; with a real procfs mounted inside the root
// (a session's own /proc, seen from the host), RESOLVE_NO_MAGICLINKS refuses it with ELOOP.
TEST_F(FileServiceTest, ProcMagicLinksAreRefused) {
    fs::create_symlink("/proc/self/root/etc/passwd", root() / "magic");
    EXPECT_EQ(service_read(files(), "magic").error().code, ENOENT);

    if (::geteuid() != 0) GTEST_SKIP() << "mounting a procfs inside the root needs root";
    fs::create_directories(root() / "proc");
    pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        // A private mount namespace: the procfs mount dies with this child.
        if (::unshare(CLONE_NEWNS) != 0) ::_exit(90);
        if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) ::_exit(91);
        if (::mount("proc", (root() / "proc").c_str(), "proc", 0, nullptr) != 0) ::_exit(92);
        // Opened after the mount: an fd opened before unshare() points into the parent's mount
        // tree, where this procfs does not exist.
        auto service = FileService::open(root().string());
        if (!service) ::_exit(93);
        const FileService& files = *service;
        int step = 0;
        for (std::string_view path : {"proc/self/root/etc/passwd", "magic", "proc/self/cwd",
                                      "/proc/self/fd/0", "proc/thread-self/root/etc/hostname"}) {
            ++step;
            auto read = files.open_read(path);
            if (read.ok()) ::_exit(step);  // reached through a magic link
            if (read.error().code != ELOOP) ::_exit(10 + step);
        }
        // An ordinary procfs file is still readable: the mount really is there.
        if (!files.open_read("proc/self/status").ok()) ::_exit(30);
        ::_exit(0);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0)
        << "1-5: a magic link was followed; 11-15: wrong errno; 30: procfs not mounted; 90+: setup";
}

// CVE-2018-15664: a directory swapped for a symlink while the daemon resolves a path through it.
TEST_F(FileServiceTest, SwappingADirectoryForASymlinkNeverLeadsOutside) {
    ASSERT_TRUE(put("d/secret", "inside").ok());
    spit(outside() / "only_outside", "marker");
    fs::create_symlink(outside(), root() / "abs_link");
    fs::create_symlink("../outside", root() / "rel_link");
    std::atomic<bool> stop{false};
    std::thread swapper([&] {
        const std::string d = (root() / "d").string();
        const std::string links[] = {(root() / "abs_link").string(),
                                     (root() / "rel_link").string()};
        for (int i = 0; !stop.load(); ++i) {
            // Atomically exchange the names: `d` is a directory one moment, a symlink the next.
            ::renameat2(AT_FDCWD, d.c_str(), AT_FDCWD, links[i % 2].c_str(), RENAME_EXCHANGE);
        }
    });
    // Stops and joins the swapper however the test body exits (an ASSERT returns early).
    struct StopSwapper {
        std::atomic<bool>& stop;
        std::thread& thread;
        ~StopSwapper() {
            stop = true;
            if (thread.joinable()) thread.join();
        }
    } stop_swapper{stop, swapper};
    int inside_reads = 0, refused = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (std::chrono::steady_clock::now() < deadline) {
        for (std::string_view path : {"d/secret", "abs_link/secret", "rel_link/secret"}) {
            auto read = service_read(files(), path);
            if (read.ok()) {
                ASSERT_EQ(*read, "inside") << "read outside the root via " << path;
                ++inside_reads;
            } else {
                ++refused;
            }
        }
        auto tx = files().open_write("d/planted", false);
        if (tx.ok()) {
            (void)tx->write_all("x");
            (void)tx->commit();
        }
        auto listing = files().list("d");
        if (listing.ok()) {
            for (const auto& entry : *listing)
                ASSERT_NE(entry.name, "only_outside") << "listed outside the root";
        }
    }
    stop = true;
    swapper.join();
    EXPECT_GT(inside_reads, 0) << "the race never let a read through; the test proved nothing";
    EXPECT_GT(refused, 0);
    EXPECT_EQ(slurp(outside() / "secret"), "OUTSIDE");
    EXPECT_FALSE(fs::exists(outside() / "planted"));
    std::size_t outside_entries = 0;
    for (const auto& entry : fs::directory_iterator(outside())) {
        (void)entry;
        ++outside_entries;
    }
    EXPECT_EQ(outside_entries, 2u) << "something was created outside the root";
}

TEST_F(FileServiceTest, RecursiveDeleteRemovesLinksNotTheirTargets) {
    ASSERT_TRUE(put("tree/a/b/file", "f").ok());
    ASSERT_TRUE(put("tree/top", "t").ok());
    fs::create_symlink(outside(), root() / "tree" / "a" / "abs_out");
    fs::create_symlink("../../outside", root() / "tree" / "rel_out");
    fs::create_symlink(outside() / "secret", root() / "tree" / "a" / "b" / "file_link");

    auto not_recursive = files().remove("tree", false);
    ASSERT_FALSE(not_recursive.ok());
    EXPECT_EQ(classify(not_recursive.error()), FileErrorKind::not_empty);

    auto removed = files().remove("tree", true);
    ASSERT_TRUE(removed.ok()) << removed.error().describe();
    EXPECT_FALSE(fs::exists(fs::symlink_status(root() / "tree")));
    EXPECT_EQ(slurp(outside() / "secret"), "OUTSIDE");

    // Deleting a symlink to a directory deletes the link, even with recursive.
    fs::create_symlink(outside(), root() / "link_to_outside");
    ASSERT_TRUE(files().remove("link_to_outside", true).ok());
    EXPECT_FALSE(fs::exists(fs::symlink_status(root() / "link_to_outside")));
    EXPECT_TRUE(fs::exists(outside() / "secret"));

    auto root_itself = files().remove("/", true);
    ASSERT_FALSE(root_itself.ok());
    EXPECT_EQ(classify(root_itself.error()), FileErrorKind::invalid);
    EXPECT_TRUE(fs::exists(root()));
    EXPECT_EQ(files().remove("missing", false).error().code, ENOENT);
}

TEST_F(FileServiceTest, RoundTrips100MiBByteExact) {
    constexpr std::size_t kChunk = 1 << 20, kChunks = 100;
    auto chunk_of = [](std::size_t index) {
        std::string chunk(kChunk, '\0');
        uint64_t x = 0x9e3779b97f4a7c15ull * (index + 1);  // xorshift, fixed seed per chunk
        for (std::size_t i = 0; i < kChunk; i += 8) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            std::memcpy(&chunk[i], &x, 8);
        }
        return chunk;
    };
    auto tx = files().open_write("big/blob.bin", true);
    ASSERT_TRUE(tx.ok()) << tx.error().describe();
    for (std::size_t i = 0; i < kChunks; ++i) ASSERT_TRUE(tx->write_all(chunk_of(i)).ok());
    EXPECT_FALSE(fs::exists(root() / "big" / "blob.bin")) << "visible before commit";
    ASSERT_TRUE(tx->commit().ok());

    auto handle = files().open_read("big/blob.bin");
    ASSERT_TRUE(handle.ok()) << handle.error().describe();
    EXPECT_EQ(handle->size, kChunk * kChunks);
    std::string buf(kChunk, '\0');
    for (std::size_t i = 0; i < kChunks; ++i) {
        std::size_t got = 0;
        while (got < kChunk) {
            ssize_t n = ::read(handle->fd.get(), buf.data() + got, kChunk - got);
            ASSERT_GT(n, 0) << "short file at chunk " << i;
            got += static_cast<std::size_t>(n);
        }
        ASSERT_TRUE(buf == chunk_of(i)) << "chunk " << i << " differs";
    }
    char extra;
    EXPECT_EQ(::read(handle->fd.get(), &extra, 1), 0);
}

TEST_F(FileServiceTest, AnAbandonedUploadLeavesNothingBehind) {
    ASSERT_TRUE(put("keep.txt", "old").ok());
    {
        auto tx = files().open_write("keep.txt", false);
        ASSERT_TRUE(tx.ok());
        ASSERT_TRUE(tx->write_all("half of the new con").ok());
    }  // no commit: the client went away
    {
        auto tx = files().open_write("fresh.txt", false);
        ASSERT_TRUE(tx.ok());
        ASSERT_TRUE(tx->write_all("partial").ok());
    }
    EXPECT_EQ(slurp(root() / "keep.txt"), "old");
    EXPECT_FALSE(fs::exists(root() / "fresh.txt"));
    std::size_t entries = 0;
    for (const auto& entry : fs::directory_iterator(root())) {
        (void)entry;
        ++entries;
    }
    EXPECT_EQ(entries, 1u) << "a temp file was left behind";
}

TEST_F(FileServiceTest, ReplacingAFileKeepsItsModeAndNeverWritesThroughALink) {
    ASSERT_TRUE(put("run.sh", "#!/bin/sh\n").ok());
    ::chmod((root() / "run.sh").c_str(), 0750);
    ASSERT_TRUE(put("run.sh", "#!/bin/sh\necho hi\n").ok());
    EXPECT_EQ(files().stat("run.sh")->mode, 0750u);
    EXPECT_EQ(slurp(root() / "run.sh"), "#!/bin/sh\necho hi\n");

    ASSERT_TRUE(put("target", "t").ok());
    fs::create_symlink("target", root() / "alias");
    ASSERT_TRUE(put("alias", "new").ok());
    EXPECT_EQ(files().stat("alias")->type, FileType::file) << "the link itself is replaced";
    EXPECT_EQ(slurp(root() / "target"), "t");

    fs::create_directories(root() / "dir");
    EXPECT_EQ(classify(files().open_write("dir", false).error()), FileErrorKind::is_a_directory);
}

TEST_F(FileServiceTest, MovesAcrossDirectories) {
    ASSERT_TRUE(put("a/f", "payload").ok());
    ASSERT_TRUE(files().mkdir("b", false).ok());
    auto moved = files().move("a/f", "/b/g");
    ASSERT_TRUE(moved.ok()) << moved.error().describe();
    EXPECT_FALSE(fs::exists(root() / "a" / "f"));
    EXPECT_EQ(slurp(root() / "b" / "g"), "payload");

    ASSERT_TRUE(put("a/h", "other").ok());
    auto clash = files().move("a/h", "b/g");
    ASSERT_FALSE(clash.ok());
    EXPECT_EQ(classify(clash.error()), FileErrorKind::exists);
    ASSERT_TRUE(files().move("a/h", "b/g", true).ok());
    EXPECT_EQ(slurp(root() / "b" / "g"), "other");

    ASSERT_TRUE(files().move("b", "a/b2").ok());  // directories move too
    EXPECT_EQ(slurp(root() / "a" / "b2" / "g"), "other");
    EXPECT_EQ(files().move("a/b2/g", "../stolen").error().code, EXDEV);
    EXPECT_EQ(files().move("missing", "x").error().code, ENOENT);
    EXPECT_EQ(classify(files().move("/", "x").error()), FileErrorKind::invalid);
}

TEST_F(FileServiceTest, ListAndStatReportTypesSizesModesAndTimes) {
    ASSERT_TRUE(put("dir/file.txt", "12345").ok());
    ::chmod((root() / "dir" / "file.txt").c_str(), 0640);
    timespec times[2] = {{1700000000, 0}, {1700000123, 456789}};
    ASSERT_EQ(::utimensat(AT_FDCWD, (root() / "dir" / "file.txt").c_str(), times, 0), 0);
    fs::create_directories(root() / "dir" / "sub");
    fs::create_symlink("/etc/passwd", root() / "dir" / "link");
    ASSERT_EQ(::mkfifo((root() / "dir" / "fifo").c_str(), 0600), 0);

    auto listing = files().list("dir");
    ASSERT_TRUE(listing.ok()) << listing.error().describe();
    ASSERT_EQ(listing->size(), 4u);
    const auto& entries = *listing;
    EXPECT_EQ(entries[0].name, "fifo");
    EXPECT_EQ(entries[0].type, FileType::other);
    EXPECT_EQ(entries[1].name, "file.txt");
    EXPECT_EQ(entries[1].type, FileType::file);
    EXPECT_EQ(entries[1].size, 5u);
    EXPECT_EQ(entries[1].mode, 0640u);
    EXPECT_EQ(entries[1].mtime_ns, 1700000123ll * 1000000000 + 456789);
    EXPECT_EQ(entries[2].name, "link");
    EXPECT_EQ(entries[2].type, FileType::symlink);
    EXPECT_EQ(entries[2].link_target, "/etc/passwd");
    EXPECT_EQ(entries[3].name, "sub");
    EXPECT_EQ(entries[3].type, FileType::dir);

    auto link = files().stat("dir/link");
    ASSERT_TRUE(link.ok());
    EXPECT_EQ(link->type, FileType::symlink) << "stat must not follow the link";
    EXPECT_STREQ(type_name(link->type), "symlink");
    auto file = files().stat("/dir/file.txt");
    ASSERT_TRUE(file.ok());
    EXPECT_EQ(file->size, 5u);
    EXPECT_EQ(file->name, "file.txt");
    auto root_info = files().stat("/");
    ASSERT_TRUE(root_info.ok());
    EXPECT_EQ(root_info->type, FileType::dir);
    EXPECT_EQ(root_info->name, "/");
    EXPECT_EQ(classify(files().stat("dir/nope").error()), FileErrorKind::not_found);
    EXPECT_EQ(classify(files().list("dir/file.txt").error()), FileErrorKind::not_a_directory);

    // Reading a FIFO a session planted must fail at once, not block the daemon.
    EXPECT_EQ(files().open_read("dir/fifo").error().code, EINVAL);
    EXPECT_EQ(classify(files().open_read("dir").error()), FileErrorKind::is_a_directory);
}

TEST_F(FileServiceTest, MkdirPlainAndRecursive) {
    EXPECT_EQ(classify(files().mkdir("x/y", false).error()), FileErrorKind::not_found);
    ASSERT_TRUE(files().mkdir("x/y/z", true).ok());
    EXPECT_TRUE(fs::is_directory(root() / "x" / "y" / "z"));
    EXPECT_TRUE(files().mkdir("x/y/z", true).ok()) << "mkdir -p of an existing dir is fine";
    EXPECT_EQ(classify(files().mkdir("x/y", false).error()), FileErrorKind::exists);
    ASSERT_TRUE(put("x/file", "f").ok());
    EXPECT_EQ(classify(files().mkdir("x/file/sub", true).error()), FileErrorKind::not_a_directory);
    // mkdir -p through an absolute symlink creates inside the root.
    fs::create_symlink(outside(), root() / "out");
    (void)files().mkdir("out/made", true);
    EXPECT_FALSE(fs::exists(outside() / "made"));
}

TEST_F(FileServiceTest, EmptyAndNulPathsAreInvalid) {
    EXPECT_EQ(classify(files().open_read("").error()), FileErrorKind::invalid);
    std::string with_nul("a\0b", 3);
    auto read = files().open_read(with_nul);
    ASSERT_FALSE(read.ok());
    EXPECT_EQ(read.error().code, EINVAL);
    EXPECT_NE(read.error().message.find("`a\\x00b`"), std::string::npos) << read.error().message;
    EXPECT_EQ(classify(files().open_write(with_nul, true).error()), FileErrorKind::invalid);
    EXPECT_EQ(classify(files().remove("", true).error()), FileErrorKind::invalid);
}

TEST_F(FileServiceTest, CreatedEntriesBelongToTheSessionOwner) {
    if (::geteuid() != 0) GTEST_SKIP() << "chown needs root";
    auto owned = FileService::open(root().string(), {FileOwner{65534, 65534}});
    ASSERT_TRUE(owned.ok());
    auto tx = owned->open_write("o/file", true);
    ASSERT_TRUE(tx.ok());
    ASSERT_TRUE(tx->commit().ok());
    struct stat st;
    ASSERT_EQ(::stat((root() / "o" / "file").c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, 65534u);
    ASSERT_EQ(::stat((root() / "o").c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, 65534u);
}

/// The core checks once more as an unprivileged user (uid 65534), in a child when we are root.
/// Returns 0 or the number of the first failed check.
int unprivileged_checks(const fs::path& root_dir, const fs::path& outside_dir) {
    auto service = FileService::open(root_dir.string());
    if (!service) return 1;
    const FileService& files = *service;
    auto tx = files.open_write("u/data", true);
    if (!tx || !tx->write_all("user data").ok() || !tx->commit().ok()) return 2;
    auto read = service_read(files, "/u/data");
    if (!read || *read != "user data") return 3;
    if (files.open_read("../outside/secret").error().code != EXDEV) return 4;
    if (::symlink(outside_dir.c_str(), (root_dir / "out").c_str()) != 0) return 5;
    if (service_read(files, "out/secret").ok()) return 6;
    if (!files.remove("out", true).ok()) return 7;
    if (::access((outside_dir / "secret").c_str(), F_OK) != 0) return 8;
    if (!files.remove("u", true).ok()) return 9;
    return 0;
}

TEST_F(FileServiceTest, ConfinementHoldsForAnUnprivilegedUser) {
    if (::geteuid() != 0) {
        EXPECT_EQ(unprivileged_checks(root(), outside()), 0);
        return;
    }
    ASSERT_EQ(::chown(root().c_str(), 65534, 65534), 0);
    pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        if (::setgroups(0, nullptr) != 0 || ::setresgid(65534, 65534, 65534) != 0 ||
            ::setresuid(65534, 65534, 65534) != 0) {
            ::_exit(100);
        }
        ::_exit(unprivileged_checks(root(), outside()));
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "failed check number (see unprivileged_checks)";
}

}  // namespace
}  // namespace corral
