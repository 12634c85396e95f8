// The unified (cgroup v2) limit backend: controllers enabled down the path, limit files on the
// session cgroup, events from memory.events and pids.events.
#include <algorithm>

#include "base/file_io.hpp"
#include "isolation/event_watch.hpp"
#include "isolation/limits.hpp"
#include "isolation/limits_internal.hpp"

namespace corral {
namespace {

using limits_detail::EnforcementLedger;
using limits_detail::has_file;

const char* controller_of(LimitKind kind) {
    switch (kind) {
        case LimitKind::memory:
        case LimitKind::swap:
            return "memory";
        case LimitKind::pids:
            return "pids";
        case LimitKind::cpu:
            return "cpu";
        case LimitKind::io:
            return "io";
    }
    return "";
}

class UnifiedSessionLimits : public SessionLimits {
  public:
    UnifiedSessionLimits(Cgroup cgroup, std::vector<std::string> notes, bool end_on_oom)
        : cgroup_(std::move(cgroup)), notes_(std::move(notes)), end_on_oom_(end_on_oom) {
        // Without events (a file this kernel lacks, or a failure) the exit reasons still come
        // from the counters read at the end; only the early wake-up is lost.
        for (const char* file : {"memory.events", "pids.events"})
            (void)events_.watch_file(cgroup_.dir_fd(), file, cgroup_.path());
    }

    std::vector<int> join_fds() const override { return {}; }

    ResourceUsage usage() const override {
        auto usage = cgroup_.usage();
        return usage ? *usage : ResourceUsage{};
    }

    std::vector<int> event_fds() const override {
        if (events_.fd() < 0) return {};
        return {events_.fd()};
    }

    LimitEvents read_events() override {
        events_.rearm();
        LimitEvents events;
        if (auto text = read_file(cgroup_.dir_fd(), "memory.events")) {
            auto values = parse_keyed_values(*text);
            events.oom_kills = values["oom_kill"];
            events.memory_max_hits = values["max"];
        }
        // A 6.1 kernel counts a refused fork in the forking process's leaf, not here.
        if (auto hits = pids_limit_hits_in_subtree(cgroup_.path())) events.pids_limit_hits = *hits;
        return events;
    }

    std::vector<std::string> not_enforced() const override { return notes_; }
    bool supervisor_must_end_session_on_oom() const override { return end_on_oom_; }

  private:
    Cgroup cgroup_;  // unowned: the caller owns the session cgroup
    EventWatch events_;
    std::vector<std::string> notes_;
    bool end_on_oom_;
};

class UnifiedBackend : public LimitBackend {
  public:
    explicit UnifiedBackend(CgroupHost host)
        : host_(std::move(host)),
          swap_active_(host_swap_active()),
          weighted_io_(host_has_weighted_io_scheduler()) {}

    std::string name() const override { return "unified"; }

    LimitSupport support() const override {
        LimitSupport support;
        support.kinds[LimitKind::memory] = capability("memory", "memory.max");
        support.kinds[LimitKind::swap] = capability("memory", "memory.swap.max");
        support.kinds[LimitKind::pids] = capability("pids", "pids.max");
        support.kinds[LimitKind::cpu] = capability("cpu", "cpu.max");
        support.kinds[LimitKind::io] = capability("io", "io.weight");
        if (support.kinds[LimitKind::io].enforceable && !weighted_io_)
            support.kinds[LimitKind::io] = {
                false,
                "io.weight is only honoured by the bfq scheduler and no block device "
                "uses bfq here"};
        return support;
    }

    Result<std::unique_ptr<SessionLimits>> apply(const Cgroup& session_cgroup,
                                                 const std::string& session_name,
                                                 const Limits& limits,
                                                 Enforcement enforcement,
                                                 bool existing = false) const override {
        (void)session_name;  // the session cgroup already carries the name on v2
        (void)existing;      // writing the same limits again is harmless
        EnforcementLedger ledger(enforcement);
        CORRAL_TRY(ledger.check_supported(support(), limits), "apply limits");
        CORRAL_TRY(enable_controllers(session_cgroup, limits, ledger), "apply limits");
        CORRAL_TRY(write_limits(session_cgroup, limits, ledger), "apply limits");
        bool end_on_oom = false;
        if (limits.oom_group && !ledger.noted(LimitKind::memory)) {
            // Without memory.oom.group (pre-4.19) the supervisor ends the session itself.
            end_on_oom = !write_file(session_cgroup.dir_fd(), "memory.oom.group", "1");
        }
        auto handle = session_cgroup.unowned_view();
        if (!handle) return std::move(handle.error().context("apply limits"));
        return std::unique_ptr<SessionLimits>(std::make_unique<UnifiedSessionLimits>(
            std::move(*handle), std::move(ledger.notes), end_on_oom));
    }

  private:
    LimitCapability capability(const std::string& controller, const std::string& file) const {
        // place_cgroups found no cgroup where controllers may be enabled (cgroup_placement.hpp).
        if (!host_.limits_unavailable.empty()) return {false, host_.limits_unavailable};
        bool available = std::find(host_.v2_controllers.begin(), host_.v2_controllers.end(),
                                   controller) != host_.v2_controllers.end();
        if (available) return {true, file};
        return {false, "cgroup2 controller `" + controller + "` is not in `" + host_.v2_own +
                           "/cgroup.controllers` (bound to a cgroup v1 hierarchy on this host, "
                           "or not delegated to corral)"};
    }

