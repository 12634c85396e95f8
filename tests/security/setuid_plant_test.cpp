// Setuid plants (issue 10.4): a sandbox that runs as some root owns the files it creates, and
// setting S_ISUID needs no capability on one's own file. A setuid-root copy of a shell left in
// the cwd of `corral run` or in a daemon workspace is root for any host user who runs it. The
// `default` and `strict` filters refuse every way to set S_ISUID/S_ISGID, as systemd's
// RestrictSUIDSGID= does (chmod, fchmod, fchmodat, fchmodat2, open/openat/creat with O_CREAT or
// O_TMPFILE, mknod, mknodat; openat2 answers ENOSYS because its mode is out of seccomp's reach).
// Precedent: CVE-2021-4034-style local root needs only one setuid-root binary; systemd added
// RestrictSUIDSGID= (v242) for exactly this plant by a service's uid.

#include <sys/stat.h>

#include <fstream>

#include "support/sandbox_harness.hpp"
#include "support/security_daemon.hpp"

namespace corral::security {
namespace {

namespace fs = std::filesystem;
using testing::HttpClient;

constexpr const char* kSetIdAttempts[] = {
    "chmod-u+s",    "chmod-g+s", "chmod-high-bits", "fchmod", "fchmodat", "fchmodat2", "open-creat",
    "openat-creat", "creat",     "tmpfile",         "mknod",  "mknodat",  "openat2"};

/// Every attempt refused, ordinary modes still work, and no setuid/setgid file was left.
void expect_no_setid(const std::string& out) {
    auto a = answers(out);
    for (const char* label : kSetIdAttempts) {
        SCOPED_TRACE(label);
        ASSERT_TRUE(a.count(label)) << out;
        EXPECT_NE(a[label], "ok") << label << " made a setuid/setgid file";
    }
    EXPECT_EQ(a["openat2"], "ENOSYS") << "openat2 must answer ENOSYS so libc falls back";
    EXPECT_EQ(a["chmod-u+s"], "EPERM");
    EXPECT_EQ(a["chmod-plain"], "ok") << out;
    EXPECT_EQ(a["open-plain"], "ok") << out;
    EXPECT_EQ(a["mknod-fifo"], "ok") << out;
    EXPECT_EQ(a["setid-files"], "0") << out;
}

/// Counts setuid/setgid files below `dir` as the host sees them.
size_t host_setid_files(const fs::path& dir) {
    size_t count = 0;
    std::error_code ec;
    for (auto& e : fs::recursive_directory_iterator(dir, ec)) {
        struct stat st {};
        if (::lstat(e.path().c_str(), &st) == 0 && (st.st_mode & (S_ISUID | S_ISGID))) ++count;
    }
    return count;
}

class SetuidPlantRun : public SandboxTest {
  protected:
    void SetUp() override {
        SandboxTest::SetUp();
        if (IsSkipped()) return;
        fs::copy_file(CORRAL_SYSCALL_PROBE, dir_ / "sprobe");
        ::chmod((dir_ / "sprobe").c_str(), 0755);
        // Writable for strict's nobody too: the plant must fail for the filter, not for DAC.
        fs::create_directory(dir_ / "plant");
        ::chmod((dir_ / "plant").c_str(), 0777);
    }
    RunOutcome plant(const std::string& policy) {
        return corral({"run", "--policy", policy, "--", "./sprobe", "setid", "plant"});
    }
};

// Control: without a filter the same attempts do make setuid files, so the probe really tries.
TEST_F(SetuidPlantRun, ControlWithoutFilterPlantsSetuidFiles) {
    auto r = plant("none");
    EXPECT_EQ(answers(r.out)["chmod-u+s"], "ok") << r.out << r.err;
    EXPECT_GT(host_setid_files(dir_ / "plant"), 0u);
}

TEST_F(SetuidPlantRun, DefaultAndStrictRefuseEverySetidBit) {
    for (const char* policy : {"default", "strict"}) {
        SCOPED_TRACE(policy);
        auto r = plant(policy);
        expect_no_setid(r.out);
        EXPECT_EQ(host_setid_files(dir_ / "plant"), 0u) << "a setuid/setgid file reached the host";
    }
}

// The real tools, as a job would use them: chmod u+s / g+s fail, chmod 0755 works.
TEST_F(SetuidPlantRun, ChmodToolRefusesSetidBits) {
    for (const char* policy : {"default", "strict"}) {
        SCOPED_TRACE(policy);
        auto r = corral({"run", "--policy", policy, "--", "/bin/sh", "-c",
                         "cd \"$(mktemp -d -p plant)\" && cp /bin/true t && chmod 0755 t && "
                         "echo plain $?; "
                         "chmod u+s t 2>/dev/null; echo suid $?; chmod g+s t 2>/dev/null; "
                         "echo sgid $?; install -m 4755 /bin/true i 2>/dev/null; echo install $?"});
        auto a = answers(r.out);
        EXPECT_EQ(a["plain"], "0") << r.out << r.err;
        EXPECT_NE(a["suid"], "0") << r.out;
        EXPECT_NE(a["sgid"], "0") << r.out;
        EXPECT_NE(a["install"], "0") << r.out;
        EXPECT_EQ(host_setid_files(dir_ / "plant"), 0u);
    }
}

class SetuidPlantDaemon : public DaemonTest {};

// The daemon's workspaces live on the host (<state>/sessions/<sid>): same plant, same refusal.
TEST_F(SetuidPlantDaemon, SessionsRefuseEverySetidBit) {
    auto c = client();
    for (const char* policy : {"default", "strict"}) {
        SCOPED_TRACE(policy);
        auto [base, root] = session(c, policy);
        upload_probe(c, base, CORRAL_SYSCALL_PROBE, "sprobe");
        auto out = run(c, base, "chmod 755 sprobe; mkdir -m 777 plant; ./sprobe setid plant");
        expect_no_setid(out);
        if (!root.empty()) {
            EXPECT_EQ(host_setid_files(root), 0u);
        }
    }
}

}  // namespace
}  // namespace corral::security
