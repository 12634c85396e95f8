// The session holder's descriptor store (isolation/descriptor_store.hpp, issue 12.2) from the
// attacker's side. The holder — PID 1 of the session — keeps the read ends of every process's
// output pipes and the store's channel. Reaching its descriptors from inside the session would
// let a sandboxed process read (or starve) every other process's output and inject requests.
//
// Precedents: CVE-2019-5736 (runc: a container process reached the host runtime through
// /proc/<pid>/exe and its descriptors — the holder is the same kind of host-created process in
// the sandbox's pid namespace), and the CVE-2022-30594 class (ptrace access checks that let a
// process attach to a more privileged one): ptrace, pidfd_getfd, /proc/1/fd, /proc/1/mem and
// process_vm_readv all go through the same PTRACE_MODE_ATTACH check, which a non-dumpable holder
// whose mm belongs to the host's user namespace refuses even to root of the session's user
// namespace with every capability there.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "../integration/support/http_client.hpp"
#include "isolation/cgroup.hpp"
#include "isolation/launcher.hpp"
#include "isolation/sandbox.hpp"
#include "support/sandbox_harness.hpp"
#include "support/security_daemon.hpp"

namespace corral::security {
namespace {

namespace fs = std::filesystem;

/// A sandbox with every namespace (a user namespace among them, its ids leased) and a descriptor
/// store, whose processes are launched WITHOUT confinement: root of the session's user namespace
/// with every capability there, CAP_SYS_PTRACE included — the strongest attacker a session has.
class HolderStore : public ::testing::TestWithParam<bool> {
  protected:
    void SetUp() override {
        if (::geteuid() != 0) GTEST_SKIP() << "needs root (namespaces, cgroups, mounts)";
        auto host = discover_cgroup_host();
        ASSERT_TRUE(host) << host.error().describe();
        auto session = Cgroup::create(host->v2_own, "corral-store-test-" + unique_token());
        ASSERT_TRUE(session) << session.error().describe();
        session_ = std::move(*session);
        auto holder = session_.create_child("holder");
        ASSERT_TRUE(holder) << holder.error().describe();
        holder_cgroup_ = std::move(*holder);
        char dir[] = "/var/tmp/corral-store-test-XXXXXX";
        ASSERT_NE(::mkdtemp(dir), nullptr);
        workdir_ = dir;
        ASSERT_EQ(::chmod(dir, 0755), 0);
        fs::copy_file(CORRAL_ESCAPE_PROBE, workdir_ / "probe");
        ::chmod((workdir_ / "probe").c_str(), 0755);
    }
    void TearDown() override {
        sandbox_.stop();
        leaves_.clear();
        if (session_.valid()) {
            EXPECT_TRUE(session_.remove());
        }
        std::error_code ignored;
        if (!workdir_.empty()) fs::remove_all(workdir_, ignored);
    }

    Policy policy() const {
        Policy p;
        p.namespaces.pid = true;
        p.namespaces.mount = true;
        p.namespaces.ipc = true;
        p.namespaces.uts = true;
        p.namespaces.user = true;
        p.filesystem.read_only = {"/usr", "/lib", "/lib64", "/bin", "/etc"};
        p.filesystem.tmpfs = {{"/tmp", 16u << 20}};
        return p;
    }

    /// Runs ./probe ARGS in the sandbox, unconfined; returns its stdout and stderr.
    std::string probe(std::vector<std::string> args) {
        auto leaf = session_.create_child("p" + std::to_string(leaves_.size()));
        EXPECT_TRUE(leaf) << leaf.error().describe();
        if (!leaf) return {};
        leaves_.push_back(std::move(*leaf));
        int fds[2];
        EXPECT_EQ(::pipe2(fds, O_CLOEXEC), 0);
        UniqueFd read_end(fds[0]), write_end(fds[1]);
        LaunchSpec spec;
        spec.argv = {"/workspace/probe"};
        spec.argv.insert(spec.argv.end(), args.begin(), args.end());
        spec.env = {"PATH=/usr/bin:/bin"};
        spec.cwd = "/workspace";
        spec.cgroup_fd = leaves_.back().dir_fd();
        spec.namespace_holder_pidfd = sandbox_.holder_pidfd();
        spec.namespace_flags = sandbox_.namespace_flags();
        spec.stdout_fd = write_end.get();
        spec.stderr_fd = write_end.get();
        auto child = launch(spec);
        write_end.reset();
        EXPECT_TRUE(child) << child.error().describe();
        if (!child) return {};
        std::string out;
        char buffer[4096];
        for (ssize_t n; (n = ::read(read_end.get(), buffer, sizeof buffer)) > 0;)
            out.append(buffer, static_cast<size_t>(n));
        (void)child->wait();
        return out;
    }

