// corrald benchmarks, against a daemon scripts/bench.sh started for this run:
//   run     POST /run of /bin/true over kept-alive connections, 1/2/8 clients (req/s, p50, p99)
//           against bare posix_spawn+wait of /bin/true in this process
//   churn   session create + delete per tier
//   kill    DELETE of a session holding 1,000 processes (half setsid'd and reparented), to the
//           response (the daemon answers once cgroup.events says populated 0), checked empty
//   output  `head -c 1G /dev/zero` through the exec NDJSON stream against a plain pipe
//   density daemon RSS with 1,000 idle sessions (one sleeping process each); run latency then
//
//   corral_bench_daemon --socket PATH --daemon-pid PID --policy-dir DIR [--only NAME]...
// Every session it creates it deletes, also on the way out after a failure.

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/bench/bench_report.hpp"
#include "tests/bench/cgroup_tree.hpp"
#include "tests/bench/daemon_client.hpp"

extern char** environ;

namespace {

using namespace corral::bench;
using nlohmann::json;

struct Options {
    std::string socket;
    int daemon_pid = 0;
    std::string policy_dir;
    std::set<std::string> only;
    double kill_baseline_ms = 0;  ///< raw cgroup.kill median from corral_bench_cgroup, same run
    bool quick = std::getenv("CORRAL_BENCH_QUICK") != nullptr;
};

/// A tier: its label and the session-create body naming the policy.
struct Tier {
    std::string label;
    json create_body;
};

std::string slurp(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

std::vector<Tier> tiers(const Options& o) {
    return {{"none", {{"policy", "none"}}},
            {"mount+pid", {{"policyYaml", slurp(o.policy_dir + "/tier-mount-pid.yaml")}}},
            {"+net", {{"policyYaml", slurp(o.policy_dir + "/tier-net.yaml")}}},
            {"default", {{"policy", "default"}}}};
}

/// Sessions this process created and has not deleted yet; deleted on the way out.
std::set<std::string> g_live_sessions;

std::string create_session(DaemonConnection& c, const json& body, std::string* error = nullptr) {
    Response r = c.request("POST", "/v1/sessions", body.dump());
    if (r.status != 200 && r.status != 201) {
        if (error)
            *error = "create: HTTP " + std::to_string(r.status) + " " + r.body.substr(0, 160);
        return "";
    }
    std::string id = json::parse(r.body, nullptr, false).value("id", "");
    if (!id.empty()) g_live_sessions.insert(id);
    return id;
}

bool delete_session(DaemonConnection& c, const std::string& id) {
    Response r = c.request("DELETE", "/v1/sessions/" + id);
    if (r.status / 100 == 2) g_live_sessions.erase(id);
    return r.status / 100 == 2;
}

/// Bare posix_spawn + wait of /bin/true: the floor every run latency is compared with.
double bare_spawn_median(int runs) {
    std::vector<double> samples;
    char* argv[] = {const_cast<char*>("/bin/true"), nullptr};
    for (int i = 0; i < runs; ++i) {
        double t = now_ms();
        pid_t pid;
        if (::posix_spawn(&pid, argv[0], nullptr, nullptr, argv, environ) != 0) return 0;
        ::waitpid(pid, nullptr, 0);
        samples.push_back(now_ms() - t);
    }
    return quantile(samples, 0.5);
}

const std::string kRunTrue = R"({"argv":["/bin/true"]})";

/// `clients` threads, one kept-alive connection each, `per_client` runs of /bin/true each.
void bench_run(const Options& o, const std::string& tier, const json& create_body, int clients,
               int per_client, double baseline) {
    std::string group = "daemon run /bin/true (" + tier + ")";
    std::string label = std::to_string(clients) + (clients == 1 ? " client" : " clients");
    DaemonConnection admin(o.socket);
    std::string error;
    std::string sid = create_session(admin, create_body, &error);
    if (sid.empty()) return print_failed_row(group, label, "FAILED (" + error + ")");
    std::vector<std::vector<double>> lat(clients);
    std::atomic<int> failures{0};
    std::string first_failure;
    double start = now_ms();
    std::vector<std::thread> threads;
    for (int t = 0; t < clients; ++t)
        threads.emplace_back([&, t] {
            DaemonConnection c(o.socket);
            for (int i = 0; i < per_client; ++i) {
                double t0 = now_ms();
                Response r = c.request("POST", "/v1/sessions/" + sid + "/run", kRunTrue);
                if (r.status != 200 || r.body.find("\"exitCode\":0") == std::string::npos) {
                    if (failures++ == 0)
                        first_failure = std::to_string(r.status) + " " + r.body.substr(0, 120);
                    return;
                }
                lat[t].push_back(now_ms() - t0);
            }
        });
    for (auto& th : threads) th.join();
    double elapsed = now_ms() - start;
    delete_session(admin, sid);
    if (failures) return print_failed_row(group, label, "FAILED (" + first_failure + ")");
    std::vector<double> all;
    for (auto& l : lat) all.insert(all.end(), l.begin(), l.end());
    char note[64];
    std::snprintf(note, sizeof note, "%.0f req/s, n=%zu", all.size() / (elapsed / 1000),
                  all.size());
    print_row(group, label, quantile(all, 0.5), quantile(all, 0.99), "ms", baseline, note);
}

void bench_churn(const Options& o, int runs) {
    DaemonConnection c(o.socket);
    for (const auto& tier : tiers(o)) {
        std::vector<double> samples;
        std::string error;
        for (int i = 0; i < runs && error.empty(); ++i) {
            double t0 = now_ms();
            std::string sid = create_session(c, tier.create_body, &error);
            if (sid.empty()) break;
            if (!delete_session(c, sid))
                error = "delete failed";
            else
                samples.push_back(now_ms() - t0);
        }
        if (!error.empty()) {
            print_failed_row("session create+delete", tier.label, "FAILED (" + error + ")");
            continue;
        }
        char note[64];
        std::snprintf(note, sizeof note, "%.0f sessions/s, n=%zu", 1000 / quantile(samples, 0.5),
                      samples.size());
        print_row("session create+delete", tier.label, quantile(samples, 0.5),
                  quantile(samples, 0.99), "ms", 0, note);
    }
}

/// Root of the daemon's session cgroups, from /v1/health (cgroup.sessions).
std::string sessions_cgroup(DaemonConnection& c) {
    json health = json::parse(c.request("GET", "/v1/health").body, nullptr, false);
    if (!health.is_object() || !health.contains("cgroup")) return "";
    return health["cgroup"].value("sessions", "");
}

void bench_kill(const Options& o, int procs, int runs, const std::string& grace) {
    std::string group = "kill " + std::to_string(procs) + " procs";
    std::string label = "corrald DELETE (grace " + grace + ")";
    DaemonConnection c(o.socket);
    std::string root = sessions_cgroup(c);
    if (root.empty())
        return print_failed_row(group, label, "FAILED (no cgroup.sessions in /v1/health)");
    json body = {
        {"policyYaml", "name: bench-kill\nextends: none\ntimeouts: { grace: " + grace + " }\n"}};
    std::vector<double> samples;
    std::string error;
    for (int run = 0; run < runs && error.empty(); ++run) {
        std::string sid = create_session(c, body, &error);
        if (sid.empty()) break;
        json spawn = {{"command", process_tree_script(procs / 2)}};
        Response r = c.request("POST", "/v1/sessions/" + sid + "/processes", spawn.dump());
        if (r.status / 100 != 2)
            error = "spawn: HTTP " + std::to_string(r.status) + " " + r.body.substr(0, 120);
        std::string dir = root + "/" + sid;
        if (error.empty() && !wait_for_stable_procs(dir, procs + 1))
            error = "tree did not settle at " + std::to_string(procs + 1) + " processes";
        double t0 = now_ms();
        bool deleted = delete_session(c, sid);
        double ms = now_ms() - t0;
        if (error.empty() && !deleted) error = "DELETE failed";
        if (error.empty() && count_procs_recursive(dir) != 0) error = "processes left after DELETE";
        if (error.empty()) samples.push_back(ms);
    }
    if (!error.empty()) return print_failed_row(group, label, "FAILED (" + error + ")");
    print_row(group, label, quantile(samples, 0.5), quantile(samples, 0.99), "ms",
              o.kill_baseline_ms,
              "n=" + std::to_string(samples.size()) + "; vs raw cgroup.kill row");
}

/// Plain pipe: the child writes `bytes` zeros into a pipe this process drains.
double pipe_seconds(long long bytes) {
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) return -1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, p[1], 1);
    std::string count = std::to_string(bytes);
    char* argv[] = {const_cast<char*>("head"), const_cast<char*>("-c"), count.data(),
                    const_cast<char*>("/dev/zero"), nullptr};
    double t0 = now_ms();
    pid_t pid;
    int rc = ::posix_spawnp(&pid, "head", &fa, nullptr, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    ::close(p[1]);
    if (rc != 0) return ::close(p[0]), -1;
    static char buf[1 << 16];
    long long got = 0;
    for (ssize_t n; (n = ::read(p[0], buf, sizeof buf)) > 0;) got += n;
    ::close(p[0]);
    ::waitpid(pid, nullptr, 0);
    return got == bytes ? (now_ms() - t0) / 1000 : -1;
}

/// Sums the `"skipped":N` fields of an NDJSON stream fed in arbitrary pieces, without parsing
/// gigabytes of JSON: a key or number split between two pieces is finished with the next one.
struct SkippedCounter {
    long long total = 0;
    std::string pending;  // unsearched tail: may hold the start of a key or an unfinished number

