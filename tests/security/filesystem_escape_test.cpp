// Leaving the filesystem view: uncovering hidden paths, writing kernel knobs through /proc and
// /sys, and symlinks in the writable working directory.

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fstream>
#include <set>

#include "support/sandbox_harness.hpp"

namespace corral::security {
namespace {

namespace fs = std::filesystem;

class FilesystemEscape : public SandboxTest, public ::testing::WithParamInterface<const char*> {};

/// Answers that mean "refused": the path is read-only, not permitted, or not there at all.
bool refused(const std::string& answer) {
    static const std::set<std::string> ok = {"EROFS", "EACCES", "EPERM", "ENOENT"};
    return ok.count(answer) != 0;
}

// Hidden paths are covered by an empty mount; lifting it (umount2 MNT_DETACH) would show the host's
// /home with its keys. runc's CVE-2023-27561 / CVE-2019-16884 class: masks undone from inside.
TEST_P(FilesystemEscape, HiddenHomeCannotBeUnmountedToUncoverTheHosts) {
    const std::string token = unique_token();
    const fs::path marker = fs::path("/home") / token;
    fs::create_directories(marker);
    auto r = attack(GetParam(), {"umount-then-list", "/home"});
    std::error_code ignored;
    fs::remove_all(marker, ignored);

    auto a = answers(r.out);
    EXPECT_EQ(a["umount"], "EPERM") << r.out << r.err;
    EXPECT_EQ(a["list /home"], "ok") << r.out;
    EXPECT_EQ(r.out.find("entry "), std::string::npos) << "host /home visible:\n" << r.out;

    auto root = attack(GetParam(), {"umount-then-list", "/"});
    EXPECT_EQ(answers(root.out)["umount"], "EPERM") << root.out;
}

// Kernel knobs that run code on the host as root when a sandbox can write them. The sandbox's
// uid may be 0 (`default` keeps the caller's uid) and without capabilities DAC still lets the
// owner write these root-owned files, so /proc/sys, /proc/sysrq-trigger and /sys must be mounted
// read-only (runc's readonlyPaths/maskedPaths exist for exactly this):
//   /proc/sys/kernel/core_pattern  "|/path" runs /path as root in the host's namespaces on the next
//                                  crash anywhere: the classic container breakout
//   /proc/sys/kernel/modprobe      run as root when an unknown binary format is exec'd
//   /proc/sys/vm/drop_caches       host-wide denial of service
//   /proc/sysrq-trigger            reboot or crash the host ('b', 'c')
//   /sys/kernel/uevent_helper      run as root on every uevent (Docker masks it)
//   /sys/power/state               suspend the host
// The probe only opens each file for writing and closes it: a hole found here writes nothing.
TEST_P(FilesystemEscape, ProcSysSysrqAndSysAreNotWritable) {
    const std::vector<std::string> knobs = {
        "/proc/sys/kernel/core_pattern", "/proc/sys/kernel/modprobe", "/proc/sys/vm/drop_caches",
        "/proc/sysrq-trigger",           "/sys/kernel/uevent_helper", "/sys/power/state"};
    std::vector<std::string> args = {"open-write"};
    args.insert(args.end(), knobs.begin(), knobs.end());
    auto r = attack(GetParam(), args);
    auto a = answers(r.out);
    for (const auto& knob : knobs) {
        ASSERT_TRUE(a.count(knob)) << r.out << r.err;
        EXPECT_TRUE(refused(a[knob])) << knob << " is writable inside the sandbox: " << a[knob];
    }
}

// The working directory is the one writable place shared with the host. A symlink planted there
// must resolve inside the sandbox's view (read-only /etc), in this run and in the next one that
// starts in it (the shape of CVE-2021-30465 in runc: a path swapped for a symlink between runs).
TEST_P(FilesystemEscape, SymlinkInWorkingDirectoryDoesNotReachHostEtc) {
    const std::string token = unique_token();
    const fs::path host_target = fs::path("/etc") / token;
    ::chmod(dir().c_str(), 0777);  // `strict` runs as nobody, who must be able to plant the link
    auto first = corral({"run", "--policy", GetParam(), "--", "sh", "-c",
                         "ln -s /etc etc-link && ./probe create etc-link/" + token});
    EXPECT_TRUE(fs::is_symlink(dir() / "etc-link")) << first.err;
    auto second = corral({"run", "--policy", GetParam(), "--cwd", (dir() / "etc-link").string(),
                          "--", probe(), "create", token});
    const bool escaped = fs::exists(host_target);
    std::error_code ignored;
    fs::remove(host_target, ignored);

    EXPECT_TRUE(refused(answers(first.out)["etc-link/" + token])) << first.out << first.err;
    // `--cwd` names the job's directory, bound writable: corral refuses to reach it through a
    // link (issue 17, item 3), so the second run never starts.
    EXPECT_EQ(second.exit_code, 125) << second.out << second.err;
    EXPECT_NE(second.err.find("`etc-link` is a symbolic link"), std::string::npos) << second.err;
    EXPECT_FALSE(escaped) << "a file was created in the host's /etc";
}

// What a policy hides or replaces beneath /proc, /sys and /dev holds. The fresh procfs, sysfs and
// /dev were mounted after the policy's hidden paths and tmpfs mounts and covered them: a hidden
// file there (/proc/cpuinfo, /sys/kernel/uevent_seqnum) was shown again, whole, in every session
// of the policy (the class of runc's maskedPaths undone, CVE-2023-27561); a hidden directory
// failed the creation (EINVAL making the covered dir read-only); a `tmpfs: {/dev/shm: 8Mi}` lost
// its size to the fresh /dev's own /dev/shm.
class KernelFilesystemMasks : public SandboxTest {
  protected:
    /// Runs `sh -c script` under `default` extended by `extra` (namespaces) and `filesystem`
    /// (the lines beneath `filesystem:`), written to a policy file of the test's own.
    RunOutcome run_with(const std::string& extra, const std::string& filesystem,
                        const std::string& script, const RunOptions& options = {}) {
        const fs::path policy = dir() / "masks.yaml";
        std::ofstream(policy) << "name: masks\nextends: default\n"
                              << extra << "filesystem:\n"
                              << filesystem;
        return corral({"run", "--policy", policy.string(), "--", "sh", "-c", script}, options);
    }

