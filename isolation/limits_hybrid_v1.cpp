// The hybrid limit backend: the v2 tree tracks and kills; limits live on v1 controller cgroups
// created for each session beneath the v1 cgroups corral runs in.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <set>
#include <sstream>
#include <thread>

#include "base/file_io.hpp"
#include "isolation/event_watch.hpp"
#include "isolation/limits.hpp"
#include "isolation/limits_internal.hpp"

namespace corral {
namespace {

using limits_detail::EnforcementLedger;
using limits_detail::has_file;

/// The v1 controllers corral uses, in creation order.
constexpr const char* kControllers[] = {"memory", "pids", "cpu", "blkio"};

std::set<std::string> list_files(const std::string& dir) {
    std::set<std::string> files;
    if (DIR* handle = ::opendir(dir.c_str())) {
        while (dirent* entry = ::readdir(handle)) files.insert(entry->d_name);
        ::closedir(handle);
    }
    return files;
}

/// One v1 cgroup created for a session (one per hierarchy; cpu,cpuacct share one).
struct V1Cgroup {
    std::string controller;
    std::string path;
    UniqueFd dir;
    bool removed = false;
};

std::optional<uint64_t> read_number(int dir_fd, const char* file) {
    auto text = read_file(dir_fd, file);
    if (!text) return std::nullopt;
    try {
        return std::stoull(*text);
    } catch (...) {
        return std::nullopt;
    }
}

/// Kills what is still in a v1 cgroup we created, then tries to remove it once: true when it is
/// gone (or cannot be removed for another reason than tasks still in it: nothing to wait for).
/// The session's processes are also in its v2 cgroup, which the caller empties first, so
/// normally nothing is left; a killed task still exiting makes rmdir fail with EBUSY.
bool kill_and_try_remove(const V1Cgroup& cgroup) {
    if (auto procs = read_file(cgroup.dir.get(), "cgroup.procs")) {
        std::istringstream pids(*procs);
        for (pid_t pid; pids >> pid;)
            if (pid > 0) ::kill(pid, SIGKILL);
    }
    return ::rmdir(cgroup.path.c_str()) == 0 || errno != EBUSY;
}

/// kill_and_try_remove until done, for up to 2 s. v1 has no populated notification, hence the
/// polling; only where no event loop runs (daemon teardown, callers without one): corrald's
/// loop retries on a timer instead (SessionLimits::try_remove_cgroups).
void kill_and_remove(const V1Cgroup& cgroup) {
    for (int attempt = 0; attempt < 200; ++attempt) {
        if (kill_and_try_remove(cgroup)) return;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
}

class HybridSessionLimits : public SessionLimits {
  public:
    HybridSessionLimits(Cgroup v2, std::vector<V1Cgroup> v1, std::vector<std::string> notes,
                        bool end_on_oom)
        : v2_(std::move(v2)),
          v1_(std::move(v1)),
          notes_(std::move(notes)),
          end_on_oom_(end_on_oom) {}

    ~HybridSessionLimits() override {
        close_watches();
        for (auto it = v1_.rbegin(); it != v1_.rend(); ++it)
            if (!it->removed) kill_and_remove(*it);
    }

    bool try_remove_cgroups() override {
        close_watches();
        bool all_removed = true;
        for (auto it = v1_.rbegin(); it != v1_.rend(); ++it) {
            if (!it->removed) it->removed = kill_and_try_remove(*it);
            all_removed = all_removed && it->removed;
        }
        return all_removed;
    }

    /// Opens the join fds and arms the OOM eventfd and the pids.events watch.
    ///
    /// The join fds are the `tasks` files, not cgroup.procs. A write to cgroup.procs (or of any
    /// pid but 0) takes the host-wide cgroup_threadgroup_rwsem for writing, and the first writer
    /// after a quiet spell waits for an RCU grace period in it (percpu_down_write ->
    /// rcu_sync_enter, unless the hierarchy is mounted with favordynmods): 7-22 ms measured on
    /// kernel 6.18 here, the largest part of a `strict` launch. "0" written to `tasks` moves only
    /// the writing thread, and the kernel skips that lock for it (cgroup_procs_write_start: a
    /// thread moving itself cannot exit or exec meanwhile): ~30 us. The launcher's child writes
    /// it while it still has a single thread, so the whole process moves either way. Kernels
    /// without that shortcut take the lock for `tasks` as for cgroup.procs: no slower than before.
    Status arm() {
        for (const auto& cgroup : v1_) {
            UniqueFd tasks(::openat(cgroup.dir.get(), "tasks", O_WRONLY | O_CLOEXEC));
            if (!tasks) return sys_error("open `" + cgroup.path + "/tasks`");
            join_fds_.push_back(std::move(tasks));
        }
        if (const V1Cgroup* memory = find("memory")) {
            CORRAL_TRY(arm_oom_event(*memory), "");
            CORRAL_TRY(events_.watch_readable(oom_eventfd_.get()), "watch OOM events");
        }
        // pids.events is a kernfs file: its "max" counter changing raises POLLPRI.
        if (const V1Cgroup* pids = find("pids"))
            (void)events_.watch_file(pids->dir.get(), "pids.events", pids->path);
        return {};
    }

    std::vector<std::string> v1_directories() const override {
        std::vector<std::string> paths;
        for (const auto& cgroup : v1_) paths.push_back(cgroup.path);
        return paths;
    }

    std::vector<int> join_fds() const override {
        std::vector<int> fds;
        for (const auto& fd : join_fds_) fds.push_back(fd.get());
        return fds;
    }

    ResourceUsage usage() const override {
        auto v2 = v2_.usage();
        ResourceUsage usage = v2 ? *v2 : ResourceUsage{};
        if (const V1Cgroup* memory = find("memory")) {
            usage.memory_current = read_number(memory->dir.get(), "memory.usage_in_bytes");
            usage.memory_peak = read_number(memory->dir.get(), "memory.max_usage_in_bytes");
        }
        if (const V1Cgroup* pids = find("pids")) {
            usage.pids_current = read_number(pids->dir.get(), "pids.current");
            usage.pids_peak = read_number(pids->dir.get(), "pids.peak");
        }
        if (const V1Cgroup* blkio = find("blkio")) add_blkio_bytes(*blkio, usage);
        auto events = counters();
        usage.oom_kills = events.oom_kills;
        usage.pids_limit_hits = events.pids_limit_hits;
        return usage;
    }

    std::vector<int> event_fds() const override {
        if (events_.fd() < 0) return {};
        return {events_.fd()};
    }

    LimitEvents read_events() override {
        uint64_t count;
        if (oom_eventfd_) (void)!::read(oom_eventfd_.get(), &count, sizeof count);
        events_.rearm();
        return counters();
    }

    std::vector<std::string> not_enforced() const override { return notes_; }
    bool supervisor_must_end_session_on_oom() const override { return end_on_oom_; }

  private:
    void close_watches() {
        join_fds_.clear();
        oom_eventfd_.reset();
        oom_control_.reset();
    }

    const V1Cgroup* find(const std::string& controller) const {
        for (const auto& cgroup : v1_)
            if (cgroup.controller == controller) return &cgroup;
        return nullptr;
    }

    // v1 OOM notification: register an eventfd against memory.oom_control through
    // cgroup.event_control; the kernel signals it on every OOM in the cgroup.
    Status arm_oom_event(const V1Cgroup& memory) {
        oom_eventfd_.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
        if (!oom_eventfd_) return sys_error("eventfd");
        oom_control_.reset(::openat(memory.dir.get(), "memory.oom_control", O_RDONLY | O_CLOEXEC));
        if (!oom_control_) return sys_error("open `" + memory.path + "/memory.oom_control`");
        std::string registration =
            std::to_string(oom_eventfd_.get()) + " " + std::to_string(oom_control_.get());
        CORRAL_TRY(write_file(memory.dir.get(), "cgroup.event_control", registration),
                   "register OOM eventfd on " + memory.path);
        return {};
    }

    LimitEvents counters() const {
        LimitEvents events;
        if (const V1Cgroup* memory = find("memory")) {
            if (auto text = read_file(memory->dir.get(), "memory.oom_control"))
                events.oom_kills = parse_keyed_values(*text)["oom_kill"];
            events.memory_max_hits = read_number(memory->dir.get(), "memory.failcnt").value_or(0);
        }
        if (const V1Cgroup* pids = find("pids")) {
            if (auto text = read_file(pids->dir.get(), "pids.events"))
                events.pids_limit_hits = parse_keyed_values(*text)["max"];
        }
        return events;
    }

    /// "8:0 Read 4096" lines of blkio.throttle.io_service_bytes_recursive (the per-device ones;
    /// the final "Total" line is skipped so nothing is counted twice).
    static void add_blkio_bytes(const V1Cgroup& blkio, ResourceUsage& usage) {
        auto text = read_file(blkio.dir.get(), "blkio.throttle.io_service_bytes_recursive");
        if (!text) return;
        uint64_t read_bytes = 0, write_bytes = 0;
        std::istringstream lines(*text);
        for (std::string device, op; lines >> device >> op;) {
            if (device == "Total") continue;
            uint64_t bytes = 0;
            if (!(lines >> bytes)) break;
            if (op == "Read") read_bytes += bytes;
            if (op == "Write") write_bytes += bytes;
        }
        usage.io_read_bytes = read_bytes;
        usage.io_write_bytes = write_bytes;
    }

    Cgroup v2_;  // unowned: the caller owns the session's v2 cgroup
    std::vector<V1Cgroup> v1_;
    std::vector<UniqueFd> join_fds_;
    UniqueFd oom_eventfd_;
    UniqueFd oom_control_;
    EventWatch events_;  // the OOM eventfd and pids.events
    std::vector<std::string> notes_;
    bool end_on_oom_;
};

class HybridV1Backend : public LimitBackend {
  public:
    explicit HybridV1Backend(CgroupHost host) : host_(std::move(host)) {}

    std::string name() const override { return "hybrid-v1"; }
    LimitSupport support() const override {
        ensure_probed();
        return support_;
    }

    Result<std::unique_ptr<SessionLimits>> apply(const Cgroup& session_cgroup,
                                                 const std::string& session_name,
                                                 const Limits& limits,
                                                 Enforcement enforcement,
                                                 bool existing = false) const override {
        EnforcementLedger ledger(enforcement);
        // A session without limits needs no v1 cgroup, so no probe either (it creates and
        // removes a cgroup in every v1 hierarchy: a cost `corral run --policy none` should not
        // pay).
        if (limits_use_controllers(limits)) ensure_probed();
        CORRAL_TRY(ledger.check_supported(support_, limits), "apply limits");
        std::vector<V1Cgroup> created;
        // If anything below fails, the cgroups created so far are removed by this guard.
        struct Cleanup {
            std::vector<V1Cgroup>& cgroups;
            bool armed = true;
            ~Cleanup() {
                if (armed)
                    for (auto it = cgroups.rbegin(); it != cgroups.rend(); ++it)
                        kill_and_remove(*it);
            }
        } cleanup{created};
        for (const char* controller : kControllers) {
            if (!wanted(controller, limits, ledger)) continue;
            auto status = create_v1(controller, session_name, existing, created);
            if (!status)
                CORRAL_TRY(refuse_kinds_of(controller, limits, ledger, status.error().describe()),
                           "apply limits");
        }
        CORRAL_TRY(write_limits(created, limits, ledger), "apply limits");
        auto v2 = session_cgroup.unowned_view();
        if (!v2) return std::move(v2.error().context("apply limits"));
        bool end_on_oom = limits.oom_group;  // v1 has no memory.oom.group
        auto session = std::make_unique<HybridSessionLimits>(std::move(*v2), std::move(created),
                                                             std::move(ledger.notes), end_on_oom);
        cleanup.armed = false;  // the session object owns them now
        CORRAL_TRY(session->arm(), "apply limits");
        return std::unique_ptr<SessionLimits>(std::move(session));
    }

  private:
    // Which v1 limit files exist is only visible in a non-root cgroup (root cgroups have no
    // limit files), so probe with a short-lived child of each of our v1 cgroups.
    void ensure_probed() const {
        if (probed_) return;
        probe();
        probed_ = true;
    }

    void probe() const {
        bool swap_active = host_swap_active();
        bool weighted_io = host_has_weighted_io_scheduler();
        std::map<std::string, std::set<std::string>> files;
        std::map<std::string, std::string> failures;
        for (const char* controller : kControllers) {
            auto own = host_.v1_own.find(controller);
            if (own == host_.v1_own.end()) {
                failures[controller] = std::string("no v1 `") + controller +
                                       "` hierarchy holds us and cgroup2 has no controllers here";
                continue;
            }
            std::string dir = own->second + "/corral-probe-" + std::to_string(::getpid());
            if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
                failures[controller] = sys_error("mkdir `" + dir + "`").describe();
                continue;
            }
            files[controller] = list_files(dir);
            ::rmdir(dir.c_str());
        }
        auto capability = [&](const char* controller, const char* file) -> LimitCapability {
            if (failures.count(controller)) return {false, failures[controller]};
            if (files[controller].count(file)) return {true, std::string("v1 ") + file};
            return {false, std::string("v1 `") + controller + "` has no " + file};
        };
        support_.kinds[LimitKind::memory] = capability("memory", "memory.limit_in_bytes");
        support_.kinds[LimitKind::swap] = capability("memory", "memory.memsw.limit_in_bytes");
        if (!support_.kinds[LimitKind::swap].enforceable && !swap_active &&
            support_.kinds[LimitKind::memory].enforceable)
            support_.kinds[LimitKind::swap] = {true, "no swap is active on this host"};
        support_.kinds[LimitKind::pids] = capability("pids", "pids.max");
        support_.kinds[LimitKind::cpu] = capability("cpu", "cpu.cfs_quota_us");
        io_file_ = files["blkio"].count("blkio.weight") ? "blkio.weight" : "blkio.bfq.weight";
        support_.kinds[LimitKind::io] = capability("blkio", io_file_.c_str());
        if (support_.kinds[LimitKind::io].enforceable && !weighted_io)
            support_.kinds[LimitKind::io] = {
                false, io_file_ +
                           " is only honoured by the bfq scheduler and no block device "
                           "uses bfq here"};
    }

    /// Only the controllers a limit needs (or limits.accounting asks for): every v1 cgroup is a
    /// mkdir, a join and an rmdir more per session. Joining once cost an RCU grace period
    /// (~15 ms, see arm()); through `tasks` it costs tens of microseconds.
    bool wanted(const std::string& controller, const Limits& limits,
                const EnforcementLedger& ledger) const {
        auto enforceable = [&](LimitKind kind) {
            return support_.get(kind).enforceable && !ledger.noted(kind);
        };
        // limits.accounting: a memory and a pids cgroup without a limit, for their usage files.
        const bool count = limits.accounting;
        if (controller == "memory")
            return (limits.memory || limits.swap || limits.oom_group || count) &&
                   enforceable(LimitKind::memory);
        if (controller == "pids") return (limits.pids || count) && enforceable(LimitKind::pids);
        if (controller == "cpu") return limits.cpu && enforceable(LimitKind::cpu);
        // Not blkio: its v1 byte counters stay at 0 without a throttle rule or bfq (measured on
        // kernel 6.18 with mq-deadline), and a 0 would be a lie where null is the truth.
        if (controller == "blkio") return limits.io_weight && enforceable(LimitKind::io);
        return false;
    }

    Status create_v1(const std::string& controller, const std::string& session_name,
                     bool existing, std::vector<V1Cgroup>& created) const {
        std::string dir = host_.v1_own.at(controller) + "/corral-" + session_name;
        for (const auto& existing : created)
            if (existing.path == dir) return {};  // joint hierarchy (cpu,cpuacct) already made
        if (::mkdir(dir.c_str(), 0755) != 0 && !(existing && errno == EEXIST))
            return sys_error("mkdir `" + dir + "`");
        UniqueFd fd(::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
        if (!fd) {
            ::rmdir(dir.c_str());
            return sys_error("open `" + dir + "`");
        }
        created.push_back({controller, dir, std::move(fd)});
        return {};
    }

    static Status refuse_kinds_of(const std::string& controller, const Limits& limits,
                                  EnforcementLedger& ledger, const std::string& reason) {
        for (LimitKind kind : requested_limits(limits)) {
            bool uses = (controller == "memory" &&
                         (kind == LimitKind::memory || kind == LimitKind::swap)) ||
                        (controller == "pids" && kind == LimitKind::pids) ||
                        (controller == "cpu" && kind == LimitKind::cpu) ||
                        (controller == "blkio" && kind == LimitKind::io);
            if (uses) CORRAL_TRY(ledger.refuse_or_note(kind, reason), "");
        }
        return {};
    }

    Status write_limits(const std::vector<V1Cgroup>& created, const Limits& limits,
                        EnforcementLedger& ledger) const {
        auto dir_of = [&](const std::string& controller) -> const V1Cgroup* {
            for (const auto& cgroup : created)
                if (cgroup.controller == controller) return &cgroup;
            return nullptr;
        };
        auto write = [&](LimitKind kind, const char* controller, const std::string& file,
                         const std::string& value) -> Status {
            const V1Cgroup* cgroup = dir_of(controller);
            if (!cgroup || ledger.noted(kind)) return {};
            auto status = write_file(cgroup->dir.get(), file, value);
            if (status) return {};
            return ledger.refuse_or_note(kind, "write " + value + " to `" + cgroup->path + "/" +
                                                   file + "`: " + status.error().describe());
        };
        if (limits.memory) {
            CORRAL_TRY(write(LimitKind::memory, "memory", "memory.limit_in_bytes",
                             std::to_string(*limits.memory)),
                       "");
            // memsw bounds memory + swap together, so it must be written after the memory limit
            // (the kernel refuses memsw < limit).
            const V1Cgroup* memory = dir_of("memory");
            if (memory && has_file(memory->dir.get(), "memory.memsw.limit_in_bytes"))
                CORRAL_TRY(
                    write(LimitKind::swap, "memory", "memory.memsw.limit_in_bytes",
                          std::to_string(*limits.memory + limits_detail::swap_bytes(limits))),
                    "");
        } else if (limits.swap) {
            CORRAL_TRY(ledger.refuse_or_note(LimitKind::swap,
                                             "v1 limits swap only together with memory "
                                             "(memory.memsw = memory + swap)"),
                       "");
        }
        if (limits.pids)
            CORRAL_TRY(write(LimitKind::pids, "pids", "pids.max", std::to_string(*limits.pids)),
                       "");
        if (limits.cpu) {
            CORRAL_TRY(write(LimitKind::cpu, "cpu", "cpu.cfs_period_us", "100000"), "");
            CORRAL_TRY(write(LimitKind::cpu, "cpu", "cpu.cfs_quota_us",
                             std::to_string(cpu_quota_usec(*limits.cpu))),
                       "");
        }
        if (limits.io_weight)
            CORRAL_TRY(write(LimitKind::io, "blkio", io_file_,
                             std::to_string(blkio_weight_from_io_weight(*limits.io_weight))),
                       "");
        return {};
    }

    CgroupHost host_;
    mutable LimitSupport support_;  // filled by the first ensure_probed()
    mutable bool probed_ = false;
    mutable std::string io_file_;
};

}  // namespace

std::unique_ptr<LimitBackend> make_hybrid_v1_backend(const CgroupHost& host) {
    return std::make_unique<HybridV1Backend>(host);
}

}  // namespace corral
