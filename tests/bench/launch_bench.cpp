// Launch latency: whole-process wall time of a command, from posix_spawn to waitpid, per case.
// The first case is the baseline the others are compared against (bare fork+exec of /bin/true).
// Cases run round-robin (one run of each, then the next round) so that drift in the machine's
// load hits every case alike.
//
//   corral_bench_launch [--runs N] [--warmup N] [--group NAME] [--open FD=PATH]... "label=cmd
//   arg..." ...
//
// --open opens PATH read-only at FD in every spawned command, afresh each run (for tools that
// read a file from a descriptor, such as `bwrap --seccomp FD`); every case pays the same open.
//
// A case whose command fails (non-zero exit) during warm-up is reported with the first line of
// its stderr instead of being dropped, so a refusal (firejail as root, missing tool) is visible.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "tests/bench/bench_report.hpp"

extern char** environ;

namespace {

using corral::bench::now_ms;

struct Case {
    std::string label;
    std::vector<std::string> argv;
    std::vector<double> samples_ms;
    std::string failure;  ///< why it could not be measured; empty when it could
};

struct RunResult {
    int status = -1;  ///< wait status
    std::string stderr_text;
    bool timed_out = false;
};

/// Kills and reaps `pid` if it has not exited within `timeout_ms`, so one hung case cannot hang
/// the whole benchmark.
bool wait_with_deadline(pid_t pid, int timeout_ms, int& status) {
    int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    if (pidfd >= 0) {
        pollfd p{pidfd, POLLIN, 0};
        int n;
        do n = ::poll(&p, 1, timeout_ms);
        while (n < 0 && errno == EINTR);
        ::close(pidfd);
        if (n == 0) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, &status, 0);
            return false;
        }
    }
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return true;
}

/// Runs argv once with stdout to /dev/null; stderr to /dev/null too unless `capture_stderr`.
struct OpenFile {
    int fd;
    std::string path;
};
std::vector<OpenFile> g_open_files;  // --open

RunResult run_once(const std::vector<std::string>& argv, bool capture_stderr, double& elapsed_ms) {
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);

    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    for (const auto& file : g_open_files)
        posix_spawn_file_actions_addopen(&actions, file.fd, file.path.c_str(), O_RDONLY, 0);
    int err_pipe[2] = {-1, -1};
    if (capture_stderr && ::pipe2(err_pipe, O_CLOEXEC) == 0) {
        posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
    } else {
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
    }

    RunResult result;
    pid_t pid = -1;
    double start = now_ms();
    int rc = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
        result.stderr_text = std::string("posix_spawnp: ") + std::strerror(rc);
        if (err_pipe[0] >= 0) ::close(err_pipe[0]), ::close(err_pipe[1]);
        return result;
    }
    result.timed_out = !wait_with_deadline(pid, 30000, result.status);
    elapsed_ms = now_ms() - start;
    if (err_pipe[0] >= 0) {
        ::close(err_pipe[1]);
        char buf[4096];
        ssize_t n;
        while ((n = ::read(err_pipe[0], buf, sizeof buf)) > 0) result.stderr_text.append(buf, n);
        ::close(err_pipe[0]);
    }
    return result;
}

/// "label=cmd a b" -> Case; the command is split on spaces (the cases need no quoting).
std::optional<Case> parse_case(const std::string& spec) {
    auto eq = spec.find('=');
    if (eq == std::string::npos || eq == 0) return std::nullopt;
    Case c;
    c.label = spec.substr(0, eq);
    std::istringstream words(spec.substr(eq + 1));
    for (std::string w; words >> w;) c.argv.push_back(w);
    if (c.argv.empty()) return std::nullopt;
    return c;
}

/// The first stderr line, or a description of the wait status when stderr was silent.
std::string describe_failure(const RunResult& r) {
    std::string line = r.stderr_text.substr(0, r.stderr_text.find('\n'));
    for (char& ch : line)
        if (ch == '\t') ch = ' ';
    std::string status = r.timed_out             ? "timed out"
                         : WIFEXITED(r.status)   ? "exit " + std::to_string(WEXITSTATUS(r.status))
                         : WIFSIGNALED(r.status) ? "signal " + std::to_string(WTERMSIG(r.status))
                                                 : "spawn failed";
    return line.empty() ? status : status + ": " + line;
}

bool succeeded(const RunResult& r) {
    return !r.timed_out && WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0;
}

}  // namespace

int main(int argc, char** argv) {
    int runs = 100, warmup = 5;
    std::string group = "launch /bin/true";
    std::vector<Case> cases;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--runs" && i + 1 < argc)
            runs = std::atoi(argv[++i]);
        else if (a == "--warmup" && i + 1 < argc)
            warmup = std::atoi(argv[++i]);
        else if (a == "--group" && i + 1 < argc)
            group = argv[++i];
        else if (a == "--open" && i + 1 < argc && std::strchr(argv[i + 1], '=') != nullptr) {
            std::string spec = argv[++i];
            size_t eq = spec.find('=');
            g_open_files.push_back(
                OpenFile{std::atoi(spec.substr(0, eq).c_str()), spec.substr(eq + 1)});
        } else if (auto c = parse_case(a))
            cases.push_back(std::move(*c));
        else {
            std::fprintf(
                stderr,
                "usage: %s [--runs N] [--warmup N] [--group G] [--open FD=PATH]... label=cmd...\n",
                argv[0]);
            return 2;
        }
    }
    if (cases.empty() || runs < 1) return 2;

    // Warm-up doubles as the check that each case works here at all.
    for (auto& c : cases) {
        for (int w = 0; w < std::max(warmup, 1) && c.failure.empty(); ++w) {
            double ms = 0;
            RunResult r = run_once(c.argv, true, ms);
            if (!succeeded(r)) c.failure = describe_failure(r);
        }
    }
    for (int round = 0; round < runs; ++round) {
        for (auto& c : cases) {
            if (!c.failure.empty()) continue;
            double ms = 0;
            RunResult r = run_once(c.argv, false, ms);
            if (!succeeded(r)) {
                c.failure = describe_failure(run_once(c.argv, true, ms));
                continue;
            }
            c.samples_ms.push_back(ms);
        }
    }

    double baseline =
        cases[0].failure.empty() ? corral::bench::quantile(cases[0].samples_ms, 0.5) : 0;
    for (const auto& c : cases) {
        if (!c.failure.empty()) {
            corral::bench::print_failed_row(group, c.label, "FAILED (" + c.failure + ")");
            continue;
        }
        corral::bench::print_row(group, c.label, corral::bench::quantile(c.samples_ms, 0.5),
                                 corral::bench::quantile(c.samples_ms, 0.99), "ms", baseline,
                                 "n=" + std::to_string(c.samples_ms.size()));
    }
    return 0;
}
