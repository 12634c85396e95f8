#include "isolation/seccomp_guard.hpp"

#include <fcntl.h>
#include <linux/audit.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <sys/personality.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <string>

#include "isolation/seccomp.hpp"
#include "isolation/seccomp_refusals.hpp"
#include "policies/syscall_numbers.hpp"

namespace corral {
namespace {

// Docker's allowed personality(2) arguments (moby profiles/seccomp/default.json).
constexpr uint32_t kAllowedPersonalities[] = {0x0, 0x8, 0x20000, 0x20008, 0xffffffff};
constexpr uint32_t kSetIdBits = S_ISUID | S_ISGID;
constexpr uint32_t kX32Bit = 0x40000000;

/// Byte offset of the low 32 bits of argument `i` in struct seccomp_data (little-endian).
constexpr uint32_t arg_low(int i) {
    return offsetof(seccomp_data, args) + 8 * static_cast<uint32_t>(i);
}

/// A forward-only classic BPF assembler with labels, so the guard reads as a list of checks
/// instead of hand-counted jump offsets. Conditional jumps reach at most 255 instructions ahead;
/// finish() refuses a program where a label is farther.
class BpfAssembler {
  public:
    using Label = int;
    static constexpr Label kNext = -1;  ///< fall through to the next instruction

    Label label() {
        bound_.push_back(-1);
        return static_cast<Label>(bound_.size() - 1);
    }
    void bind(Label l) { bound_[static_cast<size_t>(l)] = static_cast<int>(code_.size()); }
    void load(uint32_t offset) { emit(BPF_LD | BPF_W | BPF_ABS, offset); }
    void and_k(uint32_t k) { emit(BPF_ALU | BPF_AND | BPF_K, k); }
    void ret(uint32_t k) { emit(BPF_RET | BPF_K, k); }
    /// if (A <op> k) goto yes; else goto no. op: BPF_JEQ, BPF_JGT, BPF_JGE, BPF_JSET.
    void jump_if(uint16_t op, uint32_t k, Label yes, Label no) {
        fixups_.push_back({code_.size(), yes, no});
        emit(BPF_JMP | op | BPF_K, k);
    }
    void jump(Label to) {
        fixups_.push_back({code_.size(), to, kNext, true});
        emit(BPF_JMP | BPF_JA, 0);
    }

    Result<std::vector<sock_filter>> finish() {
        for (const Fixup& f : fixups_) {
            auto yes = offset(f.at, f.yes);
            auto no = offset(f.at, f.no);
            if (!yes || !no) return plain_error("seccomp guard: jump to an unbound label");
            if (f.always) {
                code_[f.at].k = *yes;  // `ja` takes a 32-bit offset
                continue;
            }
            if (*yes > 255 || *no > 255)
                return plain_error("seccomp guard: a jump reaches too far");
            code_[f.at].jt = static_cast<uint8_t>(*yes);
            code_[f.at].jf = static_cast<uint8_t>(*no);
        }
        return code_;
    }

  private:
    struct Fixup {
        size_t at;
        Label yes;
        Label no;
        bool always = false;
    };
    void emit(uint16_t code, uint32_t k) { code_.push_back(sock_filter{code, 0, 0, k}); }
    Result<uint32_t> offset(size_t at, Label l) const {
        if (l == kNext) return 0u;
        int target = bound_[static_cast<size_t>(l)];
        if (target <= static_cast<int>(at)) return plain_error("unbound or backward label");
        return static_cast<uint32_t>(target - static_cast<int>(at) - 1);
    }

    std::vector<sock_filter> code_;
    std::vector<int> bound_;
    std::vector<Fixup> fixups_;
};

bool libseccomp_names(int nr) {
    char* name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_X86_64, nr);
    if (name == nullptr) return false;
    std::free(name);
    return true;
}

bool recent_table_names(int nr) {
    for (const SyscallNumber& s : recent_x86_64_syscalls())
        if (s.number == nr) return true;
    return false;
}

Result<uint32_t> number_of(const char* name) {
    int nr = resolve_syscall(name);
    if (nr < 0) return plain_error(std::string("seccomp guard: `") + name + "` has no number");
    return static_cast<uint32_t>(nr);
}

/// A syscall whose mode argument must not carry S_ISUID/S_ISGID.
struct ModeCheck {
    const char* name;
    int mode_arg;
};
constexpr ModeCheck kModeChecks[] = {{"chmod", 1}, {"fchmod", 1}, {"fchmodat", 2}, {"fchmodat2", 2},
                                     {"creat", 1}, {"mknod", 1},  {"mknodat", 2}};

/// An open that creates a file when its flags carry O_CREAT or O_TMPFILE.
struct OpenCheck {
    const char* name;
    int flags_arg;
    int mode_arg;
};
constexpr OpenCheck kOpenChecks[] = {{"open", 1, 2}, {"openat", 2, 3}};

}  // namespace

