#include "supervisor/daemon/router.hpp"

#include <algorithm>

namespace corral::daemon {
namespace {

std::vector<std::string_view> split_path(std::string_view path) {
    std::vector<std::string_view> out;
    size_t pos = 0;
    if (!path.empty() && path.front() == '/') pos = 1;
    while (pos <= path.size()) {
        size_t end = path.find('/', pos);
        if (end == std::string_view::npos) end = path.size();
        out.push_back(path.substr(pos, end - pos));
        pos = end + 1;
    }
    return out;
}

bool is_placeholder(std::string_view segment) {
    return segment.size() > 2 && segment.front() == '{' && segment.back() == '}';
}

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/// Matches `segments` against one route's pattern; fills `params` on success.
bool match_segments(const std::vector<std::string>& pattern,
                    const std::vector<std::string_view>& segments, RouteParams* params) {
    if (pattern.size() != segments.size()) return false;
    RouteParams captured;
    for (size_t i = 0; i < pattern.size(); ++i) {
        if (is_placeholder(pattern[i])) {
            auto value = percent_decode(segments[i]);
            if (segments[i].empty() || !value) return false;
            captured[pattern[i].substr(1, pattern[i].size() - 2)] = std::move(*value);
        } else if (pattern[i] != segments[i]) {
            return false;
        }
    }
    if (params) *params = std::move(captured);
    return true;
}

}  // namespace

void Router::add(std::string_view method, std::string_view pattern, int route_id) {
    Route route{std::string(method), {}, route_id};
    for (auto segment : split_path(pattern)) route.segments.emplace_back(segment);
    routes_.push_back(std::move(route));
}

RouteMatch Router::match(std::string_view method, std::string_view path) const {
    RouteMatch result;
    const auto segments = split_path(path);
    for (const auto& route : routes_) {
        if (route.method == method) {
            if (match_segments(route.segments, segments, &result.params)) {
                result.kind = RouteMatch::Kind::found;
                result.route_id = route.id;
                result.allowed.clear();
                return result;
            }
        } else if (match_segments(route.segments, segments, nullptr)) {
            if (std::find(result.allowed.begin(), result.allowed.end(), route.method) ==
                result.allowed.end())
                result.allowed.push_back(route.method);
        }
    }
    result.kind =
        result.allowed.empty() ? RouteMatch::Kind::not_found : RouteMatch::Kind::method_not_allowed;
    return result;
}

std::pair<std::string_view, std::string_view> split_target(std::string_view target) {
    const size_t q = target.find('?');
    if (q == std::string_view::npos) return {target, {}};
    return {target.substr(0, q), target.substr(q + 1)};
}

std::optional<std::string> percent_decode(std::string_view text, bool plus_is_space) {
    std::string out;
    out.reserve(text.size());
    for (size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (c == '%') {
            if (i + 2 >= text.size()) return std::nullopt;
            const int hi = hex_value(text[i + 1]);
            const int lo = hex_value(text[i + 2]);
            if (hi < 0 || lo < 0) return std::nullopt;
            const char decoded = static_cast<char>(hi * 16 + lo);
            // A NUL would silently truncate a path in every C API below us.
            if (decoded == '\0') return std::nullopt;
            out.push_back(decoded);
            i += 2;
        } else if (c == '+' && plus_is_space) {
            out.push_back(' ');
        } else {
            out.push_back(c);
        }
    }
    return out;
}

std::optional<std::pair<std::string, std::string>> check_query(std::string_view query) {
    size_t pos = 0;
    while (pos < query.size()) {
        size_t end = query.find('&', pos);
        if (end == std::string_view::npos) end = query.size();
        const auto pair = query.substr(pos, end - pos);
        pos = end + 1;
        const size_t eq = pair.find('=');
        const auto raw_key = pair.substr(0, eq);
        const auto raw_value = eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1);
        const auto key = percent_decode(raw_key, true);
        const auto value = percent_decode(raw_value, true);
        if (key && value) continue;
        const std::string name = key ? "query parameter `" + *key + "`" : "a query parameter's name";
        auto has_nul = [](std::string_view raw) {
            for (size_t i = 0; i + 2 < raw.size(); ++i)
                if (raw[i] == '%' && raw[i + 1] == '0' && raw[i + 2] == '0') return true;
            return false;
        };
        if (has_nul(raw_key) || has_nul(raw_value))
            return std::pair<std::string, std::string>{
                "nul_byte", name + " contains a NUL byte (%00), which a path cannot hold"};
        return std::pair<std::string, std::string>{
            "bad_query", name + " has a malformed %-escape (% must be followed by two hex digits)"};
    }
    return std::nullopt;
}

QueryParams parse_query(std::string_view query) {
    QueryParams params;
    size_t pos = 0;
    while (pos <= query.size() && !query.empty()) {
        size_t end = query.find('&', pos);
        if (end == std::string_view::npos) end = query.size();
        const auto pair = query.substr(pos, end - pos);
        const size_t eq = pair.find('=');
        auto key = percent_decode(pair.substr(0, eq), true);
        auto value = eq == std::string_view::npos ? std::optional<std::string>("")
                                                  : percent_decode(pair.substr(eq + 1), true);
        if (key && value && !key->empty()) params[*key] = std::move(*value);
        pos = end + 1;
    }
    return params;
}

}  // namespace corral::daemon
