// The Prometheus text rendering of GET /metrics: histogram buckets are cumulative and end with
// +Inf = count, label values are escaped, numbers read back exactly.

#include "supervisor/daemon/metrics.hpp"

#include <gtest/gtest.h>

#include <sstream>

namespace corral::daemon {
namespace {

std::string render(const RequestMetrics& m) {
    std::string out;
    m.render(out);
    return out;
}

bool has_line(const std::string& text, const std::string& line) {
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);)
        if (l == line) return true;
    return false;
}

TEST(Metrics, HistogramBucketsAreCumulativeAndEndWithInfEqualToCount) {
    RequestMetrics m;
    m.observe("GET", "/v1/health", 0.0004);
    m.observe("GET", "/v1/health", 0.003);
    m.observe("GET", "/v1/health", 1000);  // beyond the last bound: only +Inf holds it
    const std::string text = render(m);
    const std::string p = "corral_http_request_duration_seconds";
    const std::string l = "method=\"GET\",route=\"/v1/health\"";
    EXPECT_TRUE(has_line(text, "# TYPE " + p + " histogram")) << text;
    EXPECT_TRUE(has_line(text, p + "_bucket{" + l + ",le=\"0.0005\"} 1")) << text;
    EXPECT_TRUE(has_line(text, p + "_bucket{" + l + ",le=\"0.0025\"} 1")) << text;
    EXPECT_TRUE(has_line(text, p + "_bucket{" + l + ",le=\"0.005\"} 2")) << text;
    EXPECT_TRUE(has_line(text, p + "_bucket{" + l + ",le=\"300\"} 2")) << text;
    EXPECT_TRUE(has_line(text, p + "_bucket{" + l + ",le=\"+Inf\"} 3")) << text;
    EXPECT_TRUE(has_line(text, p + "_count{" + l + "} 3")) << text;
    EXPECT_TRUE(has_line(text, p + "_sum{" + l + "} 1000.0034")) << text;
}

TEST(Metrics, SeriesAreKeptApartByMethodAndRoute) {
    RequestMetrics m;
    m.observe("GET", "/v1/sessions", 0.01);
    m.observe("POST", "/v1/sessions", 0.01);
    m.observe("POST", "/v1/sessions", 0.01);
    const std::string text = render(m);
    EXPECT_TRUE(has_line(
        text, "corral_http_request_duration_seconds_count{method=\"GET\",route=\"/v1/sessions\"} 1"));
    EXPECT_TRUE(has_line(
        text, "corral_http_request_duration_seconds_count{method=\"POST\",route=\"/v1/sessions\"} 2"));
}

TEST(Metrics, LabelValuesAreEscaped) {
    EXPECT_EQ(prometheus_escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    std::string out;
    prometheus_sample(out, "x", "v=\"" + prometheus_escape("q\"") + "\"", 2);
    EXPECT_EQ(out, "x{v=\"q\\\"\"} 2\n");
}

TEST(Metrics, HeaderAndUnlabelledSample) {
    std::string out;
    prometheus_header(out, "corral_up", "gauge", "Always 1.");
    prometheus_sample(out, "corral_up", "", 1);
    EXPECT_EQ(out, "# HELP corral_up Always 1.\n# TYPE corral_up gauge\ncorral_up 1\n");
}

}  // namespace
}  // namespace corral::daemon