    /// The controllers to enable: those of the enforceable asked limits, plus memory, pids and io
    /// when available, because their usage files (memory.peak, pids.peak, io.stat) feed the
    /// reports: a cgroup has io.stat only where the io controller is enabled for it (issue 17.9).
    std::vector<std::string> wanted_controllers(const Limits& limits,
                                                const EnforcementLedger& ledger) const {
        std::vector<std::string> wanted;
        auto add = [&](const std::string& controller) {
            if (capability(controller, "").enforceable &&
                std::find(wanted.begin(), wanted.end(), controller) == wanted.end())
                wanted.push_back(controller);
        };
        for (LimitKind kind : requested_limits(limits))
            if (!ledger.noted(kind)) add(controller_of(kind));
        add("memory");
        add("pids");
        add("io");
        std::sort(wanted.begin(), wanted.end());
        return wanted;
    }

    Status enable_controllers(const Cgroup& session, const Limits& limits,
                              EnforcementLedger& ledger) const {
        auto wanted = wanted_controllers(limits, ledger);
        if (wanted.empty()) return {};
        auto status = enable_controllers_down_to(host_.v2_own, session.path(), wanted);
        if (!status) {
            for (LimitKind kind : requested_limits(limits))
                CORRAL_TRY(ledger.refuse_or_note(kind, status.error().describe()), "");
            return {};
        }
        std::string request;
        for (const auto& controller : wanted)
            request += (request.empty() ? "+" : " +") + controller;
        // Per-process leaves below the session report their own memory/pids peaks; useful, not
        // required, so a failure here is not an error.
        (void)write_file(session.dir_fd(), "cgroup.subtree_control", request);
        return {};
    }

    Status write_limits(const Cgroup& session, const Limits& limits,
                        EnforcementLedger& ledger) const {
        auto write = [&](LimitKind kind, const std::string& file,
                         const std::string& value) -> Status {
            if (ledger.noted(kind)) return {};
            auto status = write_file(session.dir_fd(), file, value);
            if (status) return {};
            return ledger.refuse_or_note(kind, "write " + value + " to `" + session.path() + "/" +
                                                   file + "`: " + status.error().describe());
        };
        if (limits.memory)
            CORRAL_TRY(write(LimitKind::memory, "memory.max", std::to_string(*limits.memory)), "");
        if (limits_detail::asks_for(limits, LimitKind::swap) && !ledger.noted(LimitKind::swap)) {
            uint64_t swap = limits_detail::swap_bytes(limits);
            if (has_file(session.dir_fd(), "memory.swap.max"))
                CORRAL_TRY(write(LimitKind::swap, "memory.swap.max", std::to_string(swap)), "");
            else if (swap_active_)
                CORRAL_TRY(ledger.refuse_or_note(LimitKind::swap,
                                                 "no memory.swap.max (swap accounting is off) "
                                                 "while swap is active"),
                           "");
        }
        if (limits.pids)
            CORRAL_TRY(write(LimitKind::pids, "pids.max", std::to_string(*limits.pids)), "");
        if (limits.cpu)
            CORRAL_TRY(write(LimitKind::cpu, "cpu.max",
                             std::to_string(cpu_quota_usec(*limits.cpu)) + " 100000"),
                       "");
        if (limits.io_weight)
            CORRAL_TRY(
                write(LimitKind::io, "io.weight", "default " + std::to_string(*limits.io_weight)),
                "");
        return {};
    }

    CgroupHost host_;
    bool swap_active_;
    bool weighted_io_;
};

}  // namespace

// The no-internal-process rule: a non-root cgroup that has processes of its own cannot enable
// controllers for its children (EBUSY). corrald therefore runs in a leaf of its own
// (enter_supervisor_leaf) and the cgroups on the way to the session hold no process.
Status enable_controllers_down_to(const std::string& top, const std::string& leaf,
                                  const std::vector<std::string>& controllers) {
    if (leaf.size() <= top.size() + 1 || leaf.compare(0, top.size(), top) != 0 ||
        leaf[top.size()] != '/')
        return plain_error("cgroup `" + leaf + "` is not below our cgroup `" + top + "`");
    std::string request;
    for (const auto& controller : controllers)
        request += (request.empty() ? "+" : " +") + controller;
    std::vector<std::string> dirs{top};
    for (size_t slash = leaf.find('/', top.size() + 1); slash != std::string::npos;
         slash = leaf.find('/', slash + 1))
        dirs.push_back(leaf.substr(0, slash));
    for (const auto& dir : dirs) {
        auto status = write_file(dir + "/cgroup.subtree_control", request);
        if (status) continue;
        auto error = status.error();
        error.context("enable `" + request + "` in `" + dir + "`");
        if (error.code == EBUSY)
            error.message += " (processes live directly in `" + dir +
                             "`; the no-internal-process rule forbids controllers below it: "
                             "corrald must run in its own leaf cgroup and nothing else may run "
                             "in the cgroups above its sessions)";
        return error;
    }
    return {};
}

std::unique_ptr<LimitBackend> make_unified_backend(const CgroupHost& host) {
    return std::make_unique<UnifiedBackend>(host);
}

}  // namespace corral
