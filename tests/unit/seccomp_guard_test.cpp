// The seccomp guard (isolation/seccomp_guard.hpp), the recent-syscall table
// (policies/syscall_numbers.hpp) and the listing (isolation/seccomp_listing.hpp). The compiled
// programs are run two ways: through the listing's classic BPF evaluator over hand-made
// seccomp_data, which can ask about numbers and argument values no real call could safely pass
// (an unassigned number, upper-half garbage, the x32 bit), and for real in a forked child under
// the installed filter (which also keeps the evaluator honest).

#include "isolation/seccomp_guard.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/audit.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <functional>

#include "isolation/confinement.hpp"
#include "isolation/seccomp.hpp"
#include "isolation/seccomp_listing.hpp"
#include "policies/syscall_numbers.hpp"

namespace corral {
namespace {

uint32_t run_bpf(const std::vector<sock_filter>& program, const seccomp_data& data) {
    return evaluate_seccomp(program, data);
}

seccomp_data call_of(int nr, std::initializer_list<uint64_t> args = {}) {
    seccomp_data data{};
    data.nr = nr;
    data.arch = AUDIT_ARCH_X86_64;
    size_t i = 0;
    for (uint64_t arg : args) data.args[i++] = arg;
    return data;
}

constexpr uint32_t kAllow = SECCOMP_RET_ALLOW;
constexpr uint32_t errno_ret(int e) {
    return SECCOMP_RET_ERRNO | static_cast<uint32_t>(e);
}

std::vector<sock_filter> program_of(const std::string& preset) {
    SeccompSpec spec;
    spec.preset = preset;
    auto program = compile_seccomp(spec);
    EXPECT_TRUE(program.ok()) << program.error().describe();
    return program.ok() ? *program : std::vector<sock_filter>{};
}

int nr(const char* name) {
    int number = resolve_syscall(name);
    EXPECT_GE(number, 0) << name;
    return number;
}

// ---- the recent-syscall table -------------------------------------------------------------------

TEST(SyscallNumbers, TableIsSortedUniqueAndBelowTheHighest) {
    auto table = recent_x86_64_syscalls();
    ASSERT_FALSE(table.empty());
    for (size_t i = 1; i < table.size(); ++i) EXPECT_LT(table[i - 1].name, table[i].name);
    std::vector<int> numbers;
    for (const auto& s : table) {
        numbers.push_back(s.number);
        EXPECT_LE(s.number, highest_x86_64_syscall()) << s.name;
        EXPECT_EQ(recent_x86_64_syscall(s.name), s.number) << s.name;
    }
    std::sort(numbers.begin(), numbers.end());
    EXPECT_EQ(std::adjacent_find(numbers.begin(), numbers.end()), numbers.end());
}

// A row must not contradict libseccomp: where the library knows a name, its number wins and must
// agree; where it knows the number under another name, the row is a typo.
TEST(SyscallNumbers, TableAgreesWithLibseccomp) {
    for (const auto& s : recent_x86_64_syscalls()) {
        const std::string name(s.name);
        int known = seccomp_syscall_resolve_name_arch(SCMP_ARCH_X86_64, name.c_str());
        if (known >= 0) {
            EXPECT_EQ(known, s.number) << name;
        }
        char* other = seccomp_syscall_resolve_num_arch(SCMP_ARCH_X86_64, s.number);
        if (other != nullptr) {
            EXPECT_EQ(std::string(other), name) << s.number;
        }
        std::free(other);
        EXPECT_EQ(resolve_syscall(name), s.number) << name;
    }
}

TEST(SyscallNumbers, NewSyscallsTheIssueNamesResolve) {
    for (const char* name : {"statmount", "listmount", "mseal", "setxattrat", "getxattrat",
                             "listxattrat", "removexattrat", "lsm_set_self_attr", "open_tree_attr",
                             "fchmodat2", "futex_waitv", "cachestat"}) {
        EXPECT_GE(resolve_syscall(name), 0) << name;
    }
    EXPECT_EQ(resolve_syscall("no_such_syscall"), -1);
}

// On this kernel the table is complete: the first number above it is unassigned (ENOSYS without
// any filter). A newer kernel fails this test until its syscalls are added to the table.
TEST(SyscallNumbers, KernelHasNothingAboveTheHighest) {
    errno = 0;
    long r = ::syscall(highest_x86_64_syscall() + 1, 0, 0, 0, 0, 0, 0);
    if (r == -1 && errno != ENOSYS)
        ADD_FAILURE() << "the kernel assigns " << highest_x86_64_syscall() + 1
                      << ": add it to policies/syscall_numbers.cpp";
}

TEST(SyscallNumbers, UnassignedRangesAreTheGapAboveUprobe) {
    auto holes = unassigned_syscall_ranges();
    ASSERT_EQ(holes.size(), 1u);
    EXPECT_EQ(holes[0].first, 337);
    EXPECT_EQ(holes[0].last, 423);
}

// ---- the guard, interpreted ---------------------------------------------------------------------

class SeccompGuard : public ::testing::TestWithParam<const char*> {
  protected:
    uint32_t answer(int number, std::initializer_list<uint64_t> args = {}) {
        return run_bpf(program_, call_of(number, args));
    }
    std::vector<sock_filter> program_ = program_of(GetParam());
};

TEST_P(SeccompGuard, SetidModesAreRefusedOrdinaryModesPass) {
    for (uint64_t mode : {04755ull, 02755ull, 06000ull, 0x100000000ull | 04755}) {
        SCOPED_TRACE(mode);
        EXPECT_EQ(answer(nr("chmod"), {0, mode}), errno_ret(EPERM));
        EXPECT_EQ(answer(nr("fchmod"), {3, mode}), errno_ret(EPERM));
        EXPECT_EQ(answer(nr("fchmodat"), {3, 0, mode}), errno_ret(EPERM));
        EXPECT_EQ(answer(nr("fchmodat2"), {3, 0, mode, 0}), errno_ret(EPERM));
        EXPECT_EQ(answer(nr("creat"), {0, mode}), errno_ret(EPERM));
        EXPECT_EQ(answer(nr("mknod"), {0, S_IFREG | mode}), errno_ret(EPERM));
        EXPECT_EQ(answer(nr("mknodat"), {3, 0, S_IFREG | mode}), errno_ret(EPERM));
        EXPECT_EQ(answer(nr("open"), {0, O_CREAT | O_WRONLY, mode}), errno_ret(EPERM));
        EXPECT_EQ(answer(nr("openat"), {3, 0, O_CREAT | O_WRONLY, mode}), errno_ret(EPERM));
        EXPECT_EQ(answer(nr("openat"), {3, 0, O_TMPFILE | O_WRONLY, mode}), errno_ret(EPERM));
        // Without O_CREAT/O_TMPFILE the mode argument is ignored by the kernel: garbage passes.
        EXPECT_NE(answer(nr("openat"), {3, 0, O_RDONLY, mode}), errno_ret(EPERM));
        EXPECT_NE(answer(nr("openat"), {3, 0, O_DIRECTORY, mode}), errno_ret(EPERM));
    }
    for (uint64_t mode : {0755ull, 01777ull, 0644ull}) {
        EXPECT_NE(answer(nr("chmod"), {0, mode}), errno_ret(EPERM)) << mode;
        EXPECT_NE(answer(nr("openat"), {3, 0, O_CREAT | O_WRONLY, mode}), errno_ret(EPERM));
    }
}

TEST_P(SeccompGuard, Openat2IsENOSYS) {
    EXPECT_EQ(answer(nr("openat2"), {3, 0, 0, 24}), errno_ret(ENOSYS));
}

TEST_P(SeccompGuard, PersonalityOnlyDockersValues) {
    for (uint64_t ok : {0x0ull, 0x8ull, 0x20000ull, 0x20008ull, 0xffffffffull})
        EXPECT_NE(answer(nr("personality"), {ok}), errno_ret(EPERM)) << ok;
    for (uint64_t bad : {0x0040000ull /* ADDR_NO_RANDOMIZE */, 0x1ull, 0x0400000ull})
        EXPECT_EQ(answer(nr("personality"), {bad}), errno_ret(EPERM)) << bad;
}

TEST_P(SeccompGuard, VsockAndAlgSocketsAreRefused) {
    EXPECT_EQ(answer(nr("socket"), {AF_VSOCK, SOCK_STREAM, 0}), errno_ret(EAFNOSUPPORT));
    EXPECT_EQ(answer(nr("socket"), {AF_ALG, SOCK_SEQPACKET, 0}), errno_ret(EAFNOSUPPORT));
    EXPECT_EQ(answer(nr("socket"), {0x100000000ull | AF_ALG, SOCK_SEQPACKET, 0}),
              errno_ret(EAFNOSUPPORT));
    EXPECT_EQ(answer(nr("socket"), {AF_INET, SOCK_STREAM, 0}), kAllow);
    EXPECT_EQ(answer(nr("socket"), {AF_UNIX, SOCK_STREAM, 0}), kAllow);
}

TEST_P(SeccompGuard, UnassignedNumbersAreENOSYS) {
    for (int number : {337, 400, 423, highest_x86_64_syscall() + 1, 1000, 0x3fffffff})
        EXPECT_EQ(answer(number), errno_ret(ENOSYS)) << number;
    EXPECT_EQ(answer(nr("getpid")), kAllow);
    EXPECT_EQ(answer(nr("uprobe")),
              std::string(GetParam()) == "strict" ? errno_ret(ENOSYS) : kAllow);
}

// Another ABI is the main filter's to kill, never the guard's to answer.
TEST_P(SeccompGuard, OtherAbisAreKilled) {
    seccomp_data x32 = call_of(0x40000000 | nr("chmod"), {0, 0755});
    EXPECT_EQ(run_bpf(program_, x32) & SECCOMP_RET_ACTION_FULL, SECCOMP_RET_KILL_PROCESS);
    seccomp_data i386 = call_of(15 /* i386 chmod */, {0, 0755});
    i386.arch = AUDIT_ARCH_I386;
    EXPECT_EQ(run_bpf(program_, i386) & SECCOMP_RET_ACTION_FULL, SECCOMP_RET_KILL_PROCESS);
}

INSTANTIATE_TEST_SUITE_P(Presets, SeccompGuard, ::testing::Values("default", "strict"));

// ---- strict: ENOSYS for what it does not know, EPERM for what it refuses on purpose -------------

TEST(SeccompStrict, UnlistedSyscallsAreENOSYSDeliberateDenialsEPERM) {
    auto program = program_of("strict");
    for (const char* name :
         {"io_setup", "cachestat", "statmount", "listmount", "mseal", "setxattrat", "getxattrat",
          "listxattrat", "removexattrat", "futex_wake", "futex_wait", "futex_requeue"}) {
        EXPECT_EQ(run_bpf(program, call_of(nr(name))), errno_ret(ENOSYS)) << name;
    }
    for (const char* name :
         {"mount", "ptrace", "bpf", "keyctl", "reboot", "mbind", "set_mempolicy", "migrate_pages",
          "move_pages", "lsm_set_self_attr", "open_tree_attr", "io_uring_setup", "unshare"}) {
        EXPECT_EQ(run_bpf(program, call_of(nr(name))), errno_ret(EPERM)) << name;
    }
    EXPECT_EQ(run_bpf(program, call_of(nr("futex_waitv"))), kAllow);
    EXPECT_EQ(run_bpf(program, call_of(nr("read"))), kAllow);
}

TEST(SeccompDefault, ClosesTheGapsToDockersProfile) {
    auto program = program_of("default");
    for (const char* name : {"mbind", "set_mempolicy", "migrate_pages", "move_pages",
                             "lsm_set_self_attr", "open_tree_attr"}) {
        EXPECT_EQ(run_bpf(program, call_of(nr(name))), errno_ret(EPERM)) << name;
    }
    for (const char* name : {"statmount", "listmount", "mseal", "get_mempolicy", "io_setup"})
        EXPECT_EQ(run_bpf(program, call_of(nr(name))), kAllow) << name;
}

// A policy may deny a syscall libseccomp 2.5 does not know by name.
TEST(SeccompDefault, DenyAcceptsSyscallsNewerThanLibseccomp) {
    SeccompSpec spec;
    spec.preset = "default";
    spec.deny = {"mseal", "statmount"};
    auto program = compile_seccomp(spec);
    ASSERT_TRUE(program.ok()) << program.error().describe();
    EXPECT_EQ(run_bpf(*program, call_of(462)), errno_ret(EPERM));
    EXPECT_EQ(run_bpf(*program, call_of(457)), errno_ret(EPERM));
}

// ---- the same, for real -------------------------------------------------------------------------

int run_filtered(const std::vector<sock_filter>& program, const std::function<int()>& probe) {
    pid_t pid = fork();
    if (pid == 0) {
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) _exit(200);
        if (install_seccomp_filter(program.data(), program.size()) != 0) _exit(201);
        _exit(probe());
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST_P(SeccompGuard, RealChmodOfOwnFileRefusesSetuidOnly) {
    char path[] = "/tmp/corral-guard-XXXXXX";
    int fd = mkstemp(path);
    ASSERT_GE(fd, 0);
    close(fd);
    EXPECT_EQ(run_filtered(program_, [&] { return chmod(path, 04755) == -1 && errno == EPERM; }),
              1);
    EXPECT_EQ(run_filtered(program_, [&] { return chmod(path, 0700) == 0; }), 1);
    struct stat st {};
    ASSERT_EQ(stat(path, &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0700u);
    unlink(path);
}

// The evaluator agrees with the kernel: the same calls, run for real under the same program.
TEST_P(SeccompGuard, EvaluatorAgreesWithTheKernel) {
    struct Case {
        int number;
        std::vector<uint64_t> args;
    };
    const std::vector<Case> cases = {{nr("getppid"), {}},
                                     {nr("personality"), {0xffffffff}},
                                     {nr("personality"), {ADDR_NO_RANDOMIZE}},
                                     {nr("socket"), {AF_ALG, SOCK_SEQPACKET, 0}},
                                     {nr("keyctl"), {0, 0, 0}},
                                     {nr("io_setup"), {0, 0}},
                                     {400, {}}};
    for (const Case& c : cases) {
        seccomp_data data = call_of(c.number);
        for (size_t i = 0; i < c.args.size(); ++i) data.args[i] = c.args[i];
        const uint32_t predicted = run_bpf(program_, data);
        if ((predicted & SECCOMP_RET_ACTION_FULL) != SECCOMP_RET_ERRNO &&
            predicted != SECCOMP_RET_ALLOW)
            continue;  // only answers a child can report back
        const int expected = predicted == SECCOMP_RET_ALLOW ? 0 : int(predicted & SECCOMP_RET_DATA);
        int got = run_filtered(program_, [&] {
            errno = 0;
            long r = ::syscall(c.number, data.args[0], data.args[1], data.args[2], data.args[3],
                               data.args[4], data.args[5]);
            if (expected == 0) return 0;  // allowed: whatever the kernel itself answers
            return r == -1 && errno == expected ? 0 : 1;
        });
        EXPECT_EQ(got, 0) << "syscall " << c.number << " predicted " << predicted;
    }
}

TEST(SeccompListing, NamesEverySyscallWithItsAnswer) {
    auto listing = list_seccomp(program_of("default"));
    auto find = [&](const std::string& name) -> const SyscallAnswer* {
        for (const auto& a : listing)
            if (a.name == name) return &a;
        return nullptr;
    };
    ASSERT_GT(listing.size(), 350u);
    EXPECT_TRUE(std::is_sorted(listing.begin(), listing.end(),
                               [](const auto& l, const auto& r) { return l.name < r.name; }));
    ASSERT_NE(find("read"), nullptr);
    EXPECT_EQ(find("read")->answer, "allow");
    EXPECT_EQ(find("read")->otherwise, "");
    ASSERT_NE(find("ptrace"), nullptr);
    EXPECT_EQ(find("ptrace")->answer, "EPERM");
    ASSERT_NE(find("openat2"), nullptr);
    EXPECT_EQ(find("openat2")->answer, "ENOSYS");
    ASSERT_NE(find("mseal"), nullptr) << "a syscall only the recent table names";
    ASSERT_NE(find("chmod"), nullptr);
    EXPECT_EQ(find("chmod")->answer, "allow");
    EXPECT_EQ(find("chmod")->otherwise, "EPERM") << "setuid modes";
    EXPECT_EQ(find("clone")->otherwise, "EPERM") << "CLONE_NEWUSER";
    EXPECT_EQ(find("socket")->otherwise, "EAFNOSUPPORT");
    auto strict = list_seccomp(program_of("strict"));
    for (const auto& a : strict) {
        if (a.name == "io_setup") {
            EXPECT_EQ(a.answer, "ENOSYS");
        }
    }
}

// allows_call decides whether a waiting child may install its filter before the rest of its way
// (isolation/launch_ahead.hpp): an answer that depends on an argument it does not know must not
// count as allowed, or the child would be refused a call of its own set-up under a policy whose
// guard conditions it (the setuid guard's openat with O_CREAT and a setuid mode).
TEST(SeccompListing, AllowsCallOnlyWhereNothingUnknownDecides) {
    const auto program = program_of("default");
    const int openat = resolve_syscall("openat");
    KnownCall read_only{openat, {std::nullopt, std::nullopt, uint64_t{O_RDONLY | O_CLOEXEC},
                                 uint64_t{0}}};
    EXPECT_TRUE(allows_call(program, read_only)) << "the guard looks at flags and mode only";
    KnownCall creating_setuid = read_only;
    creating_setuid.args[2] = uint64_t{O_CREAT | O_WRONLY};
    creating_setuid.args[3] = uint64_t{04755};
    EXPECT_FALSE(allows_call(program, creating_setuid)) << "refused by the guard";
    KnownCall flags_unknown = read_only;
    flags_unknown.args[2].reset();
    EXPECT_FALSE(allows_call(program, flags_unknown)) << "its answer depends on the flags";
    EXPECT_FALSE(allows_call(program, KnownCall{resolve_syscall("chmod")}))
        << "allowed for the zero mode, refused for a setuid one";
    EXPECT_TRUE(allows_call(program, KnownCall{resolve_syscall("setsid")}));
    EXPECT_FALSE(allows_call(program, KnownCall{resolve_syscall("mount")})) << "EPERM";
    SeccompSpec deny_setsid;
    deny_setsid.preset = "default";
    deny_setsid.deny = {"setsid"};
    auto denying = compile_seccomp(deny_setsid);
    ASSERT_TRUE(denying.ok()) << denying.error().describe();
    EXPECT_FALSE(allows_call(*denying, KnownCall{resolve_syscall("setsid")}));
}

}  // namespace
}  // namespace corral
