// Issue 18, "a session ready to run": POST /v1/sessions of `default` then the first `run` of
// /bin/true returning, with prepared sessions (corrald --prepare default=N) against without, two
// corrald instances of this build measured in the same run with their samples interleaved (the
// machine's noise falls on both alike); on an idle daemon, then with `--sessions` sessions of
// `--filler` (`none` unless given) existing in each (one sleeping process each, as the density
// group of corral_bench_daemon). `--filler default`: isolated sessions, whose threads and memory
// each fork of corrald used to copy (issue 18: a `default` run took 40 ms beside 1,000 of them).
//
// Before each sample the bench waits (bounded) until the pool is full again: it measures a claim
// with sessions prepared, i.e. creations that arrive no faster than the pool refills (a refill
// takes a session's creation time, ~5 ms, per session, in the background). The no-pool instance
// waits as long, so both see the same pauses.
//
//   corral_bench_prepared [--samples N (100)] [--sessions N (1000)] [--filler POLICY (none)]
//                         [--prepare N (8)]
//                         [--settle-ms N (0): a pause after the pool is full, before a sample]
// Prints ROW lines (bench_report.hpp): medians and p99 in ms, the pool's against no pool's.

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "tests/bench/bench_report.hpp"
#include "tests/bench/compared_daemon.hpp"
#include "tests/bench/daemon_client.hpp"

namespace {

using namespace corral::bench;
using nlohmann::json;

struct Instance : ComparedDaemon {
    std::vector<double> idle, loaded;                ///< create + first run
    std::vector<double> idle_create, loaded_create;  ///< the create alone
    std::vector<double> idle_run, loaded_run;        ///< a later run in the sample's session
    std::vector<std::string> filler;
};

/// Waits until the pool is full, then `settle` more (the last preparation's background work, the
/// previous sample's deletion, before the next sample of either instance).
void wait_for_pool(DaemonConnection& c, size_t target, std::chrono::milliseconds settle) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (target > 0 && prepared_pool(c, "default").ready < target && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::this_thread::sleep_for(settle);
}

/// One sample: create `default`, first run of /bin/true (timed together, and the create alone),
/// then a second run (timed alone: what a run costs once the session has run something); the
/// delete after it is not timed.
bool sample(DaemonConnection& c, std::vector<double>& ready, std::vector<double>& create,
            std::vector<double>& later) {
    const double t0 = now_ms();
    Response made = c.request("POST", "/v1/sessions", R"({"policy":"default"})");
    const double t1 = now_ms();
    if (made.status != 201) return false;
    const std::string sid = json::parse(made.body, nullptr, false).value("id", "");
    const std::string run = "/v1/sessions/" + sid + "/run";
    Response ran = c.request("POST", run, R"({"argv":["/bin/true"]})");
    const double elapsed = now_ms() - t0;
    if (ran.status != 200) return false;
    ready.push_back(elapsed);
    create.push_back(t1 - t0);
    const double t2 = now_ms();
    if (c.request("POST", run, R"({"argv":["/bin/true"]})").status != 200) return false;
    later.push_back(now_ms() - t2);
    return c.request("DELETE", "/v1/sessions/" + sid).status / 100 == 2;
}

bool fill(Instance& one, DaemonConnection& c, int sessions, const std::string& policy) {
    const std::string sleeper = R"({"argv":["sleep","3600"]})";
    const std::string create = json{{"policy", policy}}.dump();
    for (int i = 0; i < sessions; ++i) {
        Response r = c.request("POST", "/v1/sessions", create);
        if (r.status != 201) {
            std::fprintf(stderr, "session %d of %d: HTTP %d %s\n", i + 1, sessions, r.status,
                         r.body.substr(0, 300).c_str());
            return false;
        }
        const std::string sid = json::parse(r.body, nullptr, false).value("id", "");
        one.filler.push_back(sid);
        if (c.request("POST", "/v1/sessions/" + sid + "/processes", sleeper).status / 100 != 2)
            return false;
    }
    return true;
}

void print_pair(const std::string& group, const Instance& pool, const Instance& none,
                const std::vector<double> Instance::*samples) {
    const double base = quantile(none.*samples, 0.5);
    print_row(group, "without a pool", base, quantile(none.*samples, 0.99), "ms", base,
              "baseline, n=" + std::to_string((none.*samples).size()));
    print_row(group, pool.label, quantile(pool.*samples, 0.5), quantile(pool.*samples, 0.99), "ms",
              base, "n=" + std::to_string((pool.*samples).size()));
}

}  // namespace

int main(int argc, char** argv) {
    int samples = 100, sessions = 1000, prepare = 8, settle_ms = 0;
    std::string filler = "none";
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string a = argv[i];
        if (a == "--filler") filler = argv[i + 1];
        if (a == "--samples") samples = std::atoi(argv[i + 1]);
        if (a == "--sessions") sessions = std::atoi(argv[i + 1]);
        if (a == "--prepare") prepare = std::atoi(argv[i + 1]);
        if (a == "--settle-ms") settle_ms = std::atoi(argv[i + 1]);
    }
    std::vector<Instance> instances(2);
    const std::string pool = "default=" + std::to_string(prepare);
    if (!start_compared_daemon(instances[0], "--prepare " + pool, {"--prepare", pool}) ||
        !start_compared_daemon(instances[1], "without a pool", {}))
        return 1;
    DaemonConnection pooled(instances[0].socket), plain(instances[1].socket);
    DaemonConnection* connections[] = {&pooled, &plain};
    for (int phase = 0; phase < 2; ++phase) {
        if (phase == 1) {
            for (int i = 0; i < 2; ++i) {
                if (!fill(instances[i], *connections[i], sessions, filler)) {
                    std::fprintf(stderr, "filling %s failed\n", instances[i].label.c_str());
                    return 1;
                }
            }
        }
        for (int s = 0; s < samples; ++s) {
            for (int i = 0; i < 2; ++i) {
                wait_for_pool(pooled, static_cast<size_t>(prepare),
                              std::chrono::milliseconds(settle_ms));
                Instance& one = instances[i];
                const bool idle = phase == 0;
                if (!sample(*connections[i], idle ? one.idle : one.loaded,
                            idle ? one.idle_create : one.loaded_create,
                            idle ? one.idle_run : one.loaded_run)) {
                    std::fprintf(stderr, "sample against %s failed\n", instances[i].label.c_str());
                    return 1;
                }
            }
        }
    }
    const std::string loaded = std::to_string(sessions) + " " + filler + " sessions";
    print_pair("session ready (default), idle daemon", instances[0], instances[1], &Instance::idle);
    print_pair("session ready (default), " + loaded, instances[0], instances[1], &Instance::loaded);
    print_pair("create alone (default), idle daemon", instances[0], instances[1],
               &Instance::idle_create);
    print_pair("create alone (default), " + loaded, instances[0], instances[1],
               &Instance::loaded_create);
    print_pair("second run (default), idle daemon", instances[0], instances[1],
               &Instance::idle_run);
    print_pair("second run (default), " + loaded, instances[0], instances[1],
               &Instance::loaded_run);
    for (int i = 0; i < 2; ++i)
        for (const auto& sid : instances[i].filler)
            connections[i]->request("DELETE", "/v1/sessions/" + sid);
    return 0;
}
