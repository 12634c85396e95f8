#include "isolation/seccomp.hpp"

#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <set>
#include <string>
#include <vector>

#include "base/unique_fd.hpp"
#include "isolation/confinement.hpp"
#include "isolation/seccomp_guard.hpp"
#include "isolation/seccomp_refusals.hpp"
#include "policies/syscall_groups.hpp"
#include "policies/syscall_numbers.hpp"

namespace corral {
namespace {

using NameSet = std::set<std::string>;

// Docker-default-like deny list of the "default" preset. Names and groups; expanded at compile
// time.
const std::vector<std::string> kDefaultDeny = {
    "@clock",
    "@cpu-emulation",
    "@debug",
    "@keyring",
    "@module",
    "@mount",
    "@namespaces",
    "@obsolete",
    "@raw-io",
    "@reboot",
    "@swap",
    "acct",
    "bpf",
    "fanotify_init",
    "io_uring_enter",
    "io_uring_register",
    "io_uring_setup",
    "lsm_set_self_attr",  // changes the LSM context of the caller (AppArmor/SELinux/Smack)
    // NUMA placement: Docker allows these only with CAP_SYS_NICE; they move other processes'
    // pages (migrate_pages, move_pages) and pin memory to nodes the host did not grant.
    "mbind",
    "migrate_pages",
    "move_pages",
    "name_to_handle_at",
    "open_by_handle_at",
    "quotactl",
    "quotactl_fd",
    "set_mempolicy",
    "set_mempolicy_home_node",
    "syslog",
    "userfaultfd",
    "vhangup",
};

// What `ptrace: own` opens: tracing (gdb, strace, LSan's stop-the-world tracer) and reading or
// writing a traced process's memory. The kernel still checks every attach (same uid, dumpable,
// capabilities a subset); the session's pid namespace keeps other sessions out of reach, and the
// holder and corrald's children before exec are non-dumpable. Since Linux 4.8 a tracer cannot
// take a tracee past its seccomp filter (the filter runs again after the tracer changed the call).
const std::vector<std::string> kPtraceOwn = {"process_vm_readv", "process_vm_writev", "ptrace"};

// Allow list of the "strict" preset.
const std::vector<std::string> kStrictAllow = {"@system-service"};

// Every CLONE_NEW* flag clone(2) accepts. CLONE_NEWTIME is left out: its bit (0x80) lies in the
// exit-signal byte of clone(2)'s flags and is only meaningful for unshare/clone3.
constexpr uint64_t kCloneNamespaceFlags[] = {CLONE_NEWNS,    CLONE_NEWUTS, CLONE_NEWIPC,
                                             CLONE_NEWUSER,  CLONE_NEWPID, CLONE_NEWNET,
                                             CLONE_NEWCGROUP};

/// Owns a libseccomp filter context.
class SeccompContext {
  public:
    explicit SeccompContext(uint32_t default_action) : ctx_(seccomp_init(default_action)) {}
    ~SeccompContext() {
        if (ctx_ != nullptr) seccomp_release(ctx_);
    }
    SeccompContext(const SeccompContext&) = delete;
    SeccompContext& operator=(const SeccompContext&) = delete;
    scmp_filter_ctx get() const { return ctx_; }

