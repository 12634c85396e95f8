#pragma once
// A small blocking HTTP/1.1 client for integration tests: Unix socket or TCP, keep-alive, whole
// responses or NDJSON streamed line by line. Built on Boost.Beast; no other dependencies.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace corral::testing {

/// One complete response.
struct HttpResponse {
    unsigned status = 0;
    std::map<std::string, std::string> headers;  ///< names lower-cased
    std::string body;
    /// The body parsed as JSON (null when it is not JSON).
    nlohmann::json json() const;
    /// error.code of a JSON error body ("" when absent).
    std::string error_code() const;
    /// error.message of a JSON error body ("" when absent).
    std::string error_message() const;
};

/// Extra request headers, e.g. {{"Authorization", "Bearer T"}}.
using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

/// Bearer header for `token` (empty token: no header).
HttpHeaders bearer(const std::string& token);

/// A keep-alive connection that reconnects when the server closed it.
class HttpClient {
  public:
    /// A client of the Unix socket at `path`.
    static HttpClient unix_socket(std::string path);
    /// A client of host:port over TCP.
    static HttpClient tcp(std::string host, uint16_t port);
    HttpClient(HttpClient&&) noexcept;
    HttpClient& operator=(HttpClient&&) noexcept;
    ~HttpClient();

    /// Sends a request and reads the whole response. Throws std::runtime_error on I/O failure.
    HttpResponse request(std::string_view method, std::string_view target, std::string body = "",
                         const HttpHeaders& headers = {});
    /// JSON shortcuts.
    HttpResponse get(std::string_view target, const HttpHeaders& headers = {});
    HttpResponse post(std::string_view target, const nlohmann::json& body,
                      const HttpHeaders& headers = {});
    HttpResponse del(std::string_view target, const HttpHeaders& headers = {});

    /// Sends a request and feeds each line of the (chunked NDJSON) response to `on_line` as it
    /// arrives; stops early (and drops the connection) when `on_line` returns false. Returns the
    /// status.
    unsigned stream_lines(std::string_view method, std::string_view target, std::string body,
                          const HttpHeaders& headers,
                          const std::function<bool(const std::string& line)>& on_line);

    /// How long one read or write may make no progress before a request throws (default 120 s,
    /// well below ctest's 600 s, so a hung daemon fails the test with a message).
    void set_idle_timeout(std::chrono::seconds timeout);

    /// Whether a connection could be opened at all (for waiting until the daemon listens).
    bool can_connect();

  private:
    struct Impl;
    explicit HttpClient(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

/// Percent-encodes a query value.
std::string url_encode(std::string_view text);

}  // namespace corral::testing
