#pragma once
// Prometheus text exposition (version 0.0.4) for GET /metrics: a latency histogram per route and
// the small helpers that render gauges. Pure data, no Asio or session manager: unit-tested alone.
// Event-loop thread only (no locks), like the rest of the API.

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>

namespace corral::daemon {

/// Request latencies per (method, route pattern), as a Prometheus histogram.
class RequestMetrics {
  public:
    /// Upper bounds in seconds. Streams (exec, follow) stay open for a command's lifetime, hence
    /// the long tail.
    static constexpr std::array<double, 14> kBuckets = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                                        0.05,   0.1,   0.25,   0.5,   1,    5,
                                                        30,     300};

    /// Records one request. `route` is the matched pattern ("/v1/sessions/{sid}/run"), or a
    /// fixed word for requests no route matched, so the label set stays bounded.
    void observe(std::string_view method, std::string_view route, double seconds);
    /// Appends `corral_http_request_duration_seconds` (HELP, TYPE, buckets, sum, count).
    void render(std::string& out) const;

  private:
    struct Series {
        std::array<uint64_t, kBuckets.size()> buckets{};  ///< non-cumulative counts per bucket
        uint64_t count = 0;
        double sum = 0;
    };
    std::map<std::pair<std::string, std::string>, Series, std::less<>> series_;
};

/// A label value escaped for the text format (backslash, double quote, newline).
std::string prometheus_escape(std::string_view value);
/// Appends "# HELP name help\n# TYPE name type\n".
void prometheus_header(std::string& out, std::string_view name, std::string_view type,
                       std::string_view help);
/// Appends one sample line: name{labels} value. `labels` is already rendered (`a="b",c="d"`).
void prometheus_sample(std::string& out, std::string_view name, std::string_view labels,
                       double value);

}  // namespace corral::daemon
