#pragma once
// Shared by the benchmark programs: percentiles of a sample and the one row format that
// scripts/bench.sh collects into its table. Benchmarks print numbers; they never judge them.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace corral::bench {

/// Monotonic time in milliseconds, for whole-operation timing.
inline double now_ms() {
    using namespace std::chrono;
    return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

/// The q-quantile (0..1) of `samples` by nearest rank; 0 for an empty sample.
inline double quantile(std::vector<double> samples, double q) {
    if (samples.empty()) return 0;
    std::sort(samples.begin(), samples.end());
    size_t rank = static_cast<size_t>(q * static_cast<double>(samples.size() - 1) + 0.5);
    return samples[std::min(rank, samples.size() - 1)];
}

/// One line of the final table: `ROW<TAB>group<TAB>case<TAB>median<TAB>p99<TAB>unit<TAB>ratio
/// <TAB>note`. The ratio is against the group's baseline measured in the same run ("-" for none);
/// bench.sh greps for the ROW prefix, so programs may print anything else for humans.
inline void print_row(const std::string& group, const std::string& name, double median, double p99,
                      const std::string& unit, double baseline_median,
                      const std::string& note = "") {
    char ratio[32] = "-";
    if (baseline_median > 0 && median > 0)
        std::snprintf(ratio, sizeof ratio, "%.2fx", median / baseline_median);
    std::printf("ROW\t%s\t%s\t%.3f\t%.3f\t%s\t%s\t%s\n", group.c_str(), name.c_str(), median, p99,
                unit.c_str(), ratio, note.c_str());
    std::fflush(stdout);
}

/// A row for a case that could not be measured, with the reason in the note column.
inline void print_failed_row(const std::string& group, const std::string& name,
                             const std::string& why) {
    std::printf("ROW\t%s\t%s\t-\t-\t-\t-\t%s\n", group.c_str(), name.c_str(), why.c_str());
    std::fflush(stdout);
}

}  // namespace corral::bench
