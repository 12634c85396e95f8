// The seccomp keys of a policy that this round added: `seccomp.ptrace` (none | own, issue 17.5),
// its cross-check against namespaces.pid, and the sanitizer-ci example built on it.

#include <gtest/gtest.h>

#include "isolation/confinement.hpp"
#include "isolation/seccomp_listing.hpp"
#include "policies/policy_parser.hpp"

namespace corral {
namespace {

PolicyParseResult parse(const std::string& yaml) {
    return parse_policy(yaml, "<test>");
}

std::string answer_for(const Policy& policy, const std::string& name) {
    auto program = compile_seccomp(policy.seccomp);
    EXPECT_TRUE(program.ok()) << program.error().describe();
    if (!program) return "";
    for (const SyscallAnswer& a : list_seccomp(*program))
        if (a.name == name) return a.answer;
    return "";
}

TEST(SeccompPolicy, PtraceDefaultsToNoneAndOwnParses) {
    auto plain = parse("extends: default\n");
    ASSERT_TRUE(plain.ok()) << plain.format_errors();
    EXPECT_FALSE(plain.policy->seccomp.ptrace_own);
    auto own = parse("name: tracing\nextends: default\nseccomp: { ptrace: own }\n");
    ASSERT_TRUE(own.ok()) << own.format_errors();
    EXPECT_TRUE(own.policy->seccomp.ptrace_own);
    // Round trip through `corral policy check`'s output.
    auto again = parse(policy_to_yaml(*own.policy));
    ASSERT_TRUE(again.ok()) << again.format_errors();
    EXPECT_TRUE(again.policy->seccomp.ptrace_own);
}

TEST(SeccompPolicy, PtraceValueTypoIsAnErrorNamingTheChoices) {
    auto bad = parse("extends: default\nseccomp: { ptrace: children }\n");
    ASSERT_FALSE(bad.ok());
    const std::string errors = bad.format_errors();
    EXPECT_NE(errors.find("seccomp.ptrace"), std::string::npos) << errors;
    EXPECT_NE(errors.find("own"), std::string::npos) << errors;
}

TEST(SeccompPolicy, PtraceOwnWithoutPidNamespaceIsRefused) {
    auto bad = parse("extends: default\nnamespaces: { pid: false }\nseccomp: { ptrace: own }\n");
    ASSERT_FALSE(bad.ok());
    const std::string errors = bad.format_errors();
    EXPECT_NE(errors.find("seccomp.ptrace"), std::string::npos) << errors;
    EXPECT_NE(errors.find("namespaces.pid: true"), std::string::npos) << errors;
}

TEST(SeccompPolicy, PtraceOwnOpensTracingOnlyAndDenyStillWins) {
    auto own = parse("extends: strict\nseccomp: { ptrace: own }\n");
    ASSERT_TRUE(own.ok()) << own.format_errors();
    for (const char* name : {"ptrace", "process_vm_readv", "process_vm_writev"})
        EXPECT_EQ(answer_for(*own.policy, name), "allow") << name;
    for (const char* name : {"perf_event_open", "kcmp", "pidfd_getfd", "bpf"})
        EXPECT_NE(answer_for(*own.policy, name), "allow") << name;
    auto denied = parse("extends: default\nseccomp: { ptrace: own, deny: [ptrace] }\n");
    ASSERT_TRUE(denied.ok()) << denied.format_errors();
    EXPECT_EQ(answer_for(*denied.policy, "ptrace"), "EPERM");
    EXPECT_EQ(answer_for(*denied.policy, "process_vm_readv"), "allow");
}

TEST(SeccompPolicy, SanitizerCiExampleTracesAndStaysStrict) {
    auto ci = parse_policy_file(CORRAL_SOURCE_DIR "/examples/policies/sanitizer-ci.yaml");
    ASSERT_TRUE(ci.ok()) << ci.format_errors();
    EXPECT_TRUE(ci.policy->seccomp.ptrace_own);
    EXPECT_EQ(ci.policy->seccomp.preset, "strict");
    EXPECT_TRUE(ci.policy->namespaces.pid);
    EXPECT_EQ(answer_for(*ci.policy, "ptrace"), "allow");
    EXPECT_EQ(answer_for(*ci.policy, "mount"), "EPERM");
}

}  // namespace
}  // namespace corral
