#pragma once
// One HTTP request and its response on a keep-alive connection. The connection reads the header;
// the handler then reads the body (whole, with a limit, or chunk by chunk for uploads) and writes
// exactly one response: JSON, a streamed file, or a chunked NDJSON stream.
//
// Bodies are read through a buffer_body parser, so an upload is never held in memory as a whole:
// each chunk goes to its sink (the file service's write transaction) before the next is read.
// If a handler answers without reading the body (an error, a refused token), the connection is
// closed after the response instead of parsing the unread body as the next request.

// clang-format off
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded
// clang-format on

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "base/asio.hpp"
#include "base/error.hpp"
#include "supervisor/daemon/auth.hpp"
#include "supervisor/daemon/http_errors.hpp"
#include "supervisor/daemon/json_stream.hpp"
#include "supervisor/daemon/router.hpp"

namespace corral::daemon {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

/// The socket type of both listeners (Unix and TCP), so the HTTP code is not a template.
using Socket = asio::generic::stream_protocol::socket;
/// Request parser whose body is handed out in caller-provided chunks.
using RequestParser = http::request_parser<http::buffer_body>;

/// Bounds how long a connection waits for its client: armed before a read, it cancels the
/// socket's pending operations when the time is up, so a client that sends one byte a second
/// (slowloris) or stops in the middle of a body cannot hold a connection forever (issue 12
/// item 4). Owned by the connection; event-loop thread only.
class ReadWatch {
  public:
    ReadWatch(const asio::any_io_executor& executor, Socket& socket);
    ~ReadWatch();
    ReadWatch(const ReadWatch&) = delete;
    ReadWatch& operator=(const ReadWatch&) = delete;

    /// Starts (or restarts) the countdown: after `limit`, pending reads and writes fail with
    /// operation_aborted and expired() turns true.
    void arm(std::chrono::milliseconds limit);
    /// Stops the countdown (the handler is working; the client is not being waited for).
    void disarm();
    /// Whether the last countdown ran out.
    bool expired() const;

  private:
    struct State;
    std::shared_ptr<State> state_;
};

/// True for errors that are the client's doing or its going away (malformed HTTP, EOF, reset,
/// a timeout this server imposed): nothing for the daemon's log.
bool is_client_error(const beast::error_code& ec);
/// True for HTTP parse errors (bad request line, Content-Length, chunk size, header limit).
bool is_http_parse_error(const beast::error_code& ec);

/// One request/response exchange.
class Exchange {
  public:
    /// `watch` (optional) bounds each wait for body bytes to `body_timeout`, each write of the
    /// response to `write_timeout`, and a response of known extent to `min_write_rate` bytes a
    /// second on average after its first `write_timeout`.
    Exchange(Socket& socket, beast::flat_buffer& buffer, RequestParser& parser, Listener listener,
             ReadWatch* watch = nullptr,
             std::chrono::milliseconds body_timeout = std::chrono::seconds(30),
             std::chrono::milliseconds write_timeout = std::chrono::seconds(30),
             size_t min_write_rate = 1024 * 1024);

    /// Request method ("GET"), path (without query) and decoded query parameters.
    const std::string& method() const { return method_; }
    const std::string& path() const { return path_; }
    const QueryParams& query() const { return query_; }
    /// A request header ("" when absent).
    std::string header(std::string_view name) const;
    Listener listener() const { return listener_; }
    /// The connection, for watching it while a handler waits (disconnect_watch.hpp).
    Socket& socket() { return socket_; }
    /// How long one write to the client may wait (a WebSocket bounds its frames by it too).
    std::chrono::milliseconds write_timeout() const { return write_timeout_; }

    /// Reads the whole body; 413 too_large (thrown as ApiFailure) beyond `limit` bytes, at once
    /// when Content-Length says so (the body is then not read; the connection closes). `what`
    /// names the body in that message ("policy", "request body").
    asio::awaitable<std::string> read_body(size_t limit, const char* what = "request body");
    /// Reads the body chunk by chunk into `sink`; a failing sink stops the upload and its Error
    /// is returned (the rest of the body is not read; the connection will close). A malformed
    /// body (bad chunk size) is a 400 and a client that stops sending for the body timeout a
    /// 408, both thrown as ApiFailure.
    asio::awaitable<Status> read_body_chunks(const std::function<Status(std::string_view)>& sink);

