#pragma once
// Bench-only helpers around the host's cgroup v2 tree: find our own cgroup, make and remove
// benchmark cgroups beneath it, fill one with a process tree, time cgroup.kill. Deliberately
// independent of isolation/cgroup.hpp: the raw baseline must not share code with what it measures.

#include <sys/types.h>

#include <string>
#include <vector>

namespace corral::bench {

/// The shell program both kill benchmarks run: `pairs` plain background sleeps plus `pairs` sleeps
/// started by a setsid'd shell that exits at once (so they are reparented and in their own
/// session), then waits. 2*pairs+1 processes in all.
std::string process_tree_script(int pairs);

/// "<cgroup2 mount><own v2 path>", e.g. /sys/fs/cgroup/unified or /sys/fs/cgroup/user.slice/x.
std::string own_v2_cgroup();

/// Number of pids in the cgroup at `dir` and all its descendants.
int count_procs_recursive(const std::string& dir);

/// Waits (set-up, untimed) until the subtree at `dir` holds exactly `want` processes on three
/// checks in a row 50 ms apart: the tree script's transient setsid shells inflate the count while
/// its loop still runs, and a kill that races the loop would measure the loop, not the kill.
/// False after 60 s.
bool wait_for_stable_procs(const std::string& dir, int want);

/// Writes "1" to dir/cgroup.kill and returns the milliseconds until dir/cgroup.events says
/// populated 0 (waited for with poll(POLLPRI) on cgroup.events, no sleeping); < 0 on error.
double kill_and_wait_empty(const std::string& dir, int timeout_ms);

/// Kills everything in `dir` (which the caller created) and removes it and its descendants.
void remove_cgroup_tree(const std::string& dir);

/// Removes what a corrald started with `--instance name` leaves behind if it dies uncleanly: the
/// v2 subtree <own>/<name> and v1 directories named corral-<name>-* under our own v1 cgroups.
void remove_instance(const std::string& name);

}  // namespace corral::bench
