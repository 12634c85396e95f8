// Every integration and security test binary sweeps, once before its first test, what test
// processes that are gone left in the cgroup trees (instance_leftovers.hpp,
// sweep_stale_test_instances): a binary killed before its own clean-up ran cannot undo itself.
// A global test environment, registered by this file's static initialiser, so linking the suite's
// support objects is all it takes.
#include <gtest/gtest.h>
#include <unistd.h>

#include "instance_leftovers.hpp"

namespace corral::testing {
namespace {

class SweepStaleTestInstances : public ::testing::Environment {
  public:
    void SetUp() override {
        if (::geteuid() != 0) return;  // only root makes cgroups in these suites
        if (auto host = discover_cgroup_host()) sweep_stale_test_instances(*host);
    }
};

[[maybe_unused]] ::testing::Environment* const kSweep =
    ::testing::AddGlobalTestEnvironment(new SweepStaleTestInstances);

}  // namespace
}  // namespace corral::testing
