#include "isolation/seccomp_listing.hpp"

#include <linux/audit.h>
#include <seccomp.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>

#include "base/error.hpp"
#include "policies/syscall_numbers.hpp"

namespace corral {
namespace {

constexpr uint32_t kInvalid = SECCOMP_RET_KILL_PROCESS;

/// Loads 32 bits of seccomp_data at `offset`, as the kernel does (aligned, in bounds), noting the
/// word loaded in `loaded` (bit offset / 4).
bool load(const seccomp_data& call, uint32_t offset, uint32_t& out, uint32_t& loaded) {
    if (offset % 4 != 0 || offset + 4 > sizeof call) return false;
    loaded |= uint32_t{1} << (offset / 4);
    std::memcpy(&out, reinterpret_cast<const unsigned char*>(&call) + offset, 4);
    return true;
}

bool alu(uint16_t op, uint32_t& a, uint32_t operand) {
    switch (op) {
        case BPF_ADD:
            a += operand;
            return true;
        case BPF_SUB:
            a -= operand;
            return true;
        case BPF_MUL:
            a *= operand;
            return true;
        case BPF_DIV:
            if (operand == 0) return false;
            a /= operand;
            return true;
        case BPF_MOD:
            if (operand == 0) return false;
            a %= operand;
            return true;
        case BPF_AND:
            a &= operand;
            return true;
        case BPF_OR:
            a |= operand;
            return true;
        case BPF_XOR:
            a ^= operand;
            return true;
        case BPF_LSH:
            a = operand < 32 ? a << operand : 0;
            return true;
        case BPF_RSH:
            a = operand < 32 ? a >> operand : 0;
            return true;
        case BPF_NEG:
            a = 0 - a;
            return true;
        default:
            return false;
    }
}

bool jump_taken(uint16_t op, uint32_t a, uint32_t operand) {
    switch (op) {
        case BPF_JEQ:
            return a == operand;
        case BPF_JGT:
            return a > operand;
        case BPF_JGE:
            return a >= operand;
        case BPF_JSET:
            return (a & operand) != 0;
        default:
            return false;
    }
}

/// Argument values that flip the answers of the filters corral builds: zero, everything set,
/// the setuid/setgid mode bits, O_CREAT/O_TMPFILE, CLONE_NEWUSER, AF_VSOCK/AF_ALG,
/// ADDR_NO_RANDOMIZE.
constexpr uint64_t kArgumentProbes[] = {~0ull,
                                        04000,
                                        02000,
                                        0100 /* O_CREAT */,
                                        020200000 /* O_TMPFILE */,
                                        0x10000000 /* CLONE_NEWUSER */,
                                        40 /* AF_VSOCK */,
                                        38 /* AF_ALG */,
                                        0x0040000};

}  // namespace

std::string syscall_name_of(int nr) {
    if (char* name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_X86_64, nr)) {
        std::string text(name);
        std::free(name);
        return text;
    }
    for (const SyscallNumber& s : recent_x86_64_syscalls())
        if (s.number == nr) return std::string(s.name);
    return "";
}

namespace {

uint32_t run_program(const std::vector<sock_filter>& program, const seccomp_data& call,
                     uint32_t& loaded) {
    uint32_t a = 0, x = 0, mem[BPF_MEMWORDS] = {};
    for (size_t pc = 0; pc < program.size(); ++pc) {
        const sock_filter& in = program[pc];
        const uint32_t operand = BPF_SRC(in.code) == BPF_X ? x : in.k;
        switch (BPF_CLASS(in.code)) {
            case BPF_LD:
                if (BPF_MODE(in.code) == BPF_ABS) {
                    if (!load(call, in.k, a, loaded)) return kInvalid;
                } else if (BPF_MODE(in.code) == BPF_IMM) {
                    a = in.k;
                } else if (BPF_MODE(in.code) == BPF_MEM && in.k < BPF_MEMWORDS) {
                    a = mem[in.k];
                } else if (BPF_MODE(in.code) == BPF_LEN) {
                    a = sizeof call;
                } else {
                    return kInvalid;
                }
                break;
            case BPF_LDX:
                if (BPF_MODE(in.code) == BPF_IMM) {
                    x = in.k;
                } else if (BPF_MODE(in.code) == BPF_MEM && in.k < BPF_MEMWORDS) {
                    x = mem[in.k];
                } else if (BPF_MODE(in.code) == BPF_LEN) {
                    x = sizeof call;
                } else {
                    return kInvalid;
                }
                break;
            case BPF_ST:
                if (in.k >= BPF_MEMWORDS) return kInvalid;
                mem[in.k] = a;
                break;
            case BPF_STX:
                if (in.k >= BPF_MEMWORDS) return kInvalid;
                mem[in.k] = x;
                break;
            case BPF_ALU:
                if (!alu(BPF_OP(in.code), a, operand)) return kInvalid;
                break;
            case BPF_JMP:
                if (BPF_OP(in.code) == BPF_JA) {
                    pc += in.k;
                } else {
                    pc += jump_taken(BPF_OP(in.code), a, operand) ? in.jt : in.jf;
                }
                break;
            case BPF_RET:
                return BPF_RVAL(in.code) == BPF_A ? a : in.k;
            case BPF_MISC:
                if (BPF_MISCOP(in.code) == BPF_TAX) {
                    x = a;
                } else {
                    a = x;
                }
                break;
            default:
                return kInvalid;
        }
    }
    return kInvalid;  // ran off the end: the kernel refuses such a program
}

}  // namespace