    /// Sends a JSON response.
    asio::awaitable<void> send_json(unsigned status, const nlohmann::json& body);
    /// Sends a JSON response whose streamed(i) placeholders are written by `sources[i]` while
    /// the client reads (json_stream.hpp): the connection holds one piece at a time. A body of
    /// one piece goes with Content-Length as any other; a longer one is chunked.
    asio::awaitable<void> send_json(unsigned status, const nlohmann::json& body,
                                    std::vector<PieceSource> sources);
    /// Sends a text response of `content_type` (GET /metrics).
    asio::awaitable<void> send_text(unsigned status, std::string_view content_type,
                                    const std::string& body);
    /// Sends an API error ({"error": ...}); adds Allow for 405 when `allow` is non-empty.
    asio::awaitable<void> send_error(const ApiError& error, const std::string& allow = "");
    /// Streams `size` bytes of a file descriptor (from its current offset) as the body
    /// (application/octet-stream). With `content_range` ("bytes 0-9/100") the status is 206
    /// Partial Content. Returns false when the file ended early or failed (the connection is then
    /// closed, since the promised Content-Length cannot be honoured).
    asio::awaitable<bool> send_file(int fd, uint64_t size, const std::string& content_range = "");

    /// Starts a chunked NDJSON response (status 200).
    asio::awaitable<void> begin_ndjson() { return begin_chunked("application/x-ndjson"); }
    /// Starts a chunked response of `content_type` (`event_stream`: not cached). To an HTTP/1.0
    /// client the body goes unframed instead and the connection is closed after it.
    asio::awaitable<void> begin_chunked(std::string_view content_type, bool event_stream = true,
                                        unsigned status = 200);
    /// Sends lines (each already ending in '\n') as one chunk.
    asio::awaitable<void> send_chunk(std::string_view data);
    /// Ends the chunked response.
    asio::awaitable<void> end_chunked();

    /// Whether a response was started (errors after that cannot be sent as JSON).
    bool response_started() const { return response_started_; }
    /// Whether the connection may carry another request after this one.
    bool keep_alive() const;
    /// Forces the connection to close after this response (e.g. daemon shutting down).
    void close_after() { force_close_ = true; }

    /// For a WebSocket upgrade (terminal_socket.cpp): the request, and (with socket() above) a
    /// mark that the connection now belongs to the WebSocket (no JSON error, no next request).
    const RequestParser::value_type& request() const { return parser_.get(); }
    void mark_upgraded() {
        response_started_ = true;
        force_close_ = true;
    }

  private:
    template <class Response>
    void prepare(Response& response);
    /// Runs one write of the response, bounded by the write timeout: a client that takes
    /// nothing for that long is dropped (timed_out, which is not logged).
    template <class Write>
    asio::awaitable<void> bounded(Write write);
    /// From here on, the response is held to the minimum rate (send_pieces, send_file).
    void begin_rate_bound();
    /// Drops a rate-bound response that has fallen below the minimum rate (timed_out).
    void check_rate();
    /// The body `next` produces, as one Content-Length response when it is one piece, else
    /// chunked.
    asio::awaitable<void> send_pieces(unsigned status, std::string_view content_type,
                                      const PieceSource& next);

    Socket& socket_;
    beast::flat_buffer& buffer_;
    RequestParser& parser_;
    Listener listener_;
    ReadWatch* watch_;
    std::chrono::milliseconds body_timeout_;
    std::chrono::milliseconds write_timeout_;
    size_t min_write_rate_;
    /// Rate bound of the response being written: when it began and the bytes written since.
    std::optional<std::chrono::steady_clock::time_point> rate_since_;
    uint64_t rate_bytes_ = 0;
    std::string method_;
    std::string path_;
    QueryParams query_;
    /// An HTTP/1.0 client knows no chunked encoding (RFC 9112 7.1: never send it one): a body of
    /// unknown length goes to it unframed, and the connection's close ends it.
    bool unframed_body() const;
    bool response_started_ = false;
    bool force_close_ = false;
    bool sent_100_continue_ = false;
};

}  // namespace corral::daemon
