// `corral run --report FILE` writes as root where the command may have been writing: the report
// must never go through a symlink, FIFO or device that the command (or anyone) put at FILE.
// Issue 10, item 5: `corral run --report report.json -- ln -sf /etc/VICTIM report.json`
// truncated the victim as root (the CWE-59 "link following" class, as in CVE-2015-1318's crash
// reports written through a planted symlink).

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "support/sandbox_harness.hpp"

namespace corral::security {
namespace {

namespace fs = std::filesystem;

std::string contents(const fs::path& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

class ReportFile : public SandboxTest, public ::testing::WithParamInterface<const char*> {
  protected:
    void SetUp() override {
        SandboxTest::SetUp();
        if (IsSkipped()) return;
        char tmpl[] = "/tmp/corral-victim-XXXXXX";
        ASSERT_NE(::mkdtemp(tmpl), nullptr);
        victim_dir_ = tmpl;
        victim_ = victim_dir_ / "victim";
        std::ofstream(victim_) << "precious\n";
    }
    void TearDown() override {
        std::error_code ignored;
        if (!victim_dir_.empty()) fs::remove_all(victim_dir_, ignored);
        SandboxTest::TearDown();
    }
    fs::path victim_dir_;
    fs::path victim_;
};

TEST_P(ReportFile, SymlinkPlantedByTheCommandIsNotFollowed) {
    auto r = corral({"run", "--policy", GetParam(), "--report", "report.json", "--", "ln", "-sf",
                     victim_.string(), "report.json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    ASSERT_TRUE(fs::is_symlink(dir() / "report.json")) << "the command did not plant its link";
    EXPECT_EQ(contents(victim_), "precious\n") << "the report was written through the link";
    EXPECT_NE(r.err.find("was replaced while the command ran"), std::string::npos) << r.err;
}

TEST_P(ReportFile, FifoPlantedByTheCommandIsNotWrittenThrough) {
    // Written through the path, the report would block corral for ever on a FIFO nobody reads.
    auto r = corral({"run", "--policy", GetParam(), "--report", "report.json", "--", "sh", "-c",
                     "rm -f report.json && mkfifo report.json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    struct stat st {};
    ASSERT_EQ(::lstat((dir() / "report.json").c_str(), &st), 0);
    EXPECT_TRUE(S_ISFIFO(st.st_mode)) << "the command did not plant its FIFO";
}

TEST_P(ReportFile, LinkPlantedInAParentDirectoryIsNotFollowed) {
    // Item 5 made the last component O_NOFOLLOW; a link in a parent directory (`out -> victim`,
    // left by an earlier job in the checkout it could write) still redirected
    // `--report out/report.json` to a file root created in the victim directory (issue 10,
    // second round). No component of the report's path is followed if it is a link.
    fs::create_symlink(victim_dir_, dir() / "out");
    auto r = corral({"run", "--policy", GetParam(), "--report", "out/report.json", "--", "true"});
    EXPECT_EQ(r.exit_code, 125) << r.err;
    EXPECT_NE(r.err.find("`out` is a symbolic link"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(victim_dir_ / "report.json")) << "the report went through the link";
    auto absolute = corral({"run", "--policy", GetParam(), "--report",
                            (dir() / "out" / "report.json").string(), "--", "true"});
    EXPECT_EQ(absolute.exit_code, 125) << absolute.err;
    EXPECT_FALSE(fs::exists(victim_dir_ / "report.json"));
    fs::create_directories(dir() / "reports");  // a real directory on the way is fine
    auto fine =
        corral({"run", "--policy", GetParam(), "--report", "reports/report.json", "--", "true"});
    EXPECT_EQ(fine.exit_code, 0) << fine.err;
    EXPECT_TRUE(fs::is_regular_file(dir() / "reports" / "report.json"));
}

INSTANTIATE_TEST_SUITE_P(Presets, ReportFile, ::testing::Values("default", "none"));

TEST_F(SandboxTest, ReportFile_ExistingSymlinkIsRefusedBeforeTheCommandRuns) {
    char tmpl[] = "/tmp/corral-victim-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    const fs::path victim = fs::path(tmpl) / "victim";
    std::ofstream(victim) << "precious\n";
    fs::create_symlink(victim, dir() / "report.json");
    auto r = corral({"run", "--report", "report.json", "--", "touch", "ran"});
    EXPECT_EQ(r.exit_code, 125) << r.err;
    EXPECT_NE(r.err.find("report.json` is a symbolic link"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(dir() / "ran")) << "the command ran although its report cannot be";
    EXPECT_EQ(contents(victim), "precious\n");
    fs::remove_all(tmpl);
}

TEST_F(SandboxTest, ReportFile_FifoAndDeviceAreRefusedWithoutBeingOpened) {
    ASSERT_EQ(::mkfifo((dir() / "report.fifo").c_str(), 0644), 0);
    // Opened for writing, a FIFO without a reader would block corral here; it must not be.
    auto fifo = corral({"run", "--report", "report.fifo", "--", "true"});
    EXPECT_EQ(fifo.exit_code, 125) << fifo.err;
    EXPECT_NE(fifo.err.find("is a FIFO"), std::string::npos) << fifo.err;

    auto device = corral({"run", "--report", "/dev/full", "--", "true"});
    EXPECT_EQ(device.exit_code, 125) << device.err;
    EXPECT_NE(device.err.find("is a device"), std::string::npos) << device.err;

    fs::create_directory(dir() / "report.d");
    auto directory = corral({"run", "--report", "report.d", "--", "true"});
    EXPECT_EQ(directory.exit_code, 125) << directory.err;
    EXPECT_NE(directory.err.find("is a directory"), std::string::npos) << directory.err;
}

TEST_F(SandboxTest, ReportFile_RegularFileIsReplacedWithTheReport) {
    std::ofstream(dir() / "report.json") << std::string(10000, 'x');
    auto r = corral({"run", "--report", "report.json", "--", "true"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    auto report = nlohmann::json::parse(contents(dir() / "report.json"));  // no leftover x
    EXPECT_EQ(report["status"], "exited");
    EXPECT_EQ(r.err.find("was replaced"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace corral::security
