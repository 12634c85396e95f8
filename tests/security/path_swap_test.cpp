// `corral run` is root and works on paths the job can change: its job directory (bound, or
// copied and its outputs copied back after the job), the links the job leaves in its outputs,
// and the --report destination. Each is resolved once, to a descriptor, and never by path again;
// a job that swaps a component for a symlink between corral's look and corral's use (the
// symlink-exchange race of CVE-2018-15664, `docker cp`; the mount-target swap of
// CVE-2021-30465, runc) must not redirect a root write anywhere else. Red-team findings of
// issue 10's second round.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/unique_fd.hpp"
#include "isolation/mount_plan.hpp"
#include "isolation/mounts.hpp"
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

class PathSwap : public SandboxTest {
  protected:
    void SetUp() override {
        SandboxTest::SetUp();
        if (IsSkipped()) return;
        fs::create_directories(dir() / "checkout");
        char tmpl[] = "/tmp/corral-victim-XXXXXX";
        ASSERT_NE(::mkdtemp(tmpl), nullptr);
        victim_ = tmpl;
        std::ofstream(victim_ / "secret") << "host secret\n";
    }
    void TearDown() override {
        std::error_code ignored;
        if (!victim_.empty()) fs::remove_all(victim_, ignored);
        SandboxTest::TearDown();
    }
    /// A copy-mode policy on `base` whose outputs are `outputs`. `none` keeps the host's view
    /// and root's capabilities, so the job can reach and rearrange the real checkout: the
    /// strongest job there is, and corral's own copy-back must still not be redirected.
    void copy_policy(const std::string& base, const std::string& outputs) {
        std::ofstream(dir() / "copy.yaml")
            << "extends: " << base << "\nnamespaces: { mount: true, pid: true }\n"
            << "workdir: { from: copy, size: 16Mi, outputs: " << outputs << " }\n";
    }
    RunOutcome job(const std::string& script) {
        return corral({"run", "--policy", (dir() / "copy.yaml").string(), "--cwd", "checkout",
                       "--report", "report.json", "--", "sh", "-c", script});
    }
    nlohmann::json report() { return nlohmann::json::parse(contents(dir() / "report.json")); }
    fs::path victim_;
};

TEST_F(PathSwap, JobDirectorySwappedForALinkDuringTheRunGetsTheOutputsNotTheLinkTarget) {
    // CVE-2018-15664's shape: while the job runs, its directory's path is made a symlink to a
    // host directory; copy-back, as root, used to open the job directory by that path again.
    copy_policy("none", "[results]");
    const std::string checkout = (dir() / "checkout").string();
    auto r = job("mv " + checkout + " " + checkout + ".real && ln -s " + victim_.string() + " " +
                 checkout + " && mkdir results && echo swapped > results/secret && echo done");
    ASSERT_EQ(r.out, "done\n") << "the job could not swap its directory: " << r.err;
    ASSERT_TRUE(fs::is_symlink(dir() / "checkout"));
    EXPECT_FALSE(fs::exists(victim_ / "results")) << "copy-back followed the swapped path";
    EXPECT_EQ(contents(victim_ / "secret"), "host secret\n");
    EXPECT_EQ(contents(dir() / "checkout.real" / "results" / "secret"), "swapped\n")
        << "the outputs did not reach the directory the job ran for";
}

TEST_F(PathSwap, OutputLinkThatLeavesThroughAnotherLinkIsNotCopiedBack) {
    // `results/esc -> ../via/secret` reads as if it stayed inside the job directory, but `via`
    // is a link to a host directory: followed later (an artifact upload, the next job), it is
    // the host's file. The check resolves the chain (openat2 RESOLVE_BENEATH), not the text.
    copy_policy("default", "[results]");
    auto r = job("ln -s " + victim_.string() +
                 " via && mkdir results && ln -s ../via/secret results/esc && "
                 "ln -s ../kept results/fine && echo kept > kept && echo built");
    ASSERT_EQ(r.out, "built\n") << r.err;
    const fs::path results = dir() / "checkout" / "results";
    EXPECT_FALSE(fs::exists(fs::symlink_status(results / "esc")))
        << "a link whose chain leaves the job directory came back";
    EXPECT_TRUE(fs::is_symlink(results / "fine")) << "a link that stays inside is kept";
    auto skipped = report()["outputs"]["skipped"].dump();
    EXPECT_NE(skipped.find("results/esc"), std::string::npos) << skipped;
}