    Cgroup session_;
    Cgroup holder_cgroup_;
    std::vector<Cgroup> leaves_;
    fs::path workdir_;
    Sandbox sandbox_;
};

// (a) of the review of the first build: become_namespace_root's credential change resets the
// dumpable flag to fs.suid_dumpable, which is 1 on some hosts. With the seam (GetParam) the
// holder sees exactly that, without the host's sysctl being touched; it must be non-dumpable
// again before it says it is ready, and then nothing of PID 1 is reachable from inside.
TEST_P(HolderStore, HeldDescriptorsAreUnreachableFromRootOfTheSessionsUserNamespace) {
    SandboxOptions options;
    options.keep_output = true;
    options.rehearse_suid_dumpable = GetParam();
    auto sandbox =
        Sandbox::create(policy(), holder_cgroup_, {workdir_.string(), "/workspace"}, {}, options);
    ASSERT_TRUE(sandbox) << sandbox.error().describe();
    sandbox_ = std::move(*sandbox);
    ASSERT_TRUE(sandbox_.keeps_output());

    // A pipe whose read end the holder keeps, as it keeps every process's stdout.
    int fds[2];
    ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
    UniqueFd read_end(fds[0]), write_end(fds[1]);
    const int held[] = {read_end.get()};
    ASSERT_TRUE(sandbox_.hold_output(kFirstStoreSlot, held));
    // The host's root takes it back (what a restarted corrald does): the store works.
    Result<UniqueFd> taken = sys_error(EBADF, "not yet");
    for (int i = 0; i < 200 && !taken; ++i) {  // the holder serves the request asynchronously
        taken = sandbox_.take_output(kFirstStoreSlot);
        if (!taken) ::usleep(5000);
    }
    ASSERT_TRUE(taken) << taken.error().describe();
    struct stat mine, theirs;
    ASSERT_EQ(::fstat(read_end.get(), &mine), 0);
    ASSERT_EQ(::fstat(taken->get(), &theirs), 0);
    EXPECT_EQ(mine.st_ino, theirs.st_ino);

    // From inside, as root of the session's user namespace with every capability there.
    const std::string ids = probe({"ids"});
    EXPECT_NE(ids.find("euid 0\n"), std::string::npos) << ids;
    EXPECT_NE(ids.find("CapEff:\t"), std::string::npos) << ids;
    EXPECT_EQ(ids.find("CapEff:\t0000000000000000"), std::string::npos) << ids;
    const auto reach = answers(probe({"holder-reach"}));
    EXPECT_EQ(reach.at("pidfd-open"), "ok");  // PID 1 is visible; what it holds is not
    EXPECT_NE(reach.at("getfd"), "ok") << "pidfd_getfd took a descriptor of PID 1";
    EXPECT_NE(reach.at("ptrace"), "ok") << "PID 1 can be ptraced";
    EXPECT_NE(reach.at("mem"), "ok") << "/proc/1/mem opened";
    EXPECT_EQ(reach.at("vm-readv"), "EPERM") << "process_vm_readv reached PID 1";
    const std::string fd_lines = probe({"open-fds", "1"});
    EXPECT_EQ(fd_lines.find(" ok"), std::string::npos) << fd_lines;
    // The held read end is in no sandboxed process's table.
    EXPECT_NE(probe({"read-pipes"}).find("read-pipes 0"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(SuidDumpable, HolderStore, ::testing::Values(false, true),
                         [](const auto& info) {
                             return info.param ? std::string("AsIfSuidDumpable1")
                                               : std::string("AsTheHostIs");
                         });

class DescriptorStoreDaemon : public DaemonTest {};

// Through the real daemon: a session whose holder keeps a running process's pipes; its other
// processes (under the policy's own confinement) reach none of PID 1's descriptors and hold no
// pipe's read end. `none` has no pid namespace and no boundary to test here.
TEST_F(DescriptorStoreDaemon, ASessionsProcessesCannotReachWhatItsHolderKeeps_CVE_2019_5736) {
    auto c = client();
    for (const char* policy : {"default", "strict"}) {
        SCOPED_TRACE(policy);
        auto [base, root] = session(c, policy);
        upload_probe(c, base);
        auto spawned = c.post(base + "/processes", {{"command", "exec sleep 600"}});
        ASSERT_EQ(spawned.status, 201u) << spawned.body;
        const auto reach =
            answers(run(c, base, "chmod 755 probe 2>/dev/null; ./probe holder-reach"));
        EXPECT_NE(reach.at("getfd"), "ok");
        EXPECT_NE(reach.at("ptrace"), "ok");
        EXPECT_NE(reach.at("mem"), "ok");
        EXPECT_NE(reach.at("vm-readv"), "ok");
        EXPECT_NE(reach.at("vm-readv"), "EFAULT");  // EFAULT: the access check let it through
        const std::string fd_lines = run(c, base, "./probe open-fds 1");
        EXPECT_EQ(fd_lines.find(" ok"), std::string::npos) << fd_lines;
        EXPECT_NE(run(c, base, "./probe read-pipes").find("read-pipes 0"), std::string::npos);
        EXPECT_EQ(c.del(base + "/processes/p1?force=true").status, 200u);
    }
}

}  // namespace
}  // namespace corral::security
