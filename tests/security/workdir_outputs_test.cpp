// `workdir.from: copy` copies the job's declared outputs back into the caller's checkout, as
// root, after the job has ended. What the job left in its tmpfs is the attacker's: the copy must
// not follow anything out of it, bring back setuid programs, block on a FIFO or write through a
// link the job planted in the checkout. Precedents: CVE-2019-14271 (`docker cp` trusting the
// container's files), CVE-2018-15664 (symlink-exchange during `docker cp`), and the setuid plant
// of issue 10, item 4.

#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
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

class WorkdirOutputs : public SandboxTest {
  protected:
    void SetUp() override {
        SandboxTest::SetUp();
        if (IsSkipped()) return;
        make_job_dir("checkout");
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

// Issue 10, second round: the job directory and the links in the outputs are resolved by
// descriptor, never by path again (CVE-2018-15664, the `docker cp` symlink-exchange race;
// CVE-2021-30465, runc's mount-target swap).
TEST_F(WorkdirOutputs, JobDirectorySwappedForALinkDuringTheRunGetsTheOutputsNotTheLinkTarget) {
    // CVE-2018-15664's shape: while the job runs, its directory's path is made a symlink to a
    // host directory; copy-back, as root, used to open the job directory by that path again.
    const std::string checkout = (dir() / "checkout").string();
    auto r = job("none", "[results]",
                 "mv " + checkout + " " + checkout + ".real && ln -s " + victim_.string() + " " +
                     checkout + " && mkdir results && echo swapped > results/secret && echo done");
    ASSERT_EQ(r.out, "done\n") << "the job could not swap its directory: " << r.err;
    ASSERT_TRUE(fs::is_symlink(dir() / "checkout"));
    EXPECT_FALSE(fs::exists(victim_ / "results")) << "copy-back followed the swapped path";
    EXPECT_EQ(contents(victim_ / "secret"), "host secret\n");
    EXPECT_EQ(contents(dir() / "checkout.real" / "results" / "secret"), "swapped\n")
        << "the outputs did not reach the directory the job ran for";
}

TEST_F(WorkdirOutputs, OutputLinkThatLeavesThroughAnotherLinkIsNotCopiedBack) {
    // `results/esc -> ../via/secret` reads as if it stayed inside the job directory, but `via`
    // is a link to a host directory: followed later (an artifact upload, the next job), it is
    // the host's file. The check resolves the chain (openat2 RESOLVE_BENEATH), not the text.
    auto r = job("default", "[results]",
                 "ln -s " + victim_.string() +
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

TEST_F(WorkdirOutputs, OutputLinkThroughALinkPlantedInTheCheckoutIsNotCopiedBack) {
    // The same chain, with the escaping hop already in the checkout (a link an earlier job
    // left there): the link is resolved where it lands too.
    ASSERT_EQ(::symlink(victim_.c_str(), (dir() / "checkout" / "via").c_str()), 0);
    auto r = job("default", "[results]",
                 "rm via && mkdir via results && ln -s ../via/secret results/esc && echo built");
    ASSERT_EQ(r.out, "built\n") << r.err;
    EXPECT_FALSE(fs::exists(fs::symlink_status(dir() / "checkout" / "results" / "esc")))
        << "a link leaving through the checkout's own link came back";
}

TEST_F(WorkdirOutputs, LinkThroughASiblingLinkToDotThatLandsLaterIsNotCopiedBack) {
    // Issue 10, red-team round 3 (the CVE-2018-15664 family: a link trusted where it lands).
    // `out/b -> .` is zero levels down, so `out/a -> b/b/.../c/../..` climbs out of the job
    // directory in the checkout, where `out/c` exists; the job removed `c` from its copy (there
    // the walk stopped at a missing name) and `a` sorts before `b` (checked before `b` was in
    // the checkout). The text check used to count each `b` as one level down.
    make_job_dir("checkout/out/c");
    std::string target;
    for (int i = 0; i < 12; ++i) target += "b/";
    target += "c";
    for (int i = 0; i < 14; ++i) target += "/..";
    target += "/etc/passwd";
    auto r = job("default", "[out]",
                 "rmdir out/c && ln -s . out/b && ln -s " + target + " out/a && echo built");
    ASSERT_EQ(r.out, "built\n") << r.err;
    const fs::path a = dir() / "checkout" / "out" / "a";
    EXPECT_FALSE(fs::exists(fs::symlink_status(a)))
        << "out/a came back and leads to " << fs::weakly_canonical(a);
    EXPECT_TRUE(fs::is_symlink(dir() / "checkout" / "out" / "b")) << "a link to `.` is inside";
    auto skipped = report()["outputs"]["skipped"].dump();
    EXPECT_NE(skipped.find("out/a"), std::string::npos) << skipped;
}

TEST_F(WorkdirOutputs, LinkThroughADirectoryMissingInTheCopyIsNotCopiedBack) {
    // The same walk without `..` after a name: `out/a -> gone/x` where `gone` does not exist in
    // the copy passed (a missing name was "beneath"); the checkout's `out/gone` is a link to a
    // host directory planted earlier. A missing directory on the way is an escape now, and the
    // final pass resolves every link made where it landed.
    make_job_dir("checkout/out");
    ASSERT_EQ(::symlink(victim_.c_str(), (dir() / "checkout" / "out" / "gone").c_str()), 0);
    auto r = job("default", "[out]", "rm out/gone && ln -s gone/secret out/a && echo built");
    ASSERT_EQ(r.out, "built\n") << r.err;
    EXPECT_FALSE(fs::exists(fs::symlink_status(dir() / "checkout" / "out" / "a")))
        << "a link through a missing directory came back";
}

TEST_F(WorkdirOutputs, BoundJobDirectoryIsClonedFromItsDescriptorNotItsPath) {
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

TEST_F(WorkdirOutputs, RootBindingByPathAfterASwapIsRefused) {
    // Issue 10, red-team round 3: when open_tree fails with EPERM/ENOSYS (an old kernel, or an
    // outer seccomp filter answering ENOSYS), the workdir is bound by path, and root reached that
    // fallback too: a job directory swapped for a link (CVE-2018-15664's race) bound the link's
    // target. What the path mounted must now be the directory resolved, or it is refused.
    // A child makes open_tree answer ENOSYS (seccomp) and runs the mounts in a namespace of its
    // own; its exit status says what happened.
    const fs::path job = dir() / "checkout";
    UniqueFd resolved(::open(job.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    ASSERT_TRUE(resolved.valid());
    fs::rename(job, dir() / "checkout.real");
    // Relative: the bind resolves it beneath the old root, where an absolute one would miss.
    const fs::path relative = fs::relative(victim_, dir());
    ASSERT_EQ(::symlink(relative.c_str(), job.c_str()), 0);
    int err[2];
    ASSERT_EQ(::pipe(err), 0);
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        ::close(err[0]);
        auto say = [&](const std::string& text, int code) {
            (void)!::write(err[1], text.data(), text.size());
            ::_exit(code);
        };
        if (::unshare(CLONE_NEWNS) != 0 ||
            ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
            say("unshare", 3);
        sock_filter filter[] = {
            BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
            BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_open_tree, 0, 1),
            BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
            BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        };
        sock_fprog program{static_cast<unsigned short>(std::size(filter)), filter};
        if (::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) say("seccomp", 3);
        WorkdirBinding binding{job.string(), job.string()};
        binding.host_fd = resolved.get();
        Policy policy;
        policy.namespaces.mount = true;
        auto plan = compile_mount_plan(policy, binding);
        if (!plan) say(plan.error().describe(), 2);
        auto prepared = prepare_mounts(*plan);
        if (!prepared) say(prepared.error().describe(), 2);
        if (prepared->workdir_tree >= 0) say("open_tree still worked", 3);
        const MountOp* failed_op = execute_mounts(*prepared);
        const int error = errno;
        if (failed_op == nullptr) say("the swapped path was bound", 1);
        const char* failed = failed_op->step.c_str();
        // EXDEV: the bind was made and undone for not being the resolved directory (any other
        // failure of that bind, an ENOENT, names the same step).
        say(std::string(failed) + ": " + std::strerror(error),
            error == EXDEV && std::string(failed).find("must still be the directory resolved") !=
                                  std::string::npos
                ? 0
                : 2);
    }
    ::close(err[1]);
    std::string said;
    char buf[512];
    for (ssize_t n; (n = ::read(err[0], buf, sizeof buf)) > 0;) said.append(buf, n);
    ::close(err[0]);
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status)) << said;
    if (WEXITSTATUS(status) == 3) GTEST_SKIP() << "cannot set the test up: " << said;
    EXPECT_EQ(WEXITSTATUS(status), 0) << said;
    EXPECT_EQ(contents(victim_ / "secret"), "host secret\n");
}

}  // namespace
}  // namespace corral::security