TEST_F(PathSwap, OutputLinkThroughALinkPlantedInTheCheckoutIsNotCopiedBack) {
    // The same chain, with the escaping hop already in the checkout (a link an earlier job
    // left there): the link is resolved where it lands too.
    ASSERT_EQ(::symlink(victim_.c_str(), (dir() / "checkout" / "via").c_str()), 0);
    copy_policy("default", "[results]");
    auto r = job("rm via && mkdir via results && ln -s ../via/secret results/esc && echo built");
    ASSERT_EQ(r.out, "built\n") << r.err;
    EXPECT_FALSE(fs::exists(fs::symlink_status(dir() / "checkout" / "results" / "esc")))
        << "a link leaving through the checkout's own link came back";
}

TEST_F(PathSwap, ReportThroughALinkPlantedInAParentDirectoryIsRefused) {
    // Issue 10 item 5 made the report's last component O_NOFOLLOW; a link in a parent directory
    // (`out -> /victim`, planted by an earlier job in the checkout it could write) still
    // redirected `--report out/report.json` to a file root created in the victim directory.
    ASSERT_EQ(::symlink(victim_.c_str(), (dir() / "out").c_str()), 0);
    auto r = corral({"run", "--policy", "default", "--report", "out/report.json", "--", "true"});
    EXPECT_NE(r.exit_code, 0) << "the report path through a link was accepted";
    EXPECT_NE(r.err.find("`out` is a symbolic link"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(victim_ / "report.json")) << "the report went through the link";
    // An absolute path through the same link is refused the same way.
    auto absolute = corral({"run", "--policy", "default", "--report",
                            (dir() / "out" / "report.json").string(), "--", "true"});
    EXPECT_NE(absolute.exit_code, 0);
    EXPECT_FALSE(fs::exists(victim_ / "report.json"));
    // A real directory on the way is fine.
    fs::create_directories(dir() / "reports");
    auto fine =
        corral({"run", "--policy", "default", "--report", "reports/report.json", "--", "true"});
    EXPECT_EQ(fine.exit_code, 0) << fine.err;
    EXPECT_TRUE(fs::is_regular_file(dir() / "reports" / "report.json"));
}

TEST_F(PathSwap, BoundJobDirectoryIsClonedFromItsDescriptorNotItsPath) {
    // `workdir.from: cwd` binds the job directory. Between `corral run` resolving it and the
    // sandbox cloning it, its path is swapped for a link to a host directory (a concurrent job
    // in a parent it can write; CVE-2021-30465's mount-target race in runc): the clone must be
    // the directory that was resolved, never what the path names by then.
    const fs::path job = dir() / "checkout";
    UniqueFd resolved(::open(job.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    ASSERT_TRUE(resolved.valid());
    struct stat original {};
    ASSERT_EQ(::fstat(resolved.get(), &original), 0);
    fs::rename(job, dir() / "checkout.real");
    ASSERT_EQ(::symlink(victim_.c_str(), job.c_str()), 0);

    WorkdirBinding binding{job.string(), job.string()};
    binding.host_fd = resolved.get();
    Policy policy;
    policy.namespaces.mount = true;
    auto plan = compile_mount_plan(policy, binding);
    ASSERT_TRUE(plan) << plan.error().describe();
    auto prepared = prepare_mounts(*plan);
    ASSERT_TRUE(prepared) << prepared.error().describe();
    ASSERT_GE(prepared->workdir_tree, 0) << "no detached clone (no CAP_SYS_ADMIN?)";
    struct stat cloned {};
    ASSERT_EQ(::fstat(prepared->workdir_tree, &cloned), 0);
    struct stat victim {};
    ASSERT_EQ(::stat(victim_.c_str(), &victim), 0);
    EXPECT_EQ(cloned.st_ino, original.st_ino) << "the clone is not the resolved job directory";
    EXPECT_NE(cloned.st_ino, victim.st_ino) << "the clone followed the swapped-in link";
}

}  // namespace
}  // namespace corral::security
