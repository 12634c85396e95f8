// `workdir.from: copy` copies the job's declared outputs back into the caller's checkout, as
// root, after the job has ended. What the job left in its tmpfs is the attacker's: the copy must
// not follow anything out of it, bring back setuid programs, block on a FIFO or write through a
// link the job planted in the checkout. Precedents: CVE-2019-14271 (`docker cp` trusting the
// container's files), CVE-2018-15664 (symlink-exchange during `docker cp`), and the setuid plant
// of issue 10, item 4.

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

class WorkdirOutputs : public SandboxTest {
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
    /// Runs `script` under a copy-mode policy whose outputs are `outputs`. `base` `none` keeps
    /// capabilities (the job can make setuid files and device nodes, and reach the checkout).
    RunOutcome job(const std::string& base, const std::string& outputs, const std::string& script) {
        std::ofstream(dir() / "copy.yaml")
            << "extends: " << base << "\nnamespaces: { mount: true, pid: true }\n"
            << "workdir: { from: copy, size: 16Mi, outputs: " << outputs << " }\n";
        return corral({"run", "--policy", (dir() / "copy.yaml").string(), "--cwd", "checkout",
                       "--report", "report.json", "--", "sh", "-c", script});
    }
    nlohmann::json report() { return nlohmann::json::parse(contents(dir() / "report.json")); }
    fs::path victim_;
};

TEST_F(WorkdirOutputs, SymlinksOutOfTheCopyAreNotFollowedNorBroughtBack) {
    const std::string secret = (victim_ / "secret").string();
    auto r = job("none", "[stolen, up, via/secret, results]",
                 "ln -s " + secret + " stolen; ln -s ../../../../../../../.." + secret +
                     " up; ln -s " + victim_.string() +
                     " via; mkdir results; "
                     "ln -s ../" +
                     std::string("stolen") +
                     " results/relative-out; "
                     "echo kept > results/file; ln -s file results/inside");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    const fs::path checkout = dir() / "checkout";
    EXPECT_FALSE(fs::exists(fs::symlink_status(checkout / "stolen"))) << "absolute link copied";
    EXPECT_FALSE(fs::exists(fs::symlink_status(checkout / "up"))) << "escaping link copied";
    EXPECT_FALSE(fs::exists(fs::symlink_status(checkout / "via"))) << "link on the way followed";
    EXPECT_EQ(contents(checkout / "results" / "file"), "kept\n");
    EXPECT_TRUE(fs::is_symlink(checkout / "results" / "inside")) << "a link inside is kept";
    auto skipped = report()["outputs"]["skipped"].dump();
    EXPECT_NE(skipped.find("stolen"), std::string::npos) << skipped;
    EXPECT_NE(skipped.find("via/secret"), std::string::npos) << skipped;
    EXPECT_EQ(contents(victim_ / "secret"), "host secret\n");
}

TEST_F(WorkdirOutputs, SetuidBitsSpecialFilesAndDevicesDoNotComeBack) {
    auto r = job("none", "[out]",
                 "mkdir out && cp /bin/true out/suid && chmod 6755 out/suid && "
                 "test -u out/suid && mkfifo out/fifo && mknod out/null c 1 3 && "
                 "echo ok > out/file && echo made");
    ASSERT_EQ(r.out, "made\n") << "the job could not build its attack: " << r.err;
    const fs::path out = dir() / "checkout" / "out";
    struct stat st {};
    ASSERT_EQ(::stat((out / "suid").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 06000, 0u) << "setuid/setgid came back to the host";
    EXPECT_EQ(st.st_mode & 0777, 0755u);
    EXPECT_FALSE(fs::exists(fs::symlink_status(out / "fifo")));
    EXPECT_FALSE(fs::exists(fs::symlink_status(out / "null")));
    EXPECT_EQ(contents(out / "file"), "ok\n");
}

TEST_F(WorkdirOutputs, LinkPlantedInTheCheckoutIsNotWrittenThrough) {
    // Under `none` the job can reach the real checkout; it plants results -> victim dir there,
    // then makes a `results` output that would land in the victim dir if the link were followed.
    const std::string checkout = (dir() / "checkout").string();
    auto r = job("none", "[results, deep/file]",
                 "ln -s " + victim_.string() + " " + checkout + "/results && ln -s " +
                     victim_.string() + " " + checkout +
                     "/deep && mkdir results deep && "
                     "echo overwritten > results/secret && echo x > deep/file && echo planted");
    ASSERT_EQ(r.out, "planted\n") << r.err;
    EXPECT_EQ(contents(victim_ / "secret"), "host secret\n") << "written through the planted link";
    EXPECT_FALSE(fs::exists(victim_ / "file"));
    EXPECT_EQ(contents(dir() / "checkout" / "results" / "secret"), "overwritten\n");
}

}  // namespace
}  // namespace corral::security
