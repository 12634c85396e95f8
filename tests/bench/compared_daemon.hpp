#pragma once
// A corrald of this build that a bench measures against another started beside it in the same
// run (one with an option, one without), through the integration suite's CorraldProcess: its own
// socket, state dir, cgroup instance and port range, all removed when it goes.

#include <memory>
#include <string>
#include <vector>

#include "tests/integration/support/corrald_process.hpp"

namespace corral::bench {

/// One of the daemons a bench compares.
struct ComparedDaemon {
    std::string label;  ///< how the bench's table and messages name it
    std::unique_ptr<testing::CorraldProcess> daemon;
    std::string socket;  ///< where it listens
};

/// Starts corrald with `extra_args` as `one`, named `label`; false (with its log on stderr) if it
/// did not start.
bool start_compared_daemon(ComparedDaemon& one, std::string label,
                           std::vector<std::string> extra_args);

}  // namespace corral::bench
