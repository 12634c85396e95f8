// Launch latency: whole-process wall time of a command, from posix_spawn to waitpid, per case.
// The first case is the baseline the others are compared against (bare fork+exec of /bin/true).
// Cases run round-robin (one run of each, then the next round) so that drift in the machine's
// load hits every case alike.
//
//   corral_bench_launch [--runs N] [--warmup N] [--group NAME] [--open FD=PATH]...
//                       [--cpu-reference LABEL] "label=cmd arg..." ...
//
// CPU per launch (user + system, a second row per case) is that of every process the launch
// made, whoever ended up reaping it: this program is a child subreaper, so what a case leaves
// running when its first process exits is reparented here, and it is waited for (not timed)
// before the next run. `getrusage(RUSAGE_CHILDREN)` then holds the whole tree's time. That
// matters for bubblewrap: `bwrap --unshare-pid` exits as soon as its PID 1 reports the
// command's status (an eventfd), before PID 1 has reaped the command and torn the namespaces
// down, so a tool that reads the launched process's rusage alone (hyperfine, `time`) never
// sees PID 1's or the command's CPU. The note gives that first-process-only figure too.
// --cpu-reference names the case the CPU rows' notes are compared against (e.g. bwrap).
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
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
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
    std::vector<double> cpu_ms;        ///< user + system of the whole launch, per run
    std::vector<double> first_cpu_ms;  ///< of the first process alone (what hyperfine shows)
    std::string failure;               ///< why it could not be measured; empty when it could
};

struct RunResult {
    int status = -1;  ///< wait status
    std::string stderr_text;
    bool timed_out = false;
    double cpu_ms = 0;          ///< every process of the launch, reaped by anyone below us
    double first_cpu_ms = 0;    ///< the spawned process and what it reaped itself
    bool left_running = false;  ///< descendants still ran 30 s after the first exited
};

/// User + system time of every child reaped so far (and of what they reaped).
double children_cpu_ms() {
    rusage usage{};
    ::getrusage(RUSAGE_CHILDREN, &usage);
    auto ms = [](const timeval& t) { return t.tv_sec * 1e3 + t.tv_usec / 1e3; };
    return ms(usage.ru_utime) + ms(usage.ru_stime);
}

/// Reaps every descendant reparented to us (we are a subreaper) until none is left; false if
/// some still run after `timeout_ms` (a hang: reported, never waited for forever).
bool reap_descendants(int timeout_ms) {
    const double deadline = now_ms() + timeout_ms;
    for (;;) {
        pid_t pid = ::waitpid(-1, nullptr, WNOHANG);
        if (pid > 0) continue;
        if (pid < 0 && errno == EINTR) continue;
        if (pid < 0) return true;  // ECHILD: nothing left
        if (now_ms() > deadline) return false;
        timespec pause{0, 100 * 1000};
        ::nanosleep(&pause, nullptr);
    }
}

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
    const double cpu_before = children_cpu_ms();
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
    result.first_cpu_ms = children_cpu_ms() - cpu_before;
    result.left_running = !reap_descendants(30000);
    result.cpu_ms = children_cpu_ms() - cpu_before;
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
                         : r.left_running        ? "left processes running for 30 s"
                         : WIFEXITED(r.status)   ? "exit " + std::to_string(WEXITSTATUS(r.status))
                         : WIFSIGNALED(r.status) ? "signal " + std::to_string(WTERMSIG(r.status))
                                                 : "spawn failed";
    return line.empty() ? status : status + ": " + line;
}

bool succeeded(const RunResult& r) {
    return !r.timed_out && !r.left_running && WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0;
}

}  // namespace

int main(int argc, char** argv) {
    int runs = 100, warmup = 5;
    std::string group = "launch /bin/true";
    std::string cpu_reference;
    std::vector<Case> cases;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--runs" && i + 1 < argc)
            runs = std::atoi(argv[++i]);
        else if (a == "--warmup" && i + 1 < argc)
            warmup = std::atoi(argv[++i]);
        else if (a == "--group" && i + 1 < argc)
            group = argv[++i];
        else if (a == "--cpu-reference" && i + 1 < argc)
            cpu_reference = argv[++i];
        else if (a == "--open" && i + 1 < argc && std::strchr(argv[i + 1], '=') != nullptr) {
            std::string spec = argv[++i];
            size_t eq = spec.find('=');
            g_open_files.push_back(
                OpenFile{std::atoi(spec.substr(0, eq).c_str()), spec.substr(eq + 1)});
        } else if (auto c = parse_case(a))
            cases.push_back(std::move(*c));
        else {
            std::fprintf(stderr,
                         "usage: %s [--runs N] [--warmup N] [--group G] [--open FD=PATH]... "
                         "[--cpu-reference LABEL] label=cmd...\n",
                         argv[0]);
            return 2;
        }
    }
    if (cases.empty() || runs < 1) return 2;
    // What a case leaves behind when its first process exits comes to us (see the top).
    if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) std::perror("prctl(PR_SET_CHILD_SUBREAPER)");

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
            c.cpu_ms.push_back(r.cpu_ms);
            c.first_cpu_ms.push_back(r.first_cpu_ms);
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
    // CPU rows: the whole launch's user + system time, against the same baseline, and against
    // --cpu-reference in the note.
    using corral::bench::quantile;
    const std::string cpu_group = group + " / CPU per launch";
    const double cpu_baseline = cases[0].failure.empty() ? quantile(cases[0].cpu_ms, 0.5) : 0;
    double reference = 0;
    for (const auto& c : cases)
        if (c.label == cpu_reference && c.failure.empty()) reference = quantile(c.cpu_ms, 0.5);
    for (const auto& c : cases) {
        if (!c.failure.empty()) continue;
        const double median = quantile(c.cpu_ms, 0.5);
        char note[160];
        int n = std::snprintf(note, sizeof note, "user+sys, whole tree; first process alone %.3f",
                              quantile(c.first_cpu_ms, 0.5));
        if (reference > 0 && c.label != cpu_reference)
            std::snprintf(note + n, sizeof note - n, "; %.2fx %s", median / reference,
                          cpu_reference.c_str());
        corral::bench::print_row(cpu_group, c.label, median, quantile(c.cpu_ms, 0.99), "ms cpu",
                                 cpu_baseline, note);
    }
    return 0;
}