    void feed(std::string_view piece) {
        static constexpr std::string_view key = "\"skipped\":";
        pending.append(piece);
        size_t pos = 0;
        for (;;) {
            size_t at = pending.find(key, pos);
            if (at == std::string::npos) {
                pos = pending.size() >= key.size() ? pending.size() - key.size() + 1 : 0;
                break;
            }
            size_t end = at + key.size();
            while (end < pending.size() && pending[end] >= '0' && pending[end] <= '9') ++end;
            if (end == pending.size()) {
                pos = at;  // the number may go on in the next piece
                break;
            }
            total += std::atoll(pending.c_str() + at + key.size());
            pos = end;
        }
        pending.erase(0, std::max(pos, pending.size() > 64 ? pending.size() - 64 : 0));
    }
};

void bench_output(const Options& o, long long bytes) {
    std::string group = "output head -c " + std::to_string(bytes >> 20) + "M /dev/zero";
    double pipe_s = pipe_seconds(bytes);
    double mib = static_cast<double>(bytes) / (1 << 20);
    if (pipe_s > 0)
        print_row(group, "plain pipe (baseline)", pipe_s * 1000, pipe_s * 1000, "ms", pipe_s * 1000,
                  std::to_string(static_cast<long long>(mib / pipe_s)) + " MiB/s");
    DaemonConnection c(o.socket);
    std::string error;
    std::string sid = create_session(c, {{"policy", "none"}}, &error);
    if (sid.empty())
        return print_failed_row(group, "corrald exec stream", "FAILED (" + error + ")");
    long long wire = 0;
    SkippedCounter skipped;  // bytes the stream reported as fallen out of the buffer
    std::string tail;        // the last, final event
    json body = {{"argv", {"head", "-c", std::to_string(bytes), "/dev/zero"}}};
    double t0 = now_ms();
    int status = c.stream("POST", "/v1/sessions/" + sid + "/exec", body.dump(),
                          [&](const char* p, size_t n) {
                              wire += static_cast<long long>(n);
                              skipped.feed(std::string_view(p, n));
                              tail.append(p, n);
                              if (tail.size() > 8192) tail.erase(0, tail.size() - 4096);
                          });
    double s = (now_ms() - t0) / 1000;
    delete_session(c, sid);
    // Only the final event is parsed (how many bytes the process wrote); the bytes that never
    // reached this client are the sum of the stream's "skipped" counts.
    while (!tail.empty() && tail.back() == '\n') tail.pop_back();
    json last = json::parse(tail.substr(tail.rfind('\n') + 1), nullptr, false);
    if (status != 200 || !last.is_object() || last.value("type", "") != "exit")
        return print_failed_row(group, "corrald exec stream",
                                "FAILED (HTTP " + std::to_string(status) + ")");
    // The counts sit under "output" (current API) or at the top level (earlier drafts).
    if (last.contains("output") && last["output"].is_object()) last = last["output"];
    if (!last.contains("stdout") || !last["stdout"].is_object()) {
        std::fprintf(stderr, "exec stream final event: %s\n", last.dump().substr(0, 600).c_str());
        return print_failed_row(group, "corrald exec stream",
                                "FAILED (final event has no stdout counts)");
    }
    long long written = last["stdout"].value("bytes", 0LL);
    long long delivered = written - skipped.total;
    char note[160];
    std::snprintf(note, sizeof note,
                  "%.0f MiB/s delivered; %.1f MiB never reached the client; %.2f wire bytes/byte",
                  delivered / (1024.0 * 1024.0) / s, skipped.total / (1024.0 * 1024.0),
                  written ? static_cast<double>(wire) / written : 0);
    print_row(group, "corrald exec stream", s * 1000, s * 1000, "ms", pipe_s * 1000, note);
}

long rss_kib(int pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/status");
    for (std::string line; std::getline(in, line);)
        if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
    return -1;
}

std::vector<double> run_latencies(DaemonConnection& c, const std::string& sid, int n) {
    std::vector<double> out;
    for (int i = 0; i < n; ++i) {
        double t0 = now_ms();
        if (c.request("POST", "/v1/sessions/" + sid + "/run", kRunTrue).status != 200) break;
        out.push_back(now_ms() - t0);
    }
    return out;
}

void bench_density(const Options& o, int sessions, int runs) {
    std::string group = "density " + std::to_string(sessions) + " idle sessions";
    DaemonConnection c(o.socket);
    std::string error;
    std::string probe = create_session(c, {{"policy", "none"}}, &error);
    if (probe.empty()) return print_failed_row(group, "run latency", "FAILED (" + error + ")");
    long rss_idle = rss_kib(o.daemon_pid);
    auto idle = run_latencies(c, probe, runs);
    std::vector<std::string> ids;
    double t0 = now_ms();
    json sleeper = {{"argv", {"sleep", "3600"}}};
    for (int i = 0; i < sessions && error.empty(); ++i) {
        std::string sid = create_session(c, {{"policy", "none"}}, &error);
        if (sid.empty()) break;
        ids.push_back(sid);
        Response r = c.request("POST", "/v1/sessions/" + sid + "/processes", sleeper.dump());
        if (r.status / 100 != 2) error = "spawn sleep: HTTP " + std::to_string(r.status);
    }
    double fill_s = (now_ms() - t0) / 1000;
    long rss_loaded = rss_kib(o.daemon_pid);
    auto loaded = error.empty() ? run_latencies(c, probe, runs) : std::vector<double>{};
    t0 = now_ms();
    for (const auto& sid : ids) delete_session(c, sid);
    double drain_s = (now_ms() - t0) / 1000;
    delete_session(c, probe);
    if (!error.empty())
        return print_failed_row(
            group, "corrald",
            "FAILED after " + std::to_string(ids.size()) + " sessions (" + error + ")");
    char note[160];
    std::snprintf(
        note, sizeof note,
        "RSS %ld KiB idle -> %ld KiB (%.1f KiB/session); filled in %.1f s, deleted in %.1f s",
        rss_idle, rss_loaded, static_cast<double>(rss_loaded - rss_idle) / sessions, fill_s,
        drain_s);
    print_row(group, "run /bin/true, idle daemon", quantile(idle, 0.5), quantile(idle, 0.99), "ms",
              quantile(idle, 0.5), "baseline");
    print_row(group, "run /bin/true, " + std::to_string(sessions) + " sessions",
              quantile(loaded, 0.5), quantile(loaded, 0.99), "ms", quantile(idle, 0.5), note);
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string a = argv[i];
        if (a == "--socket")
            o.socket = argv[i + 1];
        else if (a == "--daemon-pid")
            o.daemon_pid = std::atoi(argv[i + 1]);
        else if (a == "--policy-dir")
            o.policy_dir = argv[i + 1];
        else if (a == "--only")
            o.only.insert(argv[i + 1]);
        else if (a == "--kill-baseline")
            o.kill_baseline_ms = std::atof(argv[i + 1]);
    }
    if (o.socket.empty() || o.daemon_pid <= 0 || o.policy_dir.empty()) {
        std::fprintf(stderr,
                     "usage: %s --socket PATH --daemon-pid PID --policy-dir DIR [--only "
                     "run|churn|kill|output|density]\n",
                     argv[0]);
        return 2;
    }
    if (!DaemonConnection(o.socket).connected()) {
        print_failed_row("daemon", "(all)", "FAILED (cannot connect to " + o.socket + ")");
        return 0;
    }
    auto wants = [&](const char* name) { return o.only.empty() || o.only.count(name); };
    const int runs = o.quick ? 50 : 300;
    double bare = bare_spawn_median(100);
    if (wants("run")) {
        auto all = tiers(o);
        for (int clients : {1, 2, 8})
            bench_run(o, all[0].label, all[0].create_body, clients, runs / clients + 1, bare);
        bench_run(o, all[3].label, all[3].create_body, 1, runs, bare);
    }
    if (wants("churn")) bench_churn(o, o.quick ? 20 : 100);
    if (wants("kill")) {
        bench_kill(o, 1000, o.quick ? 2 : 5, "0s");
        bench_kill(o, 1000, o.quick ? 2 : 5, "5s");
    }
    // Density before output: the 1 GiB stream leaves the daemon's heap grown, which would hide
    // the per-session cost in the RSS numbers.
    if (wants("density")) bench_density(o, o.quick ? 200 : 1000, o.quick ? 50 : 200);
    if (wants("output")) bench_output(o, o.quick ? (256LL << 20) : (1LL << 30));

    DaemonConnection c(o.socket);
    for (auto sid : std::set<std::string>(g_live_sessions)) delete_session(c, sid);
    return 0;
}
