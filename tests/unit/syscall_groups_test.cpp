// The syscall group table (policies/syscall_groups.hpp): sorted, every member a real x86_64
// syscall known to the libseccomp we link, every include a real group, and expansion behaviour.

#include "policies/syscall_groups.hpp"

#include "isolation/seccomp.hpp"

#include <gtest/gtest.h>
#include <seccomp.h>

#include <algorithm>
#include <string>
#include <vector>

namespace corral {
namespace {

std::vector<std::string> words_of(std::string_view text) {
    std::vector<std::string> words;
    size_t pos = 0;
    while ((pos = text.find_first_not_of(' ', pos)) != std::string_view::npos) {
        size_t end = std::min(text.find(' ', pos), text.size());
        words.emplace_back(text.substr(pos, end - pos));
        pos = end;
    }
    return words;
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
    return std::find(v.begin(), v.end(), s) != v.end();
}

TEST(SyscallGroups, TableIsSortedAndUnique) {
    auto groups = syscall_groups();
    ASSERT_FALSE(groups.empty());
    for (size_t i = 1; i < groups.size(); ++i) {
        EXPECT_LT(groups[i - 1].name, groups[i].name) << "table out of order at " << groups[i].name;
    }
}

TEST(SyscallGroups, EveryGroupHasHelpAndAtName) {
    for (const auto& g : syscall_groups()) {
        EXPECT_EQ(g.name.substr(0, 1), "@") << g.name;
        EXPECT_FALSE(g.help.empty()) << g.name;
        EXPECT_FALSE(g.syscalls.empty()) << g.name;
    }
}

// The table is defined as x86_64 names (filters are native-arch only and corral builds for x86_64).
// A name that libseccomp cannot resolve for x86_64 is a typo or another architecture's syscall.
TEST(SyscallGroups, EveryMemberResolvesOnX86_64) {
    for (const auto& g : syscall_groups()) {
        for (const auto& word : words_of(g.syscalls)) {
            if (word[0] == '@') continue;
            // libseccomp's x86_64 table, or the recent-syscall table for calls newer than it.
            int nr = seccomp_syscall_resolve_name_arch(SCMP_ARCH_X86_64, word.c_str());
            if (nr < 0) nr = resolve_syscall(word);
            EXPECT_GE(nr, 0) << g.name << ": `" << word << "` is not an x86_64 syscall";
        }
    }
}

TEST(SyscallGroups, EveryMemberResolvesOnNativeArch) {
    if (seccomp_arch_native() != SCMP_ARCH_X86_64) GTEST_SKIP() << "table is defined for x86_64";
    for (const auto& g : syscall_groups()) {
        for (const auto& word : words_of(g.syscalls)) {
            if (word[0] == '@') continue;
            EXPECT_GE(resolve_syscall(word), 0) << g.name << ": " << word;
        }
    }
}

TEST(SyscallGroups, EveryIncludeNamesAnExistingOtherGroup) {
    for (const auto& g : syscall_groups()) {
        for (const auto& word : words_of(g.syscalls)) {
            if (word[0] != '@') continue;
            EXPECT_NE(find_syscall_group(word), nullptr) << g.name << " includes unknown " << word;
            EXPECT_NE(word, g.name) << g.name << " includes itself";
        }
    }
}

TEST(SyscallGroups, FindReturnsGroupOrNull) {
    const SyscallGroup* mount = find_syscall_group("@mount");
    ASSERT_NE(mount, nullptr);
    EXPECT_EQ(mount->name, "@mount");
    EXPECT_EQ(find_syscall_group("@no-such-group"), nullptr);
    EXPECT_EQ(find_syscall_group("mount"), nullptr);
}

TEST(SyscallGroups, ExpandResolvesIncludesRecursively) {
    auto expanded = expand_syscalls({"@system-service"});
    ASSERT_TRUE(expanded.ok()) << expanded.error().describe();
    // From directly included groups and from @default (included by @system-service).
    EXPECT_TRUE(contains(*expanded, "read"));
    EXPECT_TRUE(contains(*expanded, "execve"));
    EXPECT_TRUE(contains(*expanded, "exit_group"));
    EXPECT_TRUE(contains(*expanded, "uname"));
    EXPECT_FALSE(contains(*expanded, "mount"));
    EXPECT_FALSE(contains(*expanded, "ptrace"));
    for (const auto& name : *expanded) EXPECT_NE(name[0], '@') << name;
}

TEST(SyscallGroups, ExpandIsSortedDeduplicatedAndKeepsPlainNames) {
    auto expanded = expand_syscalls({"umount2", "@mount", "ptrace", "@mount"});
    ASSERT_TRUE(expanded.ok()) << expanded.error().describe();
    EXPECT_TRUE(std::is_sorted(expanded->begin(), expanded->end()));
    EXPECT_EQ(std::adjacent_find(expanded->begin(), expanded->end()), expanded->end());
    EXPECT_TRUE(contains(*expanded, "ptrace"));
    EXPECT_TRUE(contains(*expanded, "pivot_root"));
    EXPECT_EQ(std::count(expanded->begin(), expanded->end(), "umount2"), 1);
}

TEST(SyscallGroups, PrivilegedIncludesNestedGroups) {
    auto expanded = expand_syscalls({"@privileged"});
    ASSERT_TRUE(expanded.ok());
    EXPECT_TRUE(contains(*expanded, "reboot"));       // via @reboot
    EXPECT_TRUE(contains(*expanded, "init_module"));  // via @module
    EXPECT_TRUE(contains(*expanded, "fchownat"));     // via @chown
}

TEST(SyscallGroups, UnknownGroupIsAnErrorNamingIt) {
    auto expanded = expand_syscalls({"read", "@bogus-group"});
    ASSERT_FALSE(expanded.ok());
    EXPECT_NE(expanded.error().message.find("@bogus-group"), std::string::npos)
        << expanded.error().message;
}

TEST(SyscallGroups, EmptyInputExpandsToEmpty) {
    auto expanded = expand_syscalls({});
    ASSERT_TRUE(expanded.ok());
    EXPECT_TRUE(expanded->empty());
}

}  // namespace
}  // namespace corral
