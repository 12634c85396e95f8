#pragma once
// The last step of every fixture that starts a daemon, in its forked child: stdout and stderr to
// a log file, then execv. Six fixtures of two suites each had a copy of these lines.

#include <fcntl.h>
#include <unistd.h>

#include <string>
#include <vector>

namespace corral::test_support {

enum class LogOpen {
    append,   ///< a restarted daemon's log follows its earlier run's
    truncate  ///< each start writes the log anew
};

/// Sends stdout and stderr to `log_path` (created 0644) and execs `args` (args[0] an absolute
/// path); only for a forked child. Ends the child with 127 when the exec fails. The log's own
/// descriptor closes at the exec: the daemon inherits it only as its stdout and stderr.
[[noreturn]] inline void exec_logged(const std::vector<std::string>& args,
                                     const std::string& log_path, LogOpen mode) {
    const int flags =
        O_WRONLY | O_CREAT | O_CLOEXEC | (mode == LogOpen::append ? O_APPEND : O_TRUNC);
    if (const int log = ::open(log_path.c_str(), flags, 0644); log >= 0) {
        ::dup2(log, 1);
        ::dup2(log, 2);
    }
    std::vector<char*> argv;
    for (const auto& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
}

}  // namespace corral::test_support
