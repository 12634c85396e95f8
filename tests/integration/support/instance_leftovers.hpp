#pragma once
// What a corrald started by a test leaves on the host when it did not shut down cleanly (killed
// after a timeout, crashed, or the test failed half-way): its instance cgroup tree on v2 and its
// corral-<instance>-* cgroups on v1. Every test harness that starts a corrald calls
// remove_instance_leftovers() once the daemon has exited, so a leftover of one test never
// breaks the next run. Only cgroups named after this test's own instance are touched: kill and
// remove go through them, never through a cgroup corral did not create.

#include <string>
#include <vector>

#include "base/directory_listing.hpp"
#include "isolation/cgroup.hpp"

namespace corral::testing {

/// corral-<instance>-* cgroups in `host`'s v1 hierarchies (full paths).
std::vector<std::string> instance_v1_cgroups(const CgroupHost& host, const std::string& instance);

/// Kills what is left in `instance`'s cgroups (v2: cgroup.kill on <v2_own>/<instance>, waiting
/// for populated 0; v1: SIGKILL to the pids of its cgroups) and removes them deepest first.
void remove_instance_leftovers(const CgroupHost& host, const std::string& instance);
/// What test processes that are gone left: every `corral-test-<pid>-...` cgroup (v2, and its
/// `corral-corral-test-<pid>-...` v1 ones) whose <pid> no longer runs, or is this very process
/// (a predecessor that had our pid: nothing of ours exists yet when this runs), is killed and
/// removed as remove_instance_leftovers() does. A test binary killed before its clean-up ran
/// (ctest's timeout, SIGKILL, an interrupted run) cannot undo itself; the next test binary does,
/// once, before its first test (support/stale_instance_sweep.cpp).
/// Cgroups of running test processes, and any other name, are never touched.
void sweep_stale_test_instances(const CgroupHost& host);

/// The same, for the cgroups of the calling test process's host.
void remove_instance_leftovers(const std::string& instance);

}  // namespace corral::testing
