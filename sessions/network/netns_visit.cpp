#include "sessions/network/netns_visit.hpp"

#include <sched.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace corral {

Result<NetnsVisit> NetnsVisit::enter(int netns, int home) {
    if (home < 0) return sys_error(EBADF, "no way back from a network namespace");
    if (::setns(netns, CLONE_NEWNET) != 0) return sys_error("enter network namespace (setns)");
    return NetnsVisit(home);
}

NetnsVisit::NetnsVisit(NetnsVisit&& other) noexcept : home_(std::exchange(other.home_, -1)) {}

NetnsVisit::~NetnsVisit() {
    if (home_ < 0) return;
    if (::setns(home_, CLONE_NEWNET) != 0) {
        std::fprintf(stderr, "corral: cannot return to our own network namespace (%s); aborting\n",
                     std::strerror(errno));
        std::abort();
    }
}

}  // namespace corral
