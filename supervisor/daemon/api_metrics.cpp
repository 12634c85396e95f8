// GET /metrics: Prometheus text. Gauges are read from the session manager at scrape time (live
// sessions: starting — being created, not listed yet —, active and ending; and prepared ones,
// corrald --prepare, ready to be claimed); the request histogram is counted by Api::handle as
// requests end.
//
// The one lifetime counter, corral_egress_refused_total, is kept by the egress gates themselves
// (EgressEnvironment::refused_total) as they refuse, so refusals of ended sessions stay counted.
// No per-session label: the label set stays bounded however many sessions come and go.
//
// What is not here: counters of process exits over the daemon's lifetime. The manager forgets
// ended sessions' processes, and a scrape-time tally would silently miss those that ended between
// scrapes; `corral_processes` therefore reports the processes of live sessions by exit reason.

#include "supervisor/daemon/api.hpp"
#include "supervisor/daemon/metrics.hpp"

namespace corral::daemon {
namespace {

/// Every exit reason, so each series exists from the first scrape (rate() needs a start).
constexpr const char* kStatuses[] = {"running", "exited",  "signaled", "timeout",     "oom",
                                     "pids-limit", "seccomp", "killed", "setup-failed", "unknown"};

struct LiveCounts {
    std::map<std::string, uint64_t> sessions_by_state{
        {"starting", 0}, {"active", 0}, {"ending", 0}, {"prepared", 0}};
    std::map<std::string, uint64_t> processes_by_status;
    uint64_t running = 0;
    uint64_t oom_kills = 0;
    uint64_t pids_limit_hits = 0;
    uint64_t ports = 0;
};

LiveCounts count_live(SessionManager& sessions) {
    LiveCounts c;
    for (const char* status : kStatuses) c.processes_by_status[status] = 0;
    c.sessions_by_state["starting"] = sessions.starting_count();
    // Prepared sessions (--prepare) are nobody's yet: counted apart, never as active ones.
    c.sessions_by_state["prepared"] = sessions.prepared_count();
    for (const SessionInfo& s : sessions.list_sessions()) {
        ++c.sessions_by_state[std::string(to_string(s.state))];
        c.oom_kills += s.usage.oom_kills;
        c.pids_limit_hits += s.usage.pids_limit_hits;
        c.ports += s.ports.size();
        for (const ProcessInfo& p : s.processes) {
            ++c.processes_by_status[p.status()];
            if (p.running) ++c.running;
        }
    }
    return c;
}

}  // namespace

std::string Api::render_metrics() {
    const LiveCounts c = count_live(sessions_);
    std::string out;
    prometheus_header(out, "corral_build_info", "gauge", "corrald's version (always 1).");
    prometheus_sample(out, "corral_build_info",
                      "version=\"" + prometheus_escape(CORRAL_VERSION) + "\"", 1);
    prometheus_header(out, "corral_sessions", "gauge", "Live sessions by state.");
    for (const auto& [state, n] : c.sessions_by_state)
        prometheus_sample(out, "corral_sessions", "state=\"" + prometheus_escape(state) + "\"",
                          static_cast<double>(n));
    prometheus_header(out, "corral_processes_running", "gauge",
                      "Processes started through the API that are still running.");
    prometheus_sample(out, "corral_processes_running", "", static_cast<double>(c.running));
    prometheus_header(out, "corral_processes", "gauge",
                      "Processes of live sessions by exit reason (running while they run).");
    for (const auto& [status, n] : c.processes_by_status)
        prometheus_sample(out, "corral_processes", "status=\"" + prometheus_escape(status) + "\"",
                          static_cast<double>(n));
    prometheus_header(out, "corral_oom_kills", "gauge",
                      "OOM kills in live sessions' cgroups (memory.events oom_kill).");
    prometheus_sample(out, "corral_oom_kills", "", static_cast<double>(c.oom_kills));
    prometheus_header(out, "corral_pids_limit_hits", "gauge",
                      "Forks refused by the pids limit in live sessions (pids.events max).");
    prometheus_sample(out, "corral_pids_limit_hits", "", static_cast<double>(c.pids_limit_hits));
    prometheus_header(out, "corral_egress_refused_total", "counter",
                      "Connections isolated sessions' egress proxies refused since corrald "
                      "started (each session's own count is its record's egress.refused).");
    prometheus_sample(out, "corral_egress_refused_total", "",
                      static_cast<double>(sessions_.egress_refused_total()));
    prometheus_header(out, "corral_ports_leased", "gauge", "Host ports leased to live sessions.");
    prometheus_sample(out, "corral_ports_leased", "", static_cast<double>(c.ports));
    request_metrics_.render(out);
    return out;
}

asio::awaitable<void> Api::metrics(Exchange& ex, const RouteParams&, const Caller&) {
    const std::string body = render_metrics();
    co_await ex.send_text(200, "text/plain; version=0.0.4; charset=utf-8", body);
}

}  // namespace corral::daemon
