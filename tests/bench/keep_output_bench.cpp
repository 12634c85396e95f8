// What keeping output across a daemon restart costs (issue 12.2, isolation/descriptor_store.hpp):
// two corrald instances of this build, one with --keep-output=on and one with off, measured in the
// same run with their rounds interleaved (so the machine's noise falls on both alike):
//   run /bin/true    POST /run latency in a `none` and a `default` session (one hold request per
//                    process, and its release)
//   session churn    `none` session create + delete (on: a keeper process per session)
//
//   corral_bench_keep_output [--rounds N (5)] [--runs N (60)] [--sessions N (20)]
// Prints ROW lines (bench_report.hpp): medians and p99 in ms, the ratio of on against off.

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/bench/bench_report.hpp"
#include "tests/bench/compared_daemon.hpp"
#include "tests/bench/daemon_client.hpp"

namespace {

using namespace corral::bench;
using nlohmann::json;

struct Instance : ComparedDaemon {
    std::vector<double> run_none, run_default, churn;
};

std::string create_session(DaemonConnection& c, const std::string& policy) {
    Response r = c.request("POST", "/v1/sessions", json({{"policy", policy}}).dump());
    if (r.status != 201) return "";
    return json::parse(r.body, nullptr, false).value("id", "");
}

/// `runs` runs of /bin/true in a fresh session of `policy`; false on any failure.
bool measure_runs(DaemonConnection& c, const std::string& policy, int runs,
                  std::vector<double>& samples) {
    const std::string sid = create_session(c, policy);
    if (sid.empty()) return false;
    bool ok = true;
    for (int i = 0; i < runs && ok; ++i) {
        const double t0 = now_ms();
        Response r = c.request("POST", "/v1/sessions/" + sid + "/run", R"({"argv":["/bin/true"]})");
        ok = r.status == 200 && r.body.find("\"exitCode\":0") != std::string::npos;
        if (ok && i > 0) samples.push_back(now_ms() - t0);  // the first pays the session's warm-up
    }
    ok = c.request("DELETE", "/v1/sessions/" + sid).status / 100 == 2 && ok;
    return ok;
}

bool measure_churn(DaemonConnection& c, int sessions, std::vector<double>& samples) {
    for (int i = 0; i < sessions; ++i) {
        const double t0 = now_ms();
        const std::string sid = create_session(c, "none");
        if (sid.empty()) return false;
        if (c.request("DELETE", "/v1/sessions/" + sid).status / 100 != 2) return false;
        samples.push_back(now_ms() - t0);
    }
    return true;
}

void print_pair(const std::string& group, const std::vector<double>& on,
                const std::vector<double>& off) {
    const double base = quantile(off, 0.5);
    print_row(group, "--keep-output=off", base, quantile(off, 0.99), "ms", base, "baseline");
    const double median = quantile(on, 0.5);
    char note[64];
    std::snprintf(note, sizeof note, "%+.3f ms", median - base);
    print_row(group, "--keep-output=on", median, quantile(on, 0.99), "ms", base, note);
}

}  // namespace

int main(int argc, char** argv) {
    int rounds = 5, runs = 60, sessions = 20;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string a = argv[i];
        if (a == "--rounds") rounds = std::atoi(argv[i + 1]);
        if (a == "--runs") runs = std::atoi(argv[i + 1]);
        if (a == "--sessions") sessions = std::atoi(argv[i + 1]);
    }
    std::vector<Instance> instances;
    for (const char* mode : {"on", "off"}) {
        const std::string option = std::string("--keep-output=") + mode;
        Instance one;
        if (!start_compared_daemon(one, option, {option})) return 1;
        instances.push_back(std::move(one));
    }
    for (int round = 0; round < rounds; ++round) {
        for (auto& one : instances) {
            DaemonConnection c(one.socket);
            if (!c.connected() || !measure_runs(c, "none", runs, one.run_none) ||
                !measure_runs(c, "default", runs, one.run_default) ||
                !measure_churn(c, sessions, one.churn)) {
                std::fprintf(stderr, "round %d against %s failed\n", round, one.label.c_str());
                return 1;
            }
        }
    }
    print_pair("run /bin/true (none)", instances[0].run_none, instances[1].run_none);
    print_pair("run /bin/true (default)", instances[0].run_default, instances[1].run_default);
    print_pair("session create+delete (none)", instances[0].churn, instances[1].churn);
    return 0;
}