std::vector<SyscallRange> unassigned_syscall_ranges() {
    std::vector<SyscallRange> ranges;
    for (int nr = 0; nr <= highest_x86_64_syscall(); ++nr) {
        if (libseccomp_names(nr) || recent_table_names(nr)) continue;
        if (!ranges.empty() && ranges.back().last == nr - 1) {
            ranges.back().last = nr;
        } else {
            ranges.push_back({nr, nr});
        }
    }
    return ranges;
}

Result<std::vector<sock_filter>> compile_seccomp_guard(bool debuggers) {
    if (seccomp_arch_native() != SCMP_ARCH_X86_64)
        return plain_error("seccomp guard: written for x86_64 only");
    BpfAssembler a;
    const auto carry_on = a.label();  // the main filter decides
    const auto enosys = a.label();
    const auto eperm = a.label();
    const auto no_family = a.label();

    // Another ABI: the main filter kills it (SCMP_FLTATR_ACT_BADARCH, and libseccomp's x32 check).
    a.load(offsetof(seccomp_data, arch));
    a.jump_if(BPF_JEQ, AUDIT_ARCH_X86_64, BpfAssembler::kNext, carry_on);
    a.load(offsetof(seccomp_data, nr));
    a.jump_if(BPF_JGE, kX32Bit, carry_on, BpfAssembler::kNext);
    a.jump_if(BPF_JGT, static_cast<uint32_t>(highest_x86_64_syscall()), enosys,
              BpfAssembler::kNext);
    for (const SyscallRange& hole : unassigned_syscall_ranges()) {
        auto past = a.label();
        a.jump_if(BPF_JGE, static_cast<uint32_t>(hole.first), BpfAssembler::kNext, past);
        a.jump_if(BPF_JGT, static_cast<uint32_t>(hole.last), past, enosys);
        a.bind(past);
    }

    auto openat2 = number_of("openat2");
    auto personality = number_of("personality");
    auto socket = number_of("socket");
    if (!openat2 || !personality || !socket) return plain_error("seccomp guard: syscall numbers");
    a.jump_if(BPF_JEQ, *openat2, enosys, BpfAssembler::kNext);

    const auto check_personality = a.label();
    const auto check_socket = a.label();
    a.jump_if(BPF_JEQ, *personality, check_personality, BpfAssembler::kNext);
    a.jump_if(BPF_JEQ, *socket, check_socket, BpfAssembler::kNext);
    std::vector<std::pair<BpfAssembler::Label, const ModeCheck*>> mode_blocks;
    for (const ModeCheck& check : kModeChecks) {
        auto nr = number_of(check.name);
        if (!nr) return std::move(nr.error());
        mode_blocks.push_back({a.label(), &check});
        a.jump_if(BPF_JEQ, *nr, mode_blocks.back().first, BpfAssembler::kNext);
    }
    std::vector<std::pair<BpfAssembler::Label, const OpenCheck*>> open_blocks;
    for (const OpenCheck& check : kOpenChecks) {
        auto nr = number_of(check.name);
        if (!nr) return std::move(nr.error());
        open_blocks.push_back({a.label(), &check});
        a.jump_if(BPF_JEQ, *nr, open_blocks.back().first, BpfAssembler::kNext);
    }
    a.jump(carry_on);

    a.bind(check_personality);
    a.load(arg_low(0));
    for (uint32_t persona : kAllowedPersonalities) {
        a.jump_if(BPF_JEQ, persona, carry_on, BpfAssembler::kNext);
        if (debuggers && persona != 0xffffffff)
            a.jump_if(BPF_JEQ, persona | ADDR_NO_RANDOMIZE, carry_on, BpfAssembler::kNext);
    }
    a.jump(eperm);

    a.bind(check_socket);
    a.load(arg_low(0));
    a.jump_if(BPF_JEQ, AF_VSOCK, no_family, BpfAssembler::kNext);
    a.jump_if(BPF_JEQ, AF_ALG, no_family, carry_on);

    for (const auto& [label, check] : mode_blocks) {
        a.bind(label);
        a.load(arg_low(check->mode_arg));
        a.jump_if(BPF_JSET, kSetIdBits, eperm, carry_on);
    }
    for (const auto& [label, check] : open_blocks) {
        // O_TMPFILE is two bits (__O_TMPFILE | O_DIRECTORY); the kernel creates only with both.
        auto check_mode = a.label();
        a.bind(label);
        a.load(arg_low(check->flags_arg));
        a.jump_if(BPF_JSET, O_CREAT, check_mode, BpfAssembler::kNext);
        a.and_k(O_TMPFILE);
        a.jump_if(BPF_JEQ, O_TMPFILE, check_mode, carry_on);
        a.bind(check_mode);
        a.load(arg_low(check->mode_arg));
        a.jump_if(BPF_JSET, kSetIdBits, eperm, carry_on);
    }

    a.bind(enosys);
    a.ret(SECCOMP_RET_ERRNO | ENOSYS);  // a fallback answer, not counted as a refusal
    a.bind(eperm);
    a.ret(refusal_mark(EPERM));  // refusals: counted (seccomp_refusals.hpp)
    a.bind(no_family);
    a.ret(refusal_mark(EAFNOSUPPORT));
    a.bind(carry_on);
    return a.finish();
}

}  // namespace corral