uint32_t evaluate_seccomp(const std::vector<sock_filter>& program, const seccomp_data& call) {
    uint32_t loaded = 0;
    return run_program(program, call, loaded);
}

// As the kernel's own check for its cache of always-allowed calls (seccomp_is_const_allow), with
// some arguments known: the program's way for this call loads nothing but the number, the
// architecture and the known arguments, so no other value can change its answer.
bool allows_call(const std::vector<sock_filter>& program, const KnownCall& known) {
    seccomp_data call{};
    call.nr = known.nr;
    call.arch = AUDIT_ARCH_X86_64;
    uint32_t may_load = (uint32_t{1} << (offsetof(seccomp_data, nr) / 4)) |
                        (uint32_t{1} << (offsetof(seccomp_data, arch) / 4));
    for (size_t i = 0; i < known.args.size(); ++i) {
        if (!known.args[i]) continue;
        call.args[i] = *known.args[i];
        const size_t word = (offsetof(seccomp_data, args) + i * sizeof(uint64_t)) / 4;
        may_load |= (uint32_t{1} << word) | (uint32_t{1} << (word + 1));
    }
    uint32_t loaded = 0;
    const uint32_t answer = run_program(program, call, loaded);
    return (loaded & ~may_load) == 0 && (answer & SECCOMP_RET_ACTION_FULL) == SECCOMP_RET_ALLOW;
}

std::string describe_seccomp_answer(uint32_t ret) {
    switch (ret & SECCOMP_RET_ACTION_FULL) {
        case SECCOMP_RET_ALLOW:
            return "allow";
        case SECCOMP_RET_KILL_PROCESS:
            return "kill-process";
        case SECCOMP_RET_KILL_THREAD:
            return "kill-thread";
        case SECCOMP_RET_TRAP:
            return "trap";
        case SECCOMP_RET_LOG:
            return "log";
        case SECCOMP_RET_TRACE:
            return "trace";
        case SECCOMP_RET_USER_NOTIF:
            return "user-notif";
        case SECCOMP_RET_ERRNO:
            return errno_name(static_cast<int>(ret & SECCOMP_RET_DATA));
        default:
            return "unknown";
    }
}

std::vector<SyscallAnswer> list_seccomp(const std::vector<sock_filter>& program) {
    std::vector<SyscallAnswer> answers;
    for (int nr = 0; nr <= highest_x86_64_syscall(); ++nr) {
        std::string name = syscall_name_of(nr);
        if (name.empty()) continue;
        seccomp_data call{};
        call.nr = nr;
        call.arch = AUDIT_ARCH_X86_64;
        const uint32_t plain = evaluate_seccomp(program, call);
        SyscallAnswer answer{std::move(name), nr, describe_seccomp_answer(plain), ""};
        for (int arg = 0; arg < 6 && answer.otherwise.empty(); ++arg) {
            for (uint64_t value : kArgumentProbes) {
                seccomp_data probe = call;
                probe.args[arg] = value;
                const uint32_t other = evaluate_seccomp(program, probe);
                if (other != plain) {
                    answer.otherwise = describe_seccomp_answer(other);
                    break;
                }
            }
        }
        answers.push_back(std::move(answer));
    }
    std::sort(answers.begin(), answers.end(),
              [](const SyscallAnswer& l, const SyscallAnswer& r) { return l.name < r.name; });
    return answers;
}

}  // namespace corral