    /// The session of `extra` and `filesystem` must not be made: corral run exits 125 naming
    /// `key` with `path` and, in its words, `why`.
    void expect_refused(const std::string& extra, const std::string& filesystem,
                        const std::string& key, const std::string& path, const std::string& why) {
        auto r = run_with(extra, filesystem, "cat /proc/self/environ");
        EXPECT_EQ(r.exit_code, 125) << key << " " << path << ": " << r.out << r.err;
        EXPECT_NE(r.err.find(key + ": `" + path + "`"), std::string::npos) << path << ": " << r.err;
        EXPECT_NE(r.err.find(why), std::string::npos) << path << ": " << r.err;
    }
};

TEST_F(KernelFilesystemMasks, HiddenPathsAndTmpfsBeneathProcSysAndDevHold) {
    auto r = run_with("",
                      "  hidden: [/home, /root, /run/user, /proc/sys/kernel, /sys/kernel, "
                      "/proc/cpuinfo]\n"
                      "  tmpfs: { /tmp: 256Mi, /run: 16Mi, /dev/shm: 8Mi }\n",
                      "echo kernel $(ls /proc/sys/kernel | wc -l); echo sys $(ls /sys/kernel | wc "
                      "-l); echo cpuinfo $(wc -c < /proc/cpuinfo); "
                      "echo shm $(df -k /dev/shm | tail -1 | awk '{print $2}'); "
                      "echo write $(touch /dev/shm/x && echo ok)");
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("kernel 0\n"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("sys 0\n"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("cpuinfo 0\n"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("shm 8192\n"), std::string::npos) << "the policy's size: " << r.out;
    EXPECT_NE(r.out.find("write ok\n"), std::string::npos) << r.out;
    // Hidden files alone (the previous plan created these sessions and showed both files).
    auto masked = run_with("",
                           "  hidden: [/home, /root, /run/user, /proc/cpuinfo, "
                           "/sys/kernel/uevent_seqnum]\n",
                           "echo cpuinfo $(wc -c < /proc/cpuinfo); "
                           "echo seqnum $(wc -c < /sys/kernel/uevent_seqnum)");
    ASSERT_EQ(masked.exit_code, 0) << masked.out << masked.err;
    EXPECT_EQ(masked.out, "cpuinfo 0\nseqnum 0\n");
    // Control: without the masks the same paths are there (the test can fail).
    auto control = corral({"run", "--policy", "default", "--", "sh", "-c",
                           "echo kernel $(ls /proc/sys/kernel | wc -l); echo cpuinfo $(wc -c < "
                           "/proc/cpuinfo)"});
    ASSERT_EQ(control.exit_code, 0) << control.out << control.err;
    EXPECT_EQ(control.out.find("kernel 0\n"), std::string::npos) << control.out;
    EXPECT_EQ(control.out.find("cpuinfo 0\n"), std::string::npos) << control.out;
}

// A hidden path beneath the session's fresh /proc or /dev was resolved on the host: /proc/self
// became corrald's own pid, so `hidden: [/proc/self/environ]` meant /proc/<corrald's pid>/environ
// in the session: the creation failed on a pid the session lacks ("hide /proc/14560/environ:
// ENOENT"), or, where that pid was one of the session's, covered another process's entry and left
// every process's own environ readable. /etc/mtab (-> ../proc/self/mounts) was hidden beneath the
// host's /proc under the fresh one: the session ran with nothing hidden. A mask that silently
// holds nothing is runc's maskedPaths class again (CVE-2023-27561). Each of these is now refused
// before anything is made, naming the path and why.
TEST_F(KernelFilesystemMasks, PerProcessAndLinkedPathsAreRefusedNotMaskedSomewhereElse) {
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"/proc/self/environ", "`/proc/self` is a per-process directory"},
        {"/proc/thread-self/environ", "`/proc/thread-self` is a per-process directory"},
        {"/proc/1/environ", "`/proc/1` is a per-process directory"},
        {"/proc/net", "`/proc/net` is a symbolic link"},
        {"/proc/mounts", "`/proc/mounts` is a symbolic link"},
        {"/dev/fd", "`/dev/fd` is a symbolic link"},
        {"/dev/stdin", "`/dev/stdin` is a symbolic link"},
        {"/etc/mtab", "leads to `/proc/"},
    };
    for (const auto& [path, why] : cases) {
        expect_refused("", "  hidden: [/home, /root, /run/user, " + path + "]\n",
                       "filesystem.hidden", path, why);
        expect_refused("", "  tmpfs: { " + path + ": 1Mi }\n", "filesystem.tmpfs", path, why);
    }
    // Without a pid namespace /proc is the host's, and /proc/self is still each reader's own:
    // hiding it hid corrald's entry (helper 26's review). Beneath /dev/pts, the session's own
    // devpts instance, nothing can be made or hidden: refused up front, not at setup.
    const std::string no_pid = "namespaces:\n  pid: false\n";
    expect_refused(no_pid, "  hidden: [/home, /root, /run/user, /proc/self/environ]\n",
                   "filesystem.hidden", "/proc/self/environ", "is a per-process directory");
    expect_refused(no_pid, "  hidden: [/home, /root, /run/user, /etc/mtab]\n",
                   "filesystem.hidden", "/etc/mtab", "leads to `/proc/");
    expect_refused("", "  hidden: [/home, /root, /run/user, /dev/pts/0]\n", "filesystem.hidden",
                   "/dev/pts/0", "devpts instance");
    // A host link whose way crosses a magic link (/proc/self/cwd) resolved, with realpath, through
    // corral's own cwd to an ordinary-looking host path, and that was masked instead (helper
    // 26's review, L1). Outside /tmp, which `default` replaces (a mask there is never made).
    char made[] = "/var/tmp/corral-magic-link-XXXXXX";
    ASSERT_NE(::mkdtemp(made), nullptr);
    const fs::path holder = made;
    fs::create_directory_symlink("/proc/self/cwd", holder / "link");
    expect_refused("", "  hidden: [/home, /root, /run/user, " + (holder / "link/etc").string() +
                           "]\n",
                   "filesystem.hidden", (holder / "link/etc").string(), "leads to `/proc");
    std::error_code ignored;
    fs::remove_all(holder, ignored);
    // corral's /dev is what it hides from, not the host's: a device it shows is covered, one it
    // never shows is nothing to hide.
    auto dev = run_with("", "  hidden: [/home, /root, /run/user, /dev/urandom, /dev/vda]\n",
                        "echo urandom $(head -c 16 /dev/urandom | wc -c); "
                        "echo zero $(head -c 16 /dev/zero | wc -c)");
    ASSERT_EQ(dev.exit_code, 0) << dev.out << dev.err;
    EXPECT_EQ(dev.out, "urandom 0\nzero 16\n");
    // Control: a plain path beneath the fresh /proc or /dev is still hidden, and the session
    // runs. corral's /dev/shm starts empty, so what shows its hide is that nothing can be put
    // there (a file written there lands in the session's own /dev/shm without the hide).
    auto ok = run_with("", "  hidden: [/home, /root, /run/user, /proc/cpuinfo, /dev/shm]\n",
                       "echo cpuinfo $(wc -c < /proc/cpuinfo); "
                       "echo shm $(touch /dev/shm/x 2>/dev/null && echo written || echo refused)");
    ASSERT_EQ(ok.exit_code, 0) << ok.out << ok.err;
    EXPECT_EQ(ok.out, "cpuinfo 0\nshm refused\n");
    auto shown = run_with("", "  hidden: [/home, /root, /run/user]\n",
                          "echo shm $(touch /dev/shm/x 2>/dev/null && echo written || echo refused)");
    ASSERT_EQ(shown.exit_code, 0) << shown.out << shown.err;
    EXPECT_EQ(shown.out, "shm written\n") << "the control of the control";
}

// Beneath a fresh /proc or /sys what is there is the session's, yet whether a hidden path existed
// (and what it was) was decided by corrald's own view of the host: an entry that view lacked was
// skipped as "nothing to hide", silently, and the session showed it whole (helper 26's M2 at
// stop 38; a mask that holds nothing is the class of CVE-2023-27561); an entry only the host had
// (the /proc/sys/net/ipv4/conf directory of its own interface, absent from the session's network
// namespace) failed the creation at setup. corral's own protection of the fresh /proc
// (/proc/sys and /proc/sysrq-trigger read-only, /proc/kcore masked) was decided the same way and
// left them writable (helper 27). A /proc narrowed to processes (procfs `subset=pid`, systemd's
// ProcSubset=pid) stands for a host view that lacks what the session has.
TEST_F(KernelFilesystemMasks, WhatIsHiddenIsDecidedByTheSessionsFilesystemsNotTheHosts) {
    // Only the host's: the per-network-namespace directory of one of its own interfaces.
    std::string interface;
    for (const auto& entry : fs::directory_iterator("/proc/sys/net/ipv4/conf")) {
        const std::string name = entry.path().filename().string();
        if (name != "all" && name != "default" && name != "lo") interface = name;
    }
    if (!interface.empty()) {  // a host with loopback alone has nothing the session lacks
        auto only_host = run_with("",
                                  "  hidden: [/home, /root, /run/user, /proc/sys/net/ipv4/conf/" +
                                      interface + "]\n",
                                  "ls /proc/sys/net/ipv4/conf");
        ASSERT_EQ(only_host.exit_code, 0) << interface << ": " << only_host.out << only_host.err;
        EXPECT_EQ(only_host.out, "all\ndefault\nlo\n") << interface;
        // With the host's /proc (no pid namespace) /proc/sys/net is still the reader's network
        // namespace's: the host's interface is nothing to hide there either, and the session's
        // own lo is hidden.
        auto host_proc = run_with("namespaces:\n  pid: false\n",
                                  "  hidden: [/home, /root, /run/user, /proc/sys/net/ipv4/conf/" +
                                      interface + ", /proc/sys/net/ipv4/conf/lo]\n",
                                  "ls /proc/sys/net/ipv4/conf; ls /proc/sys/net/ipv4/conf/lo | wc -l");
        ASSERT_EQ(host_proc.exit_code, 0) << interface << ": " << host_proc.out << host_proc.err;
        EXPECT_EQ(host_proc.out, "all\ndefault\nlo\n0\n") << interface;
    }
    static constexpr char kCannotNarrow[] = "corral-test: cannot mount /proc with subset=pid\n";
    RunOptions narrowed;
    narrowed.in_child = [] {
        if (::unshare(CLONE_NEWNS) != 0 ||
            ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
            ::mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "subset=pid") != 0) {
            (void)!::write(2, kCannotNarrow, sizeof kCannotNarrow - 1);
            ::_exit(77);
        }
    };
    // The narrowing holds where corral runs: a session without a mount namespace sees it.
    auto seen = corral({"run", "--policy", "none", "--", "sh", "-c",
                        "test -e /proc/cpuinfo && echo there || echo absent"},
                       narrowed);
    if (seen.exit_code == 77 && seen.err.find(kCannotNarrow) != std::string::npos)
        GTEST_SKIP() << "procfs cannot be mounted with subset=pid here";
    ASSERT_EQ(seen.exit_code, 0) << seen.out << seen.err;
    ASSERT_EQ(seen.out, "absent\n") << "the narrowed /proc is not what corral sees";
    // The session's mount table says how /proc/sys and /proc/fs are mounted (nothing: not
    // protected; /proc/sysrq-trigger and /proc/kcore are not in every kernel, these are).
    auto masked = run_with("", "  hidden: [/home, /root, /run/user, /proc/cpuinfo, /proc/sys/kernel]\n",
                           "echo cpuinfo $(wc -c < /proc/cpuinfo); "
                           "echo kernel $(ls /proc/sys/kernel | wc -l); "
                           "for m in /proc/sys /proc/fs; do echo $m $(awk -v m=$m "
                           "'$5 == m {split($6, o, \",\"); print o[1]}' /proc/self/mountinfo); "
                           "done",
                           narrowed);
    ASSERT_EQ(masked.exit_code, 0) << masked.out << masked.err;
    EXPECT_EQ(masked.out,
              "cpuinfo 0\nkernel 0\n/proc/sys ro\n/proc/fs ro\n")
        << "a hidden or protected path the session has is shown (or writable)";
    // A tmpfs beneath it is mounted on the session's directory, which the host's view lacks
    // (it failed the creation: "mount point `/proc/sys/kernel/random` does not exist").
    auto tmpfs = run_with("",
                          "  hidden: [/home, /root, /run/user]\n"
                          "  tmpfs: { /tmp: 64Mi, /run: 16Mi, /proc/sys/kernel/random: 1Mi }\n",
                          "echo entries $(ls -A /proc/sys/kernel/random | wc -l); "
                          "echo write $(touch /proc/sys/kernel/random/x && echo ok); "
                          "echo size $(df -k /proc/sys/kernel/random | tail -1 | awk '{print $2}')",
                          narrowed);
    ASSERT_EQ(tmpfs.exit_code, 0) << tmpfs.out << tmpfs.err;
    EXPECT_EQ(tmpfs.out, "entries 0\nwrite ok\nsize 1024\n") << tmpfs.err;
    // /proc/net leads to each reader's own /proc/<pid>/net: refused by name, also where the
    // host's view has no /proc/net to show it is a link (at setup it would have been followed
    // to the holder's own entry, hiding nothing of any session process).
    auto net = run_with("", "  hidden: [/home, /root, /run/user, /proc/net/unix]\n", "true",
                        narrowed);
    EXPECT_EQ(net.exit_code, 125) << net.out << net.err;
    EXPECT_NE(net.err.find("`/proc/net` is a symbolic link"), std::string::npos) << net.err;
}

// A tmpfs beneath a fresh /proc or /sys goes on what the session's own filesystem has there,
// reached without following a link (the mount-target confusion of CVE-2019-16884 and
// CVE-2023-27561): a file or a path it lacks fails the creation naming both, it is never
// mounted somewhere else, and it does not stand in for corral's own protection of /proc/sys.
TEST_F(KernelFilesystemMasks, TmpfsBeneathAFreshKernelFilesystemIsOnTheSessionsOwnDirectory) {
    const std::string base = "  hidden: [/home, /root, /run/user]\n  tmpfs: { /tmp: 64Mi, /run: 16Mi, ";
    auto file = run_with("", base + "/proc/sys/kernel/hostname: 1Mi }\n", "true");
    EXPECT_EQ(file.exit_code, 125) << file.out << file.err;
    EXPECT_NE(file.err.find("mount tmpfs on /proc/sys/kernel/hostname"), std::string::npos)
        << file.err;
    EXPECT_NE(file.err.find("ENOTDIR"), std::string::npos) << file.err;
    auto missing = run_with("", base + "/sys/kernel/corral-not-there: 1Mi }\n", "true");
    EXPECT_EQ(missing.exit_code, 125) << missing.out << missing.err;
    EXPECT_NE(missing.err.find("mount tmpfs on /sys/kernel/corral-not-there"), std::string::npos)
        << missing.err;
    // The tmpfs is writable; what is around it keeps corral's protection (read-only /proc/sys,
    // as its mount says: a write to a knob fails by uid alone in a user namespace).
    auto around = run_with("", base + "/proc/sys/kernel/random: 1Mi }\n",
                           "touch /proc/sys/kernel/random/x && echo tmpfs ok; "
                           "awk '$5 == \"/proc/sys\" {split($6, o, \",\"); print \"sys\", o[1]}' "
                           "/proc/self/mountinfo");
    ASSERT_EQ(around.exit_code, 0) << around.out << around.err;
    EXPECT_EQ(around.out, "tmpfs ok\nsys ro\n") << around.err;
    // A tmpfs inside a policy tmpfs there gets its mount point made in it (as anywhere corral
    // owns); inside a directory hidden at setup (an empty read-only tmpfs) it is refused by name
    // up front (both failed at setup as "not in the session's /sys", helper 29's L1).
    auto nested = run_with("", base + "/sys/fs: 1Mi, /sys/fs/cgroup: 1Mi }\n",
                           "awk '$5 ~ /^\\/sys\\/fs(\\/cgroup)?$/ && $9 == \"tmpfs\" "
                           "{split($6, o, \",\"); print $5, o[1]}' /proc/self/mountinfo");
    ASSERT_EQ(nested.exit_code, 0) << nested.out << nested.err;
    // (after the read-only view of the host's cgroup tree that `default` mounts there first)
    EXPECT_NE(nested.out.find("/sys/fs rw\n/sys/fs/cgroup rw\n"), std::string::npos)
        << nested.out << nested.err;
    auto beneath_hide = run_with(
        "", "  hidden: [/home, /root, /run/user, /sys/fs]\n  tmpfs: { /tmp: 64Mi, /sys/fs/cgroup: 1Mi }\n",
        "true");
    EXPECT_EQ(beneath_hide.exit_code, 125) << beneath_hide.out << beneath_hide.err;
    EXPECT_NE(beneath_hide.err.find("filesystem.tmpfs: `/sys/fs/cgroup` lies beneath `/sys/fs`"),
              std::string::npos)
        << beneath_hide.err;
}

// Where the new mount API is not there for corral (a kernel without it, an outer seccomp filter
// answering ENOSYS, as some container runtimes' profiles do), what is hidden and protected beneath
// /proc and /sys is mounted by path on what was found, not given up: the protection of the fresh
// /proc failed every session's creation there (helper 29's review of stop 40), or would have been
// skipped had the failure been taken for "nothing there" (the silent mask of CVE-2023-27561).
TEST_F(KernelFilesystemMasks, WithoutTheNewMountApiTheSameIsHiddenAndProtectedByPath) {
    static constexpr char kCannotFilter[] = "corral-test: cannot install the seccomp filter\n";
    RunOptions no_new_mount_api;
    no_new_mount_api.in_child = [] {
        sock_filter filter[] = {
            BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
            BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_open_tree, 3, 0),
            BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_fsopen, 2, 0),
            BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_move_mount, 1, 0),
            BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
            BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
        };
        sock_fprog program{static_cast<unsigned short>(std::size(filter)), filter};
        if (::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) {
            (void)!::write(2, kCannotFilter, sizeof kCannotFilter - 1);
            ::_exit(77);
        }
    };
    auto r = run_with("",
                      "  hidden: [/home, /root, /run/user, /proc/sys/kernel, /proc/cpuinfo]\n"
                      "  tmpfs: { /tmp: 64Mi, /run: 16Mi, /sys/fs: 1Mi }\n",
                      "echo kernel $(ls /proc/sys/kernel | wc -l); "
                      "echo cpuinfo $(wc -c < /proc/cpuinfo); "
                      "echo sysfs $(touch /sys/fs/x && echo written); "
                      "for m in /proc/sys /proc/cpuinfo /sys/fs; do echo $m $(awk -v m=$m "
                      "'$5 == m {split($6, o, \",\"); print o[1]}' /proc/self/mountinfo); done",
                      no_new_mount_api);
    if (r.exit_code == 77 && r.err.find(kCannotFilter) != std::string::npos)
        GTEST_SKIP() << "a seccomp filter cannot be installed here";
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_EQ(r.out,
              "kernel 0\ncpuinfo 0\nsysfs written\n/proc/sys ro\n/proc/cpuinfo ro\n/sys/fs rw\n")
        << r.err;
}

