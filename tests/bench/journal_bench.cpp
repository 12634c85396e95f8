// corral_bench_journal: what the journal adds to each change it records
// (sessions/recovery/journal.hpp).
// Appends a process-start record (the one every run/spawn writes) N times with each sync policy
// and prints the median and p99 per append, next to a bare write() of the same bytes; then the
// cost of one compaction of a snapshot of S sessions. Usage: corral_bench_journal [DIR] [N] [S]
// (DIR: where to write, default /var/tmp — the file system of the daemon's state dir is what
// matters: fdatasync on tmpfs is free, on a disk it is a device flush).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "sessions/recovery/journal.hpp"
#include "sessions/recovery/journal_records.hpp"

namespace {

using namespace corral;
using Clock = std::chrono::steady_clock;

JournalProcess sample_process(int n) {
    JournalProcess p;
    p.id = "p" + std::to_string(n);
    p.pid = 100000 + n;
    p.start_ticks = 123456789;
    p.argv = {"/bin/bash", "-c", "npm test -- --reporter dot"};
    p.command = "npm test -- --reporter dot";
    p.cwd = "/workspace/app";
    p.started_at = std::chrono::system_clock::now();
    p.timeout_ms = 600000;
    return p;
}

JournalSession sample_session(int n) {
    JournalSession s;
    s.id = "s" + std::to_string(n);
    s.policy = "default";
    s.env = {{"CI", "1"}, {"NODE_ENV", "test"}, {"HOME", "/workspace"}};
    s.cwd = "/workspace";
    s.ports = {40000, 40001};
    s.full_token = std::string(43, 'f');
    s.restricted_token = std::string(43, 'r');
    for (int i = 1; i <= 20; ++i) s.processes.push_back(sample_process(i));
    return s;
}

struct Stats {
    double median_us, p99_us;
};

Stats summarize(std::vector<double> us) {
    std::sort(us.begin(), us.end());
    return {us[us.size() / 2], us[us.size() * 99 / 100]};
}

Stats time_appends(const std::string& path, JournalSync sync, int count) {
    std::filesystem::remove(path);
    auto journal = Journal::open(path, 0, sync);
    if (!journal) {
        std::fprintf(stderr, "%s\n", journal.error().describe().c_str());
        std::exit(1);
    }
    std::vector<double> us;
    for (int i = 0; i < count; ++i) {
        const auto record = process_record("s1", sample_process(i + 1));
        const auto start = Clock::now();
        if (!journal->append(record)) std::exit(1);
        us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
    }
    return summarize(us);
}

Stats time_bare_writes(const std::string& path, int count) {
    const std::string bytes = frame_journal_record(process_record("s1", sample_process(1)));
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
    std::vector<double> us;
    for (int i = 0; i < count; ++i) {
        const auto start = Clock::now();
        if (::write(fd, bytes.data(), bytes.size()) < 0) std::exit(1);
        us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
    }
    ::close(fd);
    return summarize(us);
}

}  // namespace

int main(int argc, char** argv) {
    const std::string dir = argc > 1 ? argv[1] : "/var/tmp";
    const int count = argc > 2 ? std::stoi(argv[2]) : 2000;
    const int sessions = argc > 3 ? std::stoi(argv[3]) : 500;
    const std::string path = dir + "/corral-bench-journal-" + std::to_string(::getpid());
    std::printf("journal append of a process record (%zu bytes), %d times, in %s\n",
                frame_journal_record(process_record("s1", sample_process(1))).size(), count,
                dir.c_str());
    std::printf("%-34s %12s %12s\n", "", "median us", "p99 us");
    const Stats bare = time_bare_writes(path, count);
    std::printf("%-34s %12.1f %12.1f\n", "bare write() (baseline)", bare.median_us, bare.p99_us);
    const Stats none = time_appends(path, JournalSync::none, count);
    std::printf("%-34s %12.1f %12.1f\n", "append, --journal-sync=none", none.median_us,
                none.p99_us);
    const Stats data = time_appends(path, JournalSync::data, std::min(count, 500));
    std::printf("%-34s %12.1f %12.1f\n", "append, --journal-sync=data", data.median_us,
                data.p99_us);

    std::vector<nlohmann::json> snapshot;
    for (int i = 0; i < sessions; ++i)
        for (auto& record : journal_snapshot(sample_session(i))) snapshot.push_back(record);
    auto journal = Journal::open(path, 0, JournalSync::none);
    const auto start = Clock::now();
    if (!journal || !journal->compact(snapshot)) return 1;
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    std::printf("compaction of %d sessions x 20 processes: %.1f ms, %.1f KiB\n", sessions, ms,
                journal->size() / 1024.0);
    std::filesystem::remove(path);
    return 0;
}
