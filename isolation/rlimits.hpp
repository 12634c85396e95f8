#pragma once
// Resource limits of one process (setrlimit), as opposed to the session-wide cgroup limits.
// Compiled from the policy in the parent; applied in the child with raw prlimit64 calls.

#include <cstddef>
#include <vector>

#include "isolation/confinement.hpp"
#include "policies/policy.hpp"

namespace corral {

/// The rlimits a policy asks for. RLIMIT_CORE is always set (0 unless `limits.core` says
/// otherwise) so a crashing sandboxed program never writes a core file into the host.
std::vector<RlimitStep> compile_rlimits(const Limits& limits);

/// Child: sets each limit (soft = hard). Async-signal-safe; returns the failing step or nullptr.
const char* apply_rlimits(const RlimitStep* steps, size_t count);

}  // namespace corral
