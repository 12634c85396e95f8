#pragma once
// A small blocking HTTP/1.1 client for talking to corrald from the `corral` command line.
// One request per connection (`Connection: close`): a CLI makes a handful of calls, so keep-alive
// would buy nothing and cost a state machine. Bodies go out from memory or streamed from a file
// descriptor (Content-Length when the size is known, chunked when it is not, e.g. stdin); responses
// are read with Content-Length, chunked or read-to-close framing, in pieces or line by line
// (NDJSON).

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/error.hpp"
#include "base/unique_fd.hpp"

namespace corral::cli {

/// The socket corrald listens on when nothing else is said.
inline constexpr const char* kDefaultDaemonSocket = "/run/corral/corrald.sock";

/// Where corrald listens, and the bearer token to present (empty: none).
struct DaemonAddress {
    std::string unix_path;  ///< AF_UNIX socket path; used when tcp_port == 0
    std::string tcp_host;   ///< numeric IPv4 address for TCP ("127.0.0.1")
    uint16_t tcp_port = 0;  ///< TCP port; 0 means "use unix_path"
    std::string token;      ///< sent as `Authorization: Bearer <token>` when not empty

    /// "/run/corral/corrald.sock" or "127.0.0.1:8080", for error messages.
    std::string describe() const;
};

/// Builds the address from --socket / --token (empty when not given) and the environment values of
/// CORRAL_SOCKET / CORRAL_TOKEN (empty when unset); flags win over the environment. A socket value
/// of the form "tcp://HOST:PORT" selects TCP; anything else is a Unix socket path.
Result<DaemonAddress> resolve_daemon_address(const std::string& socket_flag,
                                             const std::string& token_flag,
                                             const std::string& socket_env,
                                             const std::string& token_env);

/// Connects to corrald; the error names the address tried and hints that corrald may not be
/// running.
Result<UniqueFd> connect_to_daemon(const DaemonAddress& address);

/// One request. The body is `body`, unless `body_fd` >= 0: then it is streamed from that
/// descriptor, `body_size` bytes when known, or with chunked transfer encoding until EOF when
/// body_size is unset.
struct HttpRequest {
    std::string method;  ///< "GET", "POST", ...
    std::string target;  ///< "/v1/sessions?x=y", already encoded
    std::vector<std::pair<std::string, std::string>>
        headers;                        ///< extra headers (Content-Type, ...)
    std::string body;                   ///< in-memory body
    int body_fd = -1;                   ///< streamed body source (not owned)
    std::optional<uint64_t> body_size;  ///< bytes to stream from body_fd
};

/// Status line and headers of a response.
struct HttpResponseHead {
    int status = 0;
    std::string reason;
    std::map<std::string, std::string>
        headers;  ///< names lower-cased; repeated headers joined with ", "

    /// The header's value, if present (`name` in any case).
    std::optional<std::string> header(const std::string& name) const;
};

/// Writes `request` to the connected socket `fd`, adding Host, Authorization (when `token` is not
/// empty), Content-Length or Transfer-Encoding, and Connection: close.
Status send_request(int fd, const HttpRequest& request, const std::string& token);

/// Reads one response from a connected socket: the head, then the body with its framing removed,
/// in pieces or line by line. Bodies are never held whole unless the caller asks (read_all).
class HttpResponseReader {
  public:
    /// Takes ownership of the connected socket.
    explicit HttpResponseReader(UniqueFd fd);

    /// Reads the status line and headers (skipping any 1xx interim responses); call once, first.
    Result<HttpResponseHead> read_head();
    /// Reads up to `capacity` body bytes into `out`; returns 0 at the end of the body.
    Result<size_t> read_body(char* out, size_t capacity);
    /// The next body line without its "\n" (and "\r"); nullopt at the end of the body. A last line
    /// without a newline is still returned. Lines may span any number of chunks.
    Result<std::optional<std::string>> read_line();
    /// The rest of the body, failing if it exceeds `limit` bytes.
    Result<std::string> read_all(size_t limit = 64u << 20);

  private:
    enum class Framing { Length, Chunked, UntilClose };

    Result<size_t> fill();
    Result<std::string> read_protocol_line();
    Result<size_t> read_chunked(char* out, size_t capacity);
    size_t take_buffered(char* out, size_t capacity);
    Status begin_chunk();

    UniqueFd fd_;
    std::string buffer_;  // bytes read from the socket, not yet consumed
    size_t buffer_pos_ = 0;
    bool socket_eof_ = false;
    Framing framing_ = Framing::UntilClose;
    uint64_t remaining_ = 0;  // body bytes left (Length) or in the current chunk (Chunked)
    bool body_done_ = false;
    std::string pending_line_;  // decoded body bytes read by read_line but not yet returned
};

/// A response whose body was read whole.
struct HttpResponse {
    HttpResponseHead head;
    std::string body;
};

/// Sends requests to one corrald address; each call opens a fresh connection.
class HttpClient {
  public:
    explicit HttpClient(DaemonAddress address) : address_(std::move(address)) {}

    /// Sends the request and reads the head; the body is left in the returned reader to stream.
    Result<std::pair<HttpResponseHead, HttpResponseReader>> open(const HttpRequest& request) const;
    /// Sends the request and reads the whole response (body capped at 64 MiB).
    Result<HttpResponse> fetch(const HttpRequest& request) const;
    /// The address requests go to.
    const DaemonAddress& address() const { return address_; }

  private:
    DaemonAddress address_;
};

/// Percent-encodes a query value or path segment (RFC 3986 unreserved characters stay as they are;
/// "/" too when `keep_slash`, so file paths in queries stay readable).
std::string url_encode(const std::string& value, bool keep_slash = true);

}  // namespace corral::cli
