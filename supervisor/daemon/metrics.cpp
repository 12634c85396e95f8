#include "supervisor/daemon/metrics.hpp"

#include <charconv>
#include <cmath>

namespace corral::daemon {
namespace {

std::string format_number(double value) {
    if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
    // The shortest text that reads back as the same double, without exponent where it fits
    // ("0.0005", "12"; bucket bounds read as Prometheus and people write them).
    char buf[64];
    auto fixed = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::fixed);
    if (fixed.ec == std::errc()) return std::string(buf, fixed.ptr);
    auto general = std::to_chars(buf, buf + sizeof buf, value);
    return general.ec == std::errc() ? std::string(buf, general.ptr) : std::string("NaN");
}

}  // namespace

void RequestMetrics::observe(std::string_view method, std::string_view route, double seconds) {
    auto key = std::make_pair(std::string(method), std::string(route));
    Series& s = series_[key];
    size_t i = 0;
    while (i < kBuckets.size() && seconds > kBuckets[i]) ++i;
    if (i < kBuckets.size()) ++s.buckets[i];
    ++s.count;
    s.sum += seconds;
}

void RequestMetrics::render(std::string& out) const {
    constexpr std::string_view name = "corral_http_request_duration_seconds";
    prometheus_header(out, name, "histogram",
                      "Time from routing a request to the end of its response, by route.");
    for (const auto& [key, s] : series_) {
        const std::string labels = "method=\"" + prometheus_escape(key.first) + "\",route=\"" +
                                   prometheus_escape(key.second) + "\"";
        uint64_t cumulative = 0;
        for (size_t i = 0; i < kBuckets.size(); ++i) {
            cumulative += s.buckets[i];
            prometheus_sample(out, std::string(name) + "_bucket",
                              labels + ",le=\"" + format_number(kBuckets[i]) + "\"",
                              static_cast<double>(cumulative));
        }
        prometheus_sample(out, std::string(name) + "_bucket", labels + ",le=\"+Inf\"",
                          static_cast<double>(s.count));
        prometheus_sample(out, std::string(name) + "_sum", labels, s.sum);
        prometheus_sample(out, std::string(name) + "_count", labels, static_cast<double>(s.count));
    }
}

std::string prometheus_escape(std::string_view value) {
    std::string out;
    out.reserve(value.size());
    for (char c : value) {
        if (c == '\\')
            out += "\\\\";
        else if (c == '"')
            out += "\\\"";
        else if (c == '\n')
            out += "\\n";
        else
            out += c;
    }
    return out;
}

void prometheus_header(std::string& out, std::string_view name, std::string_view type,
                       std::string_view help) {
    out.append("# HELP ").append(name).append(" ").append(help).append("\n");
    out.append("# TYPE ").append(name).append(" ").append(type).append("\n");
}

void prometheus_sample(std::string& out, std::string_view name, std::string_view labels,
                       double value) {
    out.append(name);
    if (!labels.empty()) out.append("{").append(labels).append("}");
    out.append(" ").append(format_number(value)).append("\n");
}

}  // namespace corral::daemon