  private:
    scmp_filter_ctx ctx_;
};

// Expands a policy list (names and @groups) and checks each plain name is a syscall libseccomp
// knows. `key` names the policy field for the error ("seccomp.deny").
Result<NameSet> expand_checked(const std::vector<std::string>& names, const std::string& key) {
    auto expanded = expand_syscalls(names);
    if (!expanded) return std::move(expanded.error().context(key));
    for (const std::string& name : *expanded) {
        if (seccomp_syscall_resolve_name(name.c_str()) == __NR_SCMP_ERROR &&
            recent_x86_64_syscall(name) < 0) {
            return plain_error(key + ": unknown syscall `" + name + "`");
        }
    }
    return NameSet(expanded->begin(), expanded->end());
}

// The policy's action, marked (seccomp_refusals.hpp): errno and log answers are counted.
Result<uint32_t> policy_action(const SeccompSpec& spec) {
    switch (spec.action) {
        case SeccompAction::errno_code:
            if (spec.errno_value < 0 || spec.errno_value > 4095) {
                return plain_error("seccomp.errno: " + std::to_string(spec.errno_value) +
                                   " is outside 0..4095");
            }
            return refusal_mark(static_cast<uint16_t>(spec.errno_value));
        case SeccompAction::kill_process:
            return SCMP_ACT_KILL_PROCESS;  // not counted: the kernel kills at once
        case SeccompAction::log:
            return SCMP_ACT_TRACE(kLoggedData);
    }
    return plain_error("seccomp.action: unknown action");
}

// Adds one rule unless it would repeat the default action (libseccomp refuses those, and they
// change nothing). Names that exist for libseccomp but not on this architecture (a group member
// from another ABI) cannot be called here, so there is nothing to filter.
Status add_rule(const SeccompContext& ctx, uint32_t default_action, uint32_t action,
                const std::string& name, unsigned arg_count = 0,
                const scmp_arg_cmp* args = nullptr) {
    if (action == default_action) return {};
    int nr = resolve_syscall(name);
    if (nr < 0) return {};
    int rc = seccomp_rule_add_array(ctx.get(), action, nr, arg_count, args);
    if (rc < 0) return sys_error(-rc, "seccomp rule for `" + name + "`");
    return {};
}

// clone with any CLONE_NEW* flag gets `action`; clone3 gets ENOSYS so libc falls back to clone
// (unless `with_clone3` is false: strict's allow rules answer clone3 themselves).
Status deny_clone_namespaces(const SeccompContext& ctx, uint32_t default_action, uint32_t action,
                             const NameSet& deny, bool with_clone3 = true) {
    if (deny.count("clone") == 0) {
        for (uint64_t flag : kCloneNamespaceFlags) {
            scmp_arg_cmp has_flag = SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag);
            CORRAL_TRY(add_rule(ctx, default_action, action, "clone", 1, &has_flag), "namespaces");
        }
    }
    if (with_clone3 && deny.count("clone3") == 0) {
        CORRAL_TRY(add_rule(ctx, default_action, SCMP_ACT_ERRNO(ENOSYS), "clone3"), "namespaces");
    }
    return {};
}

// `deny` gets the policy action. Preset "default" and "none" allow everything else; "strict"
// calls this for the syscalls it denies on purpose (its default answers the rest).
Status add_deny_rules(const SeccompContext& ctx, uint32_t default_action, uint32_t action,
                      const NameSet& deny) {
    for (const std::string& name : deny) {
        CORRAL_TRY(add_rule(ctx, default_action, action, name), "seccomp.deny");
    }
    if (deny.count("unshare") != 0) {
        const bool allow_by_default = default_action == SCMP_ACT_ALLOW;
        CORRAL_TRY(deny_clone_namespaces(ctx, default_action, action, deny, allow_by_default),
                   "seccomp.deny");
    }
    return {};
}

// Preset "strict": `action` (its default action) for everything but `allowed`. Without unshare,
// clone is allowed only without CLONE_NEW* flags and clone3 answers ENOSYS.
Status add_allow_rules(const SeccompContext& ctx, uint32_t action, const NameSet& allowed) {
    const bool namespaces_allowed = allowed.count("unshare") != 0;
    for (const std::string& name : allowed) {
        if (!namespaces_allowed && (name == "clone" || name == "clone3")) continue;
        CORRAL_TRY(add_rule(ctx, action, SCMP_ACT_ALLOW, name), "seccomp.allow");
    }
    if (namespaces_allowed) return {};
    if (allowed.count("clone") != 0) {
        uint64_t mask = 0;
        for (uint64_t flag : kCloneNamespaceFlags) mask |= flag;
        scmp_arg_cmp no_flags = SCMP_A0(SCMP_CMP_MASKED_EQ, mask, 0);
        CORRAL_TRY(add_rule(ctx, action, SCMP_ACT_ALLOW, "clone", 1, &no_flags), "seccomp.allow");
    }
    if (allowed.count("clone3") != 0) {
        CORRAL_TRY(add_rule(ctx, action, SCMP_ACT_ERRNO(ENOSYS), "clone3"), "seccomp.allow");
    }
    return {};
}

// Exports the context's BPF through a memfd (libseccomp 2.5 exports only to a file descriptor).
Result<std::vector<sock_filter>> export_bpf(const SeccompContext& ctx) {
    UniqueFd memfd(memfd_create("corral-seccomp", MFD_CLOEXEC));
    if (!memfd) return sys_error("memfd_create for the seccomp program");
    int rc = seccomp_export_bpf(ctx.get(), memfd.get());
    if (rc < 0) return sys_error(-rc, "seccomp_export_bpf");
    off_t size = lseek(memfd.get(), 0, SEEK_END);
    if (size < 0 || size % sizeof(sock_filter) != 0) {
        return plain_error("seccomp_export_bpf produced " + std::to_string(size) + " bytes");
    }
    std::vector<sock_filter> program(static_cast<size_t>(size) / sizeof(sock_filter));
    ssize_t got = pread(memfd.get(), program.data(), static_cast<size_t>(size), 0);
    if (got != size) return sys_error("read back the seccomp program");
    return program;
}

// What strict answers for a syscall it neither allows nor denies on purpose. With the errno action
// that is ENOSYS, as if the kernel did not have it: programs probe newer calls (io_setup,
// futex_waitv, cachestat, statmount, mseal, the *xattrat calls) and fall back on ENOSYS, while
// EPERM makes them fail. Docker answers syscalls its profile does not know the same way.
// It is a refusal by policy, so it is marked and counted.
uint32_t strict_default_action(const SeccompSpec& spec, uint32_t action) {
    return spec.action == SeccompAction::errno_code ? refusal_mark(ENOSYS) : action;
}

Status add_strict_rules(const SeccompContext& ctx, uint32_t default_action, uint32_t action,
                        const NameSet& allow, const NameSet& deny, const NameSet& preset_deny) {
    auto allowed = expand_checked(kStrictAllow, "seccomp.preset");
    if (!allowed) return std::move(allowed.error());
    // strict is default tightened: what default denies stays denied unless `allow` names it.
    for (const std::string& name : preset_deny) {
        if (allow.count(name) == 0) allowed->erase(name);
    }
    allowed->insert(allow.begin(), allow.end());
    for (const std::string& name : deny) allowed->erase(name);
    CORRAL_TRY(add_allow_rules(ctx, default_action, *allowed), "seccomp");

    NameSet deliberate = deny;
    for (const std::string& name : preset_deny) {
        if (allowed->count(name) == 0) deliberate.insert(name);
    }
    return add_deny_rules(ctx, default_action, action, deliberate);
}

Result<std::vector<sock_filter>> build(const SeccompSpec& spec, uint32_t action) {
    auto deny = expand_checked(spec.deny, "seccomp.deny");
    if (!deny) return std::move(deny.error());
    auto allow = expand_checked(spec.allow, "seccomp.allow");
    if (!allow) return std::move(allow.error());
    if (spec.ptrace_own) allow->insert(kPtraceOwn.begin(), kPtraceOwn.end());
    auto preset_deny = expand_checked(kDefaultDeny, "seccomp.preset");
    if (!preset_deny) return std::move(preset_deny.error());

    const bool strict = spec.preset == "strict";
    const uint32_t default_action = strict ? strict_default_action(spec, action) : SCMP_ACT_ALLOW;
    SeccompContext ctx(default_action);
    if (ctx.get() == nullptr) return plain_error("seccomp_init failed");
    seccomp_attr_set(ctx.get(), SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
    seccomp_attr_set(ctx.get(), SCMP_FLTATR_CTL_OPTIMIZE, 2);  // binary tree: long allow lists

    if (strict) {
        CORRAL_TRY(add_strict_rules(ctx, default_action, action, *allow, *deny, *preset_deny),
                   "seccomp");
    } else {
        NameSet effective_deny = *deny;
        if (spec.preset == "default") {
            for (const std::string& name : *preset_deny) {
                if (allow->count(name) == 0) effective_deny.insert(name);
            }
        }
        CORRAL_TRY(add_deny_rules(ctx, SCMP_ACT_ALLOW, action, effective_deny), "seccomp");
    }
    auto program = export_bpf(ctx);
    if (!program || spec.preset == "none") return program;
    // default and strict: the guard runs first (setuid bits, openat2, personality, socket
    // families, unassigned numbers); see isolation/seccomp_guard.hpp.
    auto guard = compile_seccomp_guard(spec.ptrace_own);
    if (!guard) return std::move(guard.error());
    guard->insert(guard->end(), program->begin(), program->end());
    return std::move(*guard);
}

}  // namespace

Result<std::vector<sock_filter>> compile_seccomp(const SeccompSpec& spec) {
    auto marked = compile_marked_seccomp(spec);
    if (!marked) return std::move(marked.error());
    return without_listener(*marked);
}

bool compiles_to_no_filter(const SeccompSpec& spec) {
    return spec.preset == "none" && spec.deny.empty();
}

Result<std::vector<sock_filter>> compile_marked_seccomp(const SeccompSpec& spec) {
    if (spec.preset != "default" && spec.preset != "strict" && spec.preset != "none") {
        return plain_error("seccomp.preset: unknown preset `" + spec.preset +
                           "` (expected default, strict or none)");
    }
    auto action = policy_action(spec);
    if (!action) return std::move(action.error());
    if (compiles_to_no_filter(spec)) {
        // Still validate `allow`, so a typo is reported even where it has no effect.
        auto allow = expand_checked(spec.allow, "seccomp.allow");
        if (!allow) return std::move(allow.error());
        return std::vector<sock_filter>{};
    }
    return build(spec, *action);
}

int resolve_syscall(std::string_view name) {
    const std::string text(name);
    int nr = seccomp_syscall_resolve_name(text.c_str());
    if (nr >= 0) return nr;
    if (nr == __NR_SCMP_ERROR) return recent_x86_64_syscall(name);
    return -1;  // a name libseccomp knows for other architectures only
}

bool seccomp_available() {
    uint32_t kill_process = SECCOMP_RET_KILL_PROCESS;
    return syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &kill_process) == 0;
}

int install_seccomp_filter(const sock_filter* program, size_t length, bool new_listener) {
    sock_fprog fprog{};
    fprog.len = static_cast<unsigned short>(length);
    fprog.filter = const_cast<sock_filter*>(program);
    const unsigned flags = new_listener ? SECCOMP_FILTER_FLAG_NEW_LISTENER : 0;
    return static_cast<int>(syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &fprog));
}

}  // namespace corral
