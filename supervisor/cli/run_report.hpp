#pragma once
// The exit report of `corral run`: how the command ended, in the words of DESIGN.md.

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "isolation/cgroup.hpp"
#include "isolation/exit_reason.hpp"
#include "isolation/seccomp_listener.hpp"
#include "supervisor/cli/workdir_copy.hpp"

namespace corral::cli {

/// Everything `--report` writes.
struct RunReport {
    ExitReason status = ExitReason::setup_failed;
    std::optional<int> exit_code;     ///< set when the command exited, or 127/126 when its
                                      ///< execve failed (status setup-failed)
    std::optional<int> signal;        ///< set when a signal ended it
    uint64_t duration_ms = 0;
    ResourceUsage usage;
    size_t left_behind = 0;           ///< processes still running after the main one ended
    std::string policy;               ///< the policy's name
    std::string error;                ///< setup failure message (status setup-failed)
    std::vector<std::string> not_enforced;  ///< limits skipped under best-effort
    std::optional<OutputsCopied> outputs;   ///< workdir.from copy with workdir.outputs
    std::optional<RefusalCounts> seccomp;   ///< what the seccomp filter refused; none: no filter

    /// The code `corral run` exits with: the command's, 128+N, 124 timeout, 127 program not
    /// found, 126 not executable, 125 any other setup failure.
    int process_exit_code() const;
};

/// camelCase JSON, as the API uses.
nlohmann::json to_json(const RunReport& report);

}  // namespace corral::cli
