#include "sessions/network/proxy_request.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <charconv>

namespace corral {
namespace {

Error invalid(const std::string& why) {
    return sys_error(EINVAL, why);
}

std::string lower(std::string_view text) {
    std::string out(text);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

bool is_token_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) ||
           std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool iequals(std::string_view a, std::string_view b) {
    return lower(a) == lower(b);
}

std::string_view trim(std::string_view text) {
    while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
    while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
    return text;
}

Status parse_header_line(std::string_view line, ProxyRequest& request) {
    if (line.front() == ' ' || line.front() == '\t')
        return invalid("folded header lines (obs-fold) are not accepted");
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0)
        return invalid("a header line without `name:`");
    std::string_view name = line.substr(0, colon);
    if (!std::all_of(name.begin(), name.end(), is_token_char))
        return invalid("header name `" + std::string(name) +
                       "` has characters a header name cannot have (space before `:`?)");
    request.headers.emplace_back(std::string(name), std::string(trim(line.substr(colon + 1))));
    return {};
}

// The checks that keep the proxy and the origin reading one request the same way.
Status check_framing(const ProxyRequest& request) {
    size_t hosts = 0, lengths = 0;
    bool chunked = false;
    for (const auto& [name, value] : request.headers) {
        if (iequals(name, "host")) ++hosts;
        if (iequals(name, "content-length")) ++lengths;
        if (iequals(name, "transfer-encoding")) chunked = true;
    }
    if (hosts > 1) return invalid("more than one Host header");
    if (lengths > 1) return invalid("more than one Content-Length header");
    if (lengths && chunked) return invalid("both Content-Length and Transfer-Encoding");
    return {};
}

// A Host header, where given, must name the request's own target (for CONNECT too): a proxy
// that checks one name and a server that serves another is a way around the allow-list.
Status check_host_header(const ProxyRequest& request, uint16_t default_port) {
    for (const auto& [name, value] : request.headers) {
        if (!iequals(name, "host")) continue;
        auto host = parse_proxy_authority(value, default_port);
        if (!host) return invalid("Host header `" + value + "`: " + host.error().message);
        if (host->host != request.authority.host || host->port != request.authority.port)
            return invalid("Host header `" + value + "` does not match the request target `" +
                           request.authority.text() + "`");
    }
    return {};
}

}  // namespace

