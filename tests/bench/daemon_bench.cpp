// corrald benchmarks, against a daemon scripts/bench.sh started for this run:
//   run     POST /run of /bin/true over kept-alive connections, 1/2/8 clients (req/s, p50, p99)
//           against issue 18's baseline, a bare fork+exec of the same command over a kept-alive
//           connection (fork_exec_server.hpp), and bare posix_spawn+wait in this process
//   churn   session create + delete per tier
//   kill    DELETE of a session holding 1,000 processes (half setsid'd and reparented), to the
//           response (the daemon answers once cgroup.events says populated 0), checked empty
//   output  `head -c 1G /dev/zero` through the exec NDJSON stream against a plain pipe
//   density daemon RSS with 1,000 idle sessions (one sleeping process each); run latency then;
//           session ready (create + first run) back-to-back and each after an idle pause, both
//           beside a bare posix_spawn+wait measured with the same pattern just before
//
//   corral_bench_daemon --socket PATH --daemon-pid PID --policy-dir DIR [--only NAME]...
// Every session it creates it deletes, also on the way out after a failure.

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
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
#include "tests/bench/fork_exec_server.hpp"

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
    int output_rounds = 3;  ///< --output-rounds: pipe/NDJSON/binary rounds of the output group
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

/// Bare posix_spawn + wait of /bin/true: the floor every run latency is compared with. Each
/// sample after `pause` of sleep when nonzero (see kIdlePause). Empty when a spawn fails.
std::vector<double> bare_spawn_samples(int runs, std::chrono::milliseconds pause) {
    std::vector<double> samples;
    char* argv[] = {const_cast<char*>("/bin/true"), nullptr};
    for (int i = 0; i < runs; ++i) {
        if (pause.count() > 0) std::this_thread::sleep_for(pause);
        double t = now_ms();
        pid_t pid;
        if (::posix_spawn(&pid, argv[0], nullptr, nullptr, argv, environ) != 0) return {};
        ::waitpid(pid, nullptr, 0);
        samples.push_back(now_ms() - t);
    }
    return samples;
}

/// The pause before each sample of the "after a pause" session-ready rows and their baseline.
/// On the 2-vCPU Firecracker VMs we measure on, any process start that follows ~20 ms of idling
/// costs about twice one that follows another (a bare posix_spawn of /bin/true: 0.33 ms
/// back-to-back, 0.70 ms each after a 20 ms sleep; docs/BENCHMARKS.md "Idle pauses on these
/// VMs"): a latency measured after pauses must be set beside a baseline measured after the same
/// pauses, not one measured back-to-back.
constexpr std::chrono::milliseconds kIdlePause{20};

const std::string kRunTrue = R"({"argv":["/bin/true"]})";

/// The same request to ForkExecServer over one kept-alive connection: issue 18's baseline for a
/// daemon `run` (transport included, nothing of corral's). Empty when it cannot be measured.
std::vector<double> fork_exec_server_samples(const ForkExecServer& server, int runs) {
    if (!server.running()) return {};
    DaemonConnection c(server.socket_path());
    std::vector<double> samples;
    for (int i = 0; i < runs + 10; ++i) {
        double t = now_ms();
        Response r = c.request("POST", "/run", kRunTrue);
        if (r.status != 200 || r.body.find("\"exitCode\":0") == std::string::npos) return {};
        if (i >= 10) samples.push_back(now_ms() - t);  // the first ten warm it up
    }
    return samples;
}

