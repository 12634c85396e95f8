// The raw baseline for the daemon's kill latency: a cgroup we create ourselves beneath our own
// v2 cgroup, filled with the same 1,000-process tree the daemon benchmark uses (half of it setsid'd
// and reparented), then one write of "1" to cgroup.kill, timed until cgroup.events says
// populated 0. This is the floor: no daemon can end a session faster than the kernel kills it.
//
//   corral_bench_cgroup [--procs 1000] [--runs 5]
//   corral_bench_cgroup --remove-instance NAME     (clean-up helper for scripts/bench.sh)

#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tests/bench/bench_report.hpp"
#include "tests/bench/cgroup_tree.hpp"

namespace {

using namespace corral::bench;

/// Starts `sh -c script` inside `cgroup` (the child joins before exec) and returns its pid.
pid_t start_tree(const std::string& cgroup, const std::string& script) {
    pid_t pid = ::fork();
    if (pid == 0) {
        FILE* procs = std::fopen((cgroup + "/cgroup.procs").c_str(), "w");
        if (!procs || std::fputs("0", procs) < 0 || std::fclose(procs) != 0) _exit(126);
        execl("/bin/sh", "sh", "-c", script.c_str(), static_cast<char*>(nullptr));
        _exit(127);
    }
    return pid;
}

}  // namespace

int main(int argc, char** argv) {
    int procs = 1000, runs = 5;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--procs" && i + 1 < argc)
            procs = std::atoi(argv[++i]);
        else if (a == "--runs" && i + 1 < argc)
            runs = std::atoi(argv[++i]);
        else if (a == "--remove-instance" && i + 1 < argc) {
            remove_instance(argv[++i]);
            return 0;
        } else {
            std::fprintf(stderr, "usage: %s [--procs N] [--runs N] | --remove-instance NAME\n",
                         argv[0]);
            return 2;
        }
    }
    const std::string group = "kill " + std::to_string(procs) + " procs";
    std::string own = own_v2_cgroup();
    if (own.empty()) {
        print_failed_row(group, "raw cgroup.kill", "FAILED (no cgroup2 mount)");
        return 0;
    }
    // Reparented sleeps come to us, not to the host's init, and we reap them.
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);

    std::vector<double> samples;
    std::string failure;
    for (int run = 0; run < runs && failure.empty(); ++run) {
        std::string dir =
            own + "/corral-bench-raw-" + std::to_string(::getpid()) + "-" + std::to_string(run);
        if (::mkdir(dir.c_str(), 0755) != 0) {
            failure = "mkdir " + dir + " failed";
            break;
        }
        pid_t sh = start_tree(dir, process_tree_script(procs / 2));
        if (sh < 0 || !wait_for_stable_procs(dir, procs + 1))
            failure = "tree did not reach " + std::to_string(procs) + " processes";
        else {
            double ms = kill_and_wait_empty(dir, 30000);
            if (ms < 0)
                failure = "cgroup.kill failed or timed out";
            else
                samples.push_back(ms);
        }
        remove_cgroup_tree(dir);  // kills anything left if the run failed half-way
        while (::waitpid(-1, nullptr, 0) > 0) {
        }
    }
    if (!failure.empty())
        print_failed_row(group, "raw cgroup.kill", "FAILED (" + failure + ")");
    else
        print_row(group, "raw cgroup.kill (baseline)", quantile(samples, 0.5),
                  quantile(samples, 0.99), "ms", quantile(samples, 0.5),
                  "n=" + std::to_string(samples.size()));
    return 0;
}