// Without a pid namespace the session sees the host's /proc, whose knobs are writable by uid as
// a fresh one's are (runc and Docker mask and make them read-only whatever /proc it is; the
// core_pattern "|program" the host runs as root on a crash). corral's protection of the fresh
// /proc was not applied to it: host uid 0 without capabilities could write
// /proc/sys/kernel/core_pattern (helper 29's L4).
TEST_F(KernelFilesystemMasks, TheHostsProcWithoutAPidNamespaceIsProtectedAsAFreshOne) {
    auto r = run_with("namespaces:\n  pid: false\n  user: false\n",
                      "  read_only: []\n  hidden: [/home, /root, /run/user]\n",
                      "test -w /proc/sys/kernel/core_pattern && echo core_pattern writable; "
                      "for m in /proc/sys /proc/fs; do echo $m $(awk -v m=$m "
                      "'$5 == m {split($6, o, \",\"); print o[1]}' /proc/self/mountinfo); done; "
                      "for f in kcore keys timer_list sched_debug; do test -e /proc/$f && "
                      "echo $f $(awk -v m=/proc/$f '$5 == m {print \"masked\"}' "
                      "/proc/self/mountinfo) $(head -c 16 /proc/$f 2>/dev/null | wc -c); done; "
                      "true");
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    // Each of the masked files this kernel has (the session sees the host's /proc) is a mount
    // of /dev/null there, and reads empty. Not their contents alone: /proc/kcore needs
    // CAP_SYS_RAWIO and would read empty to the session unmasked too (and this VM's kernel has
    // none); /proc/timer_list (0400 root) reads to host uid 0 unmasked.
    std::string masked_files;
    for (const char* name : {"kcore", "keys", "timer_list", "sched_debug"})
        if (::access((std::string("/proc/") + name).c_str(), F_OK) == 0)
            masked_files += std::string(name) + " masked 0\n";
    EXPECT_FALSE(masked_files.empty()) << "none of the masked files exists on this kernel";
    EXPECT_EQ(r.out, "/proc/sys ro\n/proc/fs ro\n" + masked_files) << r.err;
    // The policy's own binds of (or above) /proc go before the protection, not over it: a
    // writable bind of /proc/sys showed the host's knobs writable again (helper 30's M1).
    auto rebound = run_with("namespaces:\n  pid: false\n  user: false\n",
                            "  read_only: []\n  read_write: [/proc/sys, /proc]\n"
                            "  hidden: [/home, /root, /run/user]\n",
                            "test -w /proc/sys/kernel/core_pattern && echo core_pattern writable; "
                            "echo timer_list $(head -c 16 /proc/timer_list 2>/dev/null | wc -c)");
    ASSERT_EQ(rebound.exit_code, 0) << rebound.out << rebound.err;
    EXPECT_EQ(rebound.out, "timer_list 0\n") << rebound.err;
}

INSTANTIATE_TEST_SUITE_P(Presets, FilesystemEscape, ::testing::Values("default", "strict"));

}  // namespace
}  // namespace corral::security
