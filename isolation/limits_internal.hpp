#pragma once
// Shared by the two limit backends (not part of the public interface).

#include <string>
#include <vector>

#include "isolation/limits.hpp"

namespace corral::limits_detail {

/// Turns an unenforceable asked limit into an error (strict) or a note (best-effort).
class EnforcementLedger {
  public:
    explicit EnforcementLedger(Enforcement enforcement) : enforcement_(enforcement) {}

    /// Strict: an Error "limit `memory` cannot be enforced on this host: <reason>".
    /// Best-effort: records "memory: <reason>" and succeeds.
    Status refuse_or_note(LimitKind kind, const std::string& reason);
    /// Refuses every asked limit that `support` says cannot be enforced.
    Status check_supported(const LimitSupport& support, const Limits& limits);
    /// Whether `kind` has been noted as not enforced already.
    bool noted(LimitKind kind) const;

    std::vector<std::string> notes;

  private:
    Enforcement enforcement_;
    std::vector<LimitKind> noted_;
};

/// Whether `limits` asks for `kind`.
bool asks_for(const Limits& limits, LimitKind kind);
/// The swap bytes to allow: the explicit value, else 0 (off) when memory is set.
uint64_t swap_bytes(const Limits& limits);
/// Whether `dir_fd` has a file `name` (cgroupfs lists exactly what a controller supports).
bool has_file(int dir_fd, const std::string& name);

}  // namespace corral::limits_detail
