// Parts of the limits interface shared by both backends, and the backend choice.
#include "isolation/limits.hpp"

#include <fcntl.h>
#include <glob.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>

#include "base/file_io.hpp"
#include "isolation/limits_internal.hpp"

namespace corral {

SessionLimits::~SessionLimits() = default;
LimitBackend::~LimitBackend() = default;

const char* limit_name(LimitKind kind) {
    switch (kind) {
        case LimitKind::memory:
            return "memory";
        case LimitKind::swap:
            return "swap";
        case LimitKind::pids:
            return "pids";
        case LimitKind::cpu:
            return "cpu";
        case LimitKind::io:
            return "io";
    }
    return "?";
}

LimitCapability LimitSupport::get(LimitKind kind) const {
    auto it = kinds.find(kind);
    if (it != kinds.end()) return it->second;
    return {false, "not known to this backend"};
}

std::vector<LimitKind> requested_limits(const Limits& limits) {
    std::vector<LimitKind> out;
    for (LimitKind kind :
         {LimitKind::memory, LimitKind::swap, LimitKind::pids, LimitKind::cpu, LimitKind::io})
        if (limits_detail::asks_for(limits, kind)) out.push_back(kind);
    return out;
}

bool limits_use_controllers(const Limits& limits) {
    return limits.accounting || !requested_limits(limits).empty();
}

std::unique_ptr<LimitBackend> make_limit_backend(const CgroupHost& host) {
    if (host.layout == CgroupLayout::hybrid) return make_hybrid_v1_backend(host);
    return make_unified_backend(host);
}

uint64_t cpu_quota_usec(double cores, uint64_t period_usec) {
    double quota = std::ceil(cores * static_cast<double>(period_usec));
    return std::max<uint64_t>(1000, static_cast<uint64_t>(quota));
}

uint64_t blkio_weight_from_io_weight(uint64_t io_weight) {
    // Linear on the defaults: io.weight 100 is blkio 500.
    return std::clamp<uint64_t>(io_weight * 5, 10, 1000);
}

bool host_swap_active() {
    auto swaps = read_file("/proc/swaps");
    if (!swaps) return true;  // unknown: assume the worst, so "swap off" is not claimed for free
    return std::count(swaps->begin(), swaps->end(), '\n') > 1;  // header line + one per area
}

bool host_has_weighted_io_scheduler() {
    glob_t found{};
    bool weighted = false;
    if (::glob("/sys/block/*/queue/scheduler", 0, nullptr, &found) == 0) {
        for (size_t i = 0; i < found.gl_pathc && !weighted; ++i) {
            auto text = read_file(found.gl_pathv[i]);
            weighted = text && text->find("[bfq]") != std::string::npos;
        }
    }
    ::globfree(&found);
    return weighted;
}

namespace limits_detail {

Status EnforcementLedger::refuse_or_note(LimitKind kind, const std::string& reason) {
    if (noted(kind)) return {};
    if (enforcement_ == Enforcement::strict)
        return plain_error(std::string("limit `") + limit_name(kind) +
                           "` cannot be enforced on this host: " + reason);
    notes.push_back(std::string(limit_name(kind)) + ": " + reason);
    noted_.push_back(kind);
    return {};
}

Status EnforcementLedger::check_supported(const LimitSupport& support, const Limits& limits) {
    for (LimitKind kind : requested_limits(limits)) {
        auto capability = support.get(kind);
        if (!capability.enforceable) {
            auto status = refuse_or_note(kind, capability.detail);
            if (!status) return status;
        }
    }
    return {};
}

bool EnforcementLedger::noted(LimitKind kind) const {
    return std::find(noted_.begin(), noted_.end(), kind) != noted_.end();
}

bool asks_for(const Limits& limits, LimitKind kind) {
    switch (kind) {
        case LimitKind::memory:
            return limits.memory.has_value();
        case LimitKind::swap:
            return limits.swap.has_value() || limits.memory.has_value();
        case LimitKind::pids:
            return limits.pids.has_value();
        case LimitKind::cpu:
            return limits.cpu.has_value();
        case LimitKind::io:
            return limits.io_weight.has_value();
    }
    return false;
}

uint64_t swap_bytes(const Limits& limits) {
    return limits.swap.value_or(0);
}

bool has_file(int dir_fd, const std::string& name) {
    return ::faccessat(dir_fd, name.c_str(), F_OK, 0) == 0;
}

}  // namespace limits_detail
}  // namespace corral
