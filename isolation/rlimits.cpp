#include "isolation/rlimits.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <optional>

namespace corral {
namespace {

RlimitStep step(int resource, uint64_t value) {
    rlim_t limit = value >= RLIM_INFINITY ? RLIM_INFINITY : static_cast<rlim_t>(value);
    return RlimitStep{resource, rlimit{limit, limit}};
}

void add_if_set(std::vector<RlimitStep>& steps, int resource,
                const std::optional<uint64_t>& value) {
    if (value) steps.push_back(step(resource, *value));
}

// A string literal per resource, so a failure report says which limit the kernel refused.
const char* step_name(int resource) {
    switch (resource) {
        case RLIMIT_NOFILE:
            return "setrlimit RLIMIT_NOFILE";
        case RLIMIT_CORE:
            return "setrlimit RLIMIT_CORE";
        case RLIMIT_FSIZE:
            return "setrlimit RLIMIT_FSIZE";
        case RLIMIT_NPROC:
            return "setrlimit RLIMIT_NPROC";
        case RLIMIT_STACK:
            return "setrlimit RLIMIT_STACK";
        default:
            return "setrlimit";
    }
}

}  // namespace

std::vector<RlimitStep> compile_rlimits(const Limits& limits) {
    std::vector<RlimitStep> steps;
    add_if_set(steps, RLIMIT_NOFILE, limits.open_files);
    steps.push_back(step(RLIMIT_CORE, limits.core.value_or(0)));
    add_if_set(steps, RLIMIT_FSIZE, limits.file_size);
    add_if_set(steps, RLIMIT_NPROC, limits.processes);
    add_if_set(steps, RLIMIT_STACK, limits.stack);
    return steps;
}

const char* apply_rlimits(const RlimitStep* steps, size_t count) {
    for (size_t i = 0; i < count; ++i) {
        if (syscall(SYS_prlimit64, 0, steps[i].resource, &steps[i].value, nullptr) != 0) {
            return step_name(steps[i].resource);
        }
    }
    return nullptr;
}

}  // namespace corral
