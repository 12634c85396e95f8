#pragma once
// The request head a session's program sends to the egress proxy, parsed strictly: a CONNECT
// host:port (HTTPS and any other TLS), or an absolute-URI HTTP request ("GET http://host/path").
//
// Strict because a proxy and the server behind it that read one request two ways are how request
// smuggling works (RFC 9112 §11.2; CVE-2019-16276 in Go's net/http, CVE-2020-11724 in nginx):
// bare CR or LF, folded or space-before-colon headers, duplicate Host or Content-Length,
// Content-Length with Transfer-Encoding, userinfo in the authority and a Host header that names
// another host than the request target are all refused with 400, never guessed at. Pure logic.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/error.hpp"
#include "policies/egress_rules.hpp"

namespace corral {

/// Where a request wants to go.
struct ProxyAuthority {
    std::string host;                ///< a DNS name (lower case) or a numeric address
    uint16_t port = 0;
    std::optional<IpAddress> address;  ///< set when `host` is an IP literal
    /// "host:port" ("[v6]:port"), for messages and logs.
    std::string text() const;
};

/// One parsed request head.
struct ProxyRequest {
    std::string method;
    std::string target;   ///< as written
    std::string version;  ///< "HTTP/1.1" or "HTTP/1.0"
    std::vector<std::pair<std::string, std::string>> headers;
    ProxyAuthority authority;  ///< from the CONNECT target or the absolute URI
    std::string path;          ///< origin-form of an absolute URI ("/a?b"); "" for CONNECT
    bool is_connect() const { return method == "CONNECT"; }
};

/// Parses "host:port", "[v6]:port", or "host" (then `default_port`; 0 = a port is required).
/// EINVAL saying what is wrong.
Result<ProxyAuthority> parse_proxy_authority(std::string_view text, uint16_t default_port);
/// Parses a whole head (request line and headers, ending with the empty line). EINVAL for a
/// malformed or ambiguous request, ENOTSUP for a request this proxy does not serve (an origin-form
/// target, https:// without CONNECT), each with the reason.
Result<ProxyRequest> parse_proxy_request(std::string_view head);
/// The head to send to the origin server for an absolute-URI request: origin-form target, the
/// hop-by-hop and Proxy-* headers dropped, `Connection: close` (one request per connection, so a
/// second request pipelined behind it can only ever reach the same, checked destination).
std::string origin_request_head(const ProxyRequest& request);

}  // namespace corral