std::string ProxyAuthority::text() const {
    const bool v6 = address && address->family == AF_INET6;
    return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

Result<ProxyAuthority> parse_proxy_authority(std::string_view text, uint16_t default_port) {
    if (text.empty()) return invalid("empty host");
    if (text.find('@') != std::string_view::npos)
        return invalid("user information (`user@host`) is not accepted in a proxy target");
    std::string_view host = text, port_text;
    if (text.front() == '[') {
        const size_t close = text.find(']');
        if (close == std::string_view::npos) return invalid("`[` without `]`");
        host = text.substr(1, close - 1);
        std::string_view rest = text.substr(close + 1);
        if (!rest.empty()) {
            if (rest.front() != ':') return invalid("garbage after `]`");
            port_text = rest.substr(1);
            if (port_text.empty()) return invalid("empty port");
        }
    } else if (const size_t colon = text.rfind(':'); colon != std::string_view::npos) {
        host = text.substr(0, colon);
        port_text = text.substr(colon + 1);
        if (port_text.empty()) return invalid("empty port");
        if (host.find(':') != std::string_view::npos)
            return invalid("write IPv6 addresses in brackets: [::1]:443");
    }
    ProxyAuthority authority;
    if (port_text.empty()) {
        if (default_port == 0) return invalid("a port is required (host:port)");
        authority.port = default_port;
    } else {
        unsigned port = 0;
        auto [end, ec] =
            std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
        if (ec != std::errc() || end != port_text.data() + port_text.size() || port == 0 ||
            port > 65535)
            return invalid("port `" + std::string(port_text) + "` is not a number from 1 to 65535");
        authority.port = static_cast<uint16_t>(port);
    }
    authority.address = IpAddress::parse(host);
    if (authority.address) {
        authority.host = authority.address->to_string();
        return authority;
    }
    if (host.starts_with("*") || !check_host_pattern(host).empty())
        return invalid("`" + std::string(host) + "` is not a host name or an address");
    authority.host = lower(host);
    if (authority.host.back() == '.') authority.host.pop_back();
    return authority;
}

Result<ProxyRequest> parse_proxy_request(std::string_view head) {
    if (!head.ends_with("\r\n\r\n")) return invalid("the request head does not end with CRLF CRLF");
    head.remove_suffix(2);  // keep each line's CRLF, drop the empty line's
    for (size_t i = 0; i < head.size(); ++i) {
        const char c = head[i];
        if (c == '\0') return invalid("a NUL byte in the request head");
        if (c == '\r' && (i + 1 >= head.size() || head[i + 1] != '\n'))
            return invalid("a bare CR in the request head");
        if (c == '\n' && (i == 0 || head[i - 1] != '\r'))
            return invalid("a bare LF in the request head");
    }
    ProxyRequest request;
    size_t start = 0;
    bool first = true;
    while (start < head.size()) {
        const size_t end = head.find("\r\n", start);
        std::string_view line = head.substr(start, end - start);
        start = end + 2;
        if (first) {
            first = false;
            const size_t a = line.find(' ');
            const size_t b = a == std::string_view::npos ? a : line.find(' ', a + 1);
            if (b == std::string_view::npos || line.find(' ', b + 1) != std::string_view::npos)
                return invalid("the request line is not `METHOD target HTTP/1.1`");
            request.method = std::string(line.substr(0, a));
            request.target = std::string(line.substr(a + 1, b - a - 1));
            request.version = std::string(line.substr(b + 1));
            if (request.method.empty() ||
                !std::all_of(request.method.begin(), request.method.end(), is_token_char))
                return invalid("bad method");
            if (request.version != "HTTP/1.1" && request.version != "HTTP/1.0")
                return invalid("unsupported version `" + request.version + "`");
            continue;
        }
        if (line.empty()) return invalid("an empty line inside the head");
        if (auto parsed = parse_header_line(line, request); !parsed) return parsed.error();
    }
    if (first) return invalid("no request line");
    if (auto framing = check_framing(request); !framing) return framing.error();

    uint16_t default_port = 0;
    if (request.is_connect()) {
        auto authority = parse_proxy_authority(request.target, 0);
        if (!authority) return std::move(authority.error().context("CONNECT target"));
        request.authority = std::move(*authority);
    } else {
        const std::string scheme = lower(request.target.substr(0, request.target.find("://") + 3));
        if (scheme == "https://")
            return sys_error(ENOTSUP, "https:// URLs go through CONNECT (set HTTPS_PROXY)");
        if (scheme != "http://")
            return sys_error(ENOTSUP, "this is a proxy: the target must be an absolute http:// "
                                      "URL or CONNECT host:port, not `" +
                                          request.target.substr(0, 64) + "`");
        std::string_view rest = std::string_view(request.target).substr(7);
        const size_t path_at = rest.find_first_of("/?#");
        auto authority = parse_proxy_authority(rest.substr(0, path_at), 80);
        if (!authority) return std::move(authority.error().context("URL"));
        request.authority = std::move(*authority);
        request.path = path_at == std::string_view::npos ? "/" : std::string(rest.substr(path_at));
        if (request.path.front() != '/') request.path = "/" + request.path;
        if (const size_t hash = request.path.find('#'); hash != std::string::npos)
            request.path.resize(hash);
        default_port = 80;
    }
    if (auto host =
            check_host_header(request, default_port ? default_port : request.authority.port);
        !host)
        return host.error();
    return request;
}

std::string origin_request_head(const ProxyRequest& request) {
    std::string head = request.method + " " + request.path + " " + request.version + "\r\n";
    bool has_host = false;
    for (const auto& [name, value] : request.headers) {
        const std::string key = lower(name);
        if (key == "connection" || key == "keep-alive" || key == "proxy-connection" ||
            key == "proxy-authorization" || key == "proxy-authenticate" || key == "te" ||
            key == "upgrade")
            continue;
        has_host = has_host || key == "host";
        head += name + ": " + value + "\r\n";
    }
    if (!has_host) {
        const bool default_port = request.authority.port == 80;
        std::string host = request.authority.text();
        if (default_port) host.resize(host.size() - 3);
        head += "Host: " + host + "\r\n";
    }
    head += "Connection: close\r\n\r\n";
    return head;
}

}  // namespace corral
