#pragma once
// What a compiled seccomp program answers, by syscall name: `corral policy seccomp NAME --list`.
// The listing runs the very program the kernel would get (a classic BPF evaluator over
// seccomp_data), so it shows what is enforced, not what the policy meant.

#include <linux/filter.h>
#include <linux/seccomp.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace corral {

/// One syscall's answer under a program.
struct SyscallAnswer {
    std::string name;  ///< "chmod"
    int number = -1;   ///< x86_64 number
    std::string
        answer;  ///< with all arguments 0: "allow", "EPERM", "ENOSYS", "kill-process", "log", ...
    std::string otherwise;  ///< a different answer some argument values get ("" if none)
};

/// Runs `program` over one call and returns its SECCOMP_RET_* value. Supports the classic BPF
/// instructions seccomp accepts (ld/ldx/st/stx, alu, jumps, ret, tax/txa); an invalid program
/// answers SECCOMP_RET_KILL_PROCESS.
uint32_t evaluate_seccomp(const std::vector<sock_filter>& program, const seccomp_data& call);

/// An x86_64 system call of which some arguments are known; the others may be anything.
struct KnownCall {
    int nr = -1;
    std::array<std::optional<uint64_t>, 6> args{};
};

/// Whether `program` allows `call` whatever its unknown arguments and instruction pointer are:
/// its way for the call loads nothing else, and ends in SECCOMP_RET_ALLOW.
bool allows_call(const std::vector<sock_filter>& program, const KnownCall& call);

/// The name of an x86_64 syscall number (libseccomp, then the recent-syscall table); "" when
/// neither names it.
std::string syscall_name_of(int nr);

/// "allow", "EPERM" (errno name), "kill-process", "kill-thread", "trap", "log", "trace",
/// "user-notif" for a SECCOMP_RET_* value.
std::string describe_seccomp_answer(uint32_t ret);

/// The answer of `program` for every named x86_64 syscall, sorted by name. `otherwise` is filled
/// when other argument values (set bits, mode bits, flags) change the answer.
std::vector<SyscallAnswer> list_seccomp(const std::vector<sock_filter>& program);

}  // namespace corral