/// `clients` threads, one kept-alive connection each, `per_client` runs of /bin/true each.
void bench_run(const Options& o, const std::string& tier, const json& create_body, int clients,
               int per_client, double baseline, double spawn) {
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
    char note[96];
    const double median = quantile(all, 0.5);
    std::snprintf(note, sizeof note, "%.0f req/s, n=%zu; %.2fx posix_spawn", all.size() / (elapsed / 1000),
                  all.size(), spawn > 0 ? median / spawn : 0.0);
    print_row(group, label, median, quantile(all, 0.99), "ms", baseline, note);
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
        // The tree is counted in its process's own leaf: the session's cgroup also holds its
        // holder (which keeps output pipes across a corrald restart, issue 12.2), one more.
        const std::string dir = root + "/" + sid;
        const std::string leaf =
            dir + "/" + json::parse(r.body, nullptr, false).value("id", std::string("p1"));
        if (error.empty() && !wait_for_stable_procs(leaf, procs + 1))
            error = "tree did not settle at " + std::to_string(procs + 1) + " processes in " + leaf;
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

/// Reads application/vnd.corral.stream frames fed in arbitrary pieces: counts stdout payload
/// bytes and gap ("skipped") events, keeps the last JSON event.
struct FrameCounter {
    long long stdout_bytes = 0;
    long long skipped = 0;
    std::string last_json;
    std::string header;  // an unfinished frame header (type, length, and offset for output)
    uint8_t type = 0;
    uint64_t left = 0;  // payload bytes of the current frame still to come
    std::string event_text;  // the current JSON frame's payload

    void feed(const char* p, size_t n) {
        while (n > 0) {
            if (left == 0) {
                header += *p++;
                --n;
                if (header.size() < 5) continue;
                type = static_cast<uint8_t>(header[0]);
                uint64_t length = 0;
                for (int i = 1; i < 5; ++i) length = length << 8 | static_cast<uint8_t>(header[i]);
                if (type != 0 && header.size() < 13) continue;  // output frames: the offset too
                left = type == 0 ? length : length - 8;
                header.clear();
                event_text.clear();
                if (left == 0 && type == 0) finish_json();
                continue;
            }
            const size_t take = static_cast<size_t>(std::min<uint64_t>(left, n));
            if (type == 0) event_text.append(p, take);
            if (type == 1) stdout_bytes += static_cast<long long>(take);
            p += take;
            n -= take;
            left -= take;
            if (left == 0 && type == 0) finish_json();
        }
    }
    void finish_json() {
        const json event = json::parse(event_text, nullptr, false);
        if (event.is_object() && event.value("type", "") == "skipped")
            skipped += event.value("skipped", 0LL);
        last_json = std::move(event_text);
    }
};

/// One run of `head -c bytes /dev/zero` through exec, NDJSON or binary frames. Returns seconds,
/// the bytes that never reached the client, wire bytes, and the process's written byte count;
/// seconds < 0 with `error` on failure.
struct StreamRun {
    double seconds = -1;
    long long skipped = 0;
    long long wire = 0;
    long long written = 0;
    long long framed = 0;  // stdout bytes the binary frames carried
    std::string error;
};

StreamRun run_exec_stream(DaemonConnection& c, const std::string& sid, long long bytes,
                          bool binary) {
    StreamRun r;
    SkippedCounter skipped;  // NDJSON: bytes the stream reported as fallen out of the buffer
    FrameCounter frames;     // binary
    std::string tail;        // NDJSON: the last, final event
    json body = {{"argv", {"head", "-c", std::to_string(bytes), "/dev/zero"}}};
    double t0 = now_ms();
    int status = c.stream(
        "POST", "/v1/sessions/" + sid + "/exec", body.dump(),
        [&](const char* p, size_t n) {
            r.wire += static_cast<long long>(n);
            if (binary) {
                frames.feed(p, n);
                return;
            }
            skipped.feed(std::string_view(p, n));
            tail.append(p, n);
            if (tail.size() > 8192) tail.erase(0, tail.size() - 4096);
        },
        binary ? "Accept: application/vnd.corral.stream\r\n" : "");
    const double s = (now_ms() - t0) / 1000;
    json last;
    if (binary) {
        last = json::parse(frames.last_json, nullptr, false);
        r.skipped = frames.skipped;
        r.framed = frames.stdout_bytes;
    } else {
        while (!tail.empty() && tail.back() == '\n') tail.pop_back();
        last = json::parse(tail.substr(tail.rfind('\n') + 1), nullptr, false);
        r.skipped = skipped.total;
    }
    if (status != 200 || !last.is_object() || last.value("type", "") != "exit") {
        r.error = "HTTP " + std::to_string(status) + ", final event not exit";
        return r;
    }
    if (last.contains("output") && last["output"].is_object()) last = last["output"];
    if (!last.contains("stdout") || !last["stdout"].is_object()) {
        r.error = "final event has no stdout counts";
        return r;
    }
    r.written = last["stdout"].value("bytes", 0LL);
    if (binary && r.framed + r.skipped != r.written) {
        r.error = "frames carried " + std::to_string(r.framed) + " + skipped " +
                  std::to_string(r.skipped) + " of " + std::to_string(r.written) + " bytes";
        return r;
    }
    r.seconds = s;
    return r;
}

// A plain pipe, the NDJSON stream and the binary frames, alternating round by round so load
// changes hit all three alike; medians of the rounds.
void bench_output(const Options& o, long long bytes) {
    const int kRounds = std::max(1, o.output_rounds);
    std::string group = "output head -c " + std::to_string(bytes >> 20) + "M /dev/zero";
    const double mib = static_cast<double>(bytes) / (1 << 20);
    DaemonConnection c(o.socket);
    std::string error;
    std::string sid = create_session(c, {{"policy", "none"}}, &error);
    if (sid.empty())
        return print_failed_row(group, "corrald exec stream", "FAILED (" + error + ")");
    std::vector<double> pipe, text, binary;
    StreamRun last_text, last_binary;
    for (int round = 0; round < kRounds && error.empty(); ++round) {
        const double p = pipe_seconds(bytes);
        if (p > 0) pipe.push_back(p);
        last_text = run_exec_stream(c, sid, bytes, false);
        last_binary = run_exec_stream(c, sid, bytes, true);
        if (!last_text.error.empty()) error = "NDJSON: " + last_text.error;
        if (!last_binary.error.empty()) error = "binary: " + last_binary.error;
        text.push_back(last_text.seconds);
        binary.push_back(last_binary.seconds);
    }
    delete_session(c, sid);
    if (pipe.empty()) return print_failed_row(group, "plain pipe (baseline)", "FAILED");
    const double pipe_s = quantile(pipe, 0.5);
    print_row(group, "plain pipe (baseline)", pipe_s * 1000, quantile(pipe, 0.99) * 1000, "ms",
              pipe_s * 1000,
              std::to_string(static_cast<long long>(mib / pipe_s)) + " MiB/s; n=" +
                  std::to_string(pipe.size()));
    if (!error.empty()) return print_failed_row(group, "corrald exec stream", "FAILED (" + error + ")");
    auto row = [&](const char* label, const std::vector<double>& runs, const StreamRun& last) {
        const double s = quantile(runs, 0.5);
        const long long delivered = last.written - last.skipped;
        char note[200];
        std::snprintf(note, sizeof note,
                      "%.0f MiB/s delivered (%.2fx the pipe's rate); %.1f MiB never reached the "
                      "client; %.2f wire bytes/byte; n=%zu",
                      delivered / (1024.0 * 1024.0) / s, pipe_s / s,
                      last.skipped / (1024.0 * 1024.0),
                      last.written ? static_cast<double>(last.wire) / last.written : 0,
                      runs.size());
        print_row(group, label, s * 1000, quantile(runs, 0.99) * 1000, "ms", pipe_s * 1000, note);
    };
    row("corrald exec stream, NDJSON", text, last_text);
    row("corrald exec stream, binary frames", binary, last_binary);
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

/// Issue 18's "session ready to run": POST /v1/sessions then the first `run` of /bin/true
/// returning, per sample (the delete after it is not timed), each sample after `pause` of sleep
/// when nonzero. Stops at the first failure.
std::vector<double> ready_latencies(DaemonConnection& c, const json& create_body, int n,
                                    std::chrono::milliseconds pause, std::string* error) {
    std::vector<double> out;
    for (int i = 0; i < n && error->empty(); ++i) {
        if (pause.count() > 0) std::this_thread::sleep_for(pause);
        double t0 = now_ms();
        std::string sid = create_session(c, create_body, error);
        if (sid.empty()) break;
        Response r = c.request("POST", "/v1/sessions/" + sid + "/run", kRunTrue);
        if (r.status != 200)
            *error = "first run: HTTP " + std::to_string(r.status);
        else
            out.push_back(now_ms() - t0);
        delete_session(c, sid);
    }
    return out;
}

/// Session ready measured one way, beside a bare posix_spawn+wait of /bin/true measured the same
/// way (same count, same pause before each sample) just before it.
struct ReadyMeasure {
    std::chrono::milliseconds pause{0};  ///< before each sample; 0: back-to-back
    std::vector<double> spawn;
    std::vector<double> ready;
};

ReadyMeasure measure_ready(DaemonConnection& c, const json& create_body, int n,
                           std::chrono::milliseconds pause, std::string* error) {
    ReadyMeasure m;
    m.pause = pause;
    m.spawn = bare_spawn_samples(n, pause);
    if (m.spawn.empty()) *error = "bare posix_spawn of /bin/true failed";
    m.ready = ready_latencies(c, create_body, n, pause, error);
    return m;
}

/// One group per way of measuring, so that its ratio column is always against the bare spawn
/// measured that way. `run_ms`: the median of a run in an existing session, for the note.
void print_ready(const std::string& tier, const std::string& daemon, const ReadyMeasure& m,
                 double run_ms) {
    const std::string group =
        "session ready (" + tier + "), " + daemon + ", " +
        (m.pause.count() > 0 ? "each after a " + std::to_string(m.pause.count()) + " ms pause"
                             : "back-to-back");
    const double spawn = quantile(m.spawn, 0.5);
    print_row(group, "bare posix_spawn+wait /bin/true (baseline)", spawn, quantile(m.spawn, 0.99),
              "ms", spawn, "n=" + std::to_string(m.spawn.size()));
    const double ready = quantile(m.ready, 0.5);
    char note[160];
    std::snprintf(note, sizeof note,
                  "POST /v1/sessions + first run (the DELETE after each is untimed); %.2fx a run "
                  "in an existing session; n=%zu",
                  run_ms > 0 ? ready / run_ms : 0.0, m.ready.size());
    print_row(group, "create + first run", ready, quantile(m.ready, 0.99), "ms", spawn, note);
}

void bench_density(const Options& o, int sessions, int runs) {
    std::string group = "density " + std::to_string(sessions) + " idle sessions";
    DaemonConnection c(o.socket);
    std::string error;
    std::string probe = create_session(c, {{"policy", "none"}}, &error);
    if (probe.empty()) return print_failed_row(group, "run latency", "FAILED (" + error + ")");
    long rss_idle = rss_kib(o.daemon_pid);
    auto idle = run_latencies(c, probe, runs);
    const Tier ready_tier = tiers(o)[3];  // default
    // Whether the claims come from a pool (corrald --prepare default=N) is part of what the rows
    // measure, so their group says it.
    const PreparedPool pool = prepared_pool(c, "default");
    const std::string served =
        pool.target > 0 ? ", pool of " + std::to_string(pool.target) : ", no pool";
    const int ready_runs = std::max(10, runs / 4);
    const auto ready_measures = [&] {
        std::vector<ReadyMeasure> out;
        for (auto pause : {std::chrono::milliseconds{0}, kIdlePause})
            if (error.empty())
                out.push_back(measure_ready(c, ready_tier.create_body, ready_runs, pause, &error));
        return out;
    };
    const auto ready_idle = ready_measures();
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
    const auto ready_loaded = error.empty() ? ready_measures() : std::vector<ReadyMeasure>{};
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
    // Session ready (create + first run) at the default tier, against a bare spawn measured the
    // same way (back-to-back, or after the same idle pause: kIdlePause); the note sets it beside
    // the same daemon's run in an existing session: what a fresh session costs beyond a run.
    for (const auto& m : ready_idle)
        print_ready(ready_tier.label, "idle daemon" + served, m, quantile(idle, 0.5));
    for (const auto& m : ready_loaded)
        print_ready(ready_tier.label, std::to_string(sessions) + " sessions" + served, m,
                    quantile(loaded, 0.5));
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
        else if (a == "--output-rounds")
            o.output_rounds = std::atoi(argv[i + 1]);
    }
    if (o.socket.empty() || o.daemon_pid <= 0 || o.policy_dir.empty()) {
        std::fprintf(stderr,
                     "usage: %s --socket PATH --daemon-pid PID --policy-dir DIR [--only "
                     "run|churn|kill|output|density] [--output-rounds N]\n",
                     argv[0]);
        return 2;
    }
    if (!DaemonConnection(o.socket).connected()) {
        print_failed_row("daemon", "(all)", "FAILED (cannot connect to " + o.socket + ")");
        return 0;
    }
    auto wants = [&](const char* name) { return o.only.empty() || o.only.count(name); };
    const int runs = o.quick ? 50 : 300;
    const double bare = quantile(bare_spawn_samples(100, std::chrono::milliseconds{0}), 0.5);
    if (wants("run")) {
        // Forked before any thread of ours exists.
        ForkExecServer server;
        const auto server_samples = fork_exec_server_samples(server, runs);
        const double served = server_samples.empty() ? 0 : quantile(server_samples, 0.5);
        const std::string group = "daemon run /bin/true";
        if (served > 0)
            print_row(group, "bare fork+exec server, kept-alive (baseline)", served,
                      quantile(server_samples, 0.99), "ms", served,
                      "issue 18's baseline: fork, exec, pipes, waitpid, no sandbox");
        else
            print_failed_row(group, "bare fork+exec server", "FAILED (could not serve)");
        print_row(group, "bare posix_spawn+wait, in process", bare, bare, "ms", served,
                  "no transport");
        auto all = tiers(o);
        for (int clients : {1, 2, 8})
            bench_run(o, all[0].label, all[0].create_body, clients, runs / clients + 1, served,
                      bare);
        bench_run(o, all[3].label, all[3].create_body, 1, runs, served, bare);
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
