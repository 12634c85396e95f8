#include "supervisor/daemon/exchange.hpp"

#include <unistd.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "supervisor/daemon/json_fields.hpp"

namespace corral::daemon {
namespace {

constexpr size_t kChunk = 256 * 1024;

}  // namespace

struct ReadWatch::State {
    explicit State(const asio::any_io_executor& executor, Socket& s)
        : timer(executor), socket(&s) {}
    asio::steady_timer timer;
    Socket* socket;  ///< null once the watch is gone
    bool expired = false;
};

ReadWatch::ReadWatch(const asio::any_io_executor& executor, Socket& socket)
    : state_(std::make_shared<State>(executor, socket)) {}

ReadWatch::~ReadWatch() {
    state_->socket = nullptr;
    state_->timer.cancel();
}

void ReadWatch::arm(std::chrono::milliseconds limit) {
    state_->expired = false;
    state_->timer.expires_after(limit);
    // Weak: a completion already queued when the connection ends must find nothing to cancel.
    state_->timer.async_wait([weak = std::weak_ptr<State>(state_)](const beast::error_code& ec) {
        auto state = weak.lock();
        if (ec || !state || !state->socket) return;
        state->expired = true;
        beast::error_code ignored;
        state->socket->cancel(ignored);
    });
}

void ReadWatch::disarm() {
    state_->timer.cancel();
}

bool ReadWatch::expired() const {
    return state_->expired;
}

bool is_http_parse_error(const beast::error_code& ec) {
    static const auto& http_category = http::make_error_code(http::error::bad_method).category();
    return ec.category() == http_category && ec != http::error::end_of_stream &&
           ec != http::error::partial_message && ec != http::error::need_buffer;
}

bool is_client_error(const beast::error_code& ec) {
    if (ec.category() == http::make_error_code(http::error::bad_method).category()) return true;
    return ec == asio::error::eof || ec == asio::error::broken_pipe ||
           ec == asio::error::connection_reset || ec == asio::error::connection_aborted ||
           ec == asio::error::operation_aborted || ec == asio::error::bad_descriptor ||
           ec == asio::error::not_connected || ec == asio::error::timed_out;
}

Exchange::Exchange(Socket& socket, beast::flat_buffer& buffer, RequestParser& parser,
                   Listener listener, ReadWatch* watch, std::chrono::milliseconds body_timeout,
                   std::chrono::milliseconds write_timeout, size_t min_write_rate)
    : socket_(socket),
      buffer_(buffer),
      parser_(parser),
      listener_(listener),
      watch_(watch),
      body_timeout_(body_timeout),
      write_timeout_(write_timeout),
      min_write_rate_(min_write_rate) {
    const auto& req = parser_.get();
    method_ = std::string(req.method_string());
    auto [path, query] = split_target(std::string_view(req.target().data(), req.target().size()));
    path_ = std::string(path);
    query_ = parse_query(query);
}

std::string Exchange::header(std::string_view name) const {
    const auto& req = parser_.get();
    auto it = req.find(beast::string_view(name.data(), name.size()));
    if (it == req.end()) return "";
    return std::string(it->value());
}

bool Exchange::unframed_body() const {
    return parser_.get().version() < 11;
}

bool Exchange::keep_alive() const {
    // Unread body bytes would be parsed as the next request: close instead.
    return !force_close_ && parser_.is_done() && parser_.get().keep_alive();
}

asio::awaitable<Status> Exchange::read_body_chunks(
    const std::function<Status(std::string_view)>& sink) {
    if (!parser_.is_done() && !sent_100_continue_ &&
        beast::iequals(header("Expect"), "100-continue")) {
        // curl waits for this before sending a large body.
        sent_100_continue_ = true;
        static constexpr char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
        co_await asio::async_write(socket_, asio::buffer(kContinue, sizeof kContinue - 1),
                                   asio::use_awaitable);
    }
    // As large as the body says it is, up to kChunk, and not zeroed: a run's JSON body is ~30
    // bytes, and a zeroed 256 KiB vector per request was an mmap, 64 page faults, a memset and
    // an munmap on every request (~6 % of corrald's loop in a profile of `run`, issue 18).
    const auto declared = parser_.content_length();
    const size_t capacity = declared ? std::clamp<size_t>(*declared, 1, kChunk) : kChunk;
    const std::unique_ptr<char[]> chunk(parser_.is_done() ? nullptr : new char[capacity]);
    while (!parser_.is_done()) {
        auto& body = parser_.get().body();
        body.data = chunk.get();
        body.size = capacity;
        beast::error_code ec;
        if (watch_) watch_->arm(body_timeout_);
        co_await http::async_read(socket_, buffer_, parser_,
                                  asio::redirect_error(asio::use_awaitable, ec));
        if (watch_) watch_->disarm();
        if (ec == asio::error::operation_aborted && watch_ && watch_->expired()) {
            throw ApiFailure({408, "body_timeout",
                              "the request body stopped arriving: no byte for " +
                                  std::to_string(body_timeout_.count()) + " ms",
                              nullptr});
        }
        if (is_http_parse_error(ec))
            throw ApiFailure(
                bad_request("malformed_body", "malformed request body: " + ec.message()));
        if (ec && ec != http::error::need_buffer) throw beast::system_error(ec);
        const size_t got = capacity - body.size;
        if (got == 0) continue;
        Status status = sink(std::string_view(chunk.get(), got));
        if (!status) co_return status;
    }
    co_return Status{};
}

asio::awaitable<std::string> Exchange::read_body(size_t limit, const char* what) {
    const std::string limit_text = "more than the limit of " + std::to_string(limit) + " bytes";
    if (auto declared = parser_.content_length(); declared && *declared > limit) {
        throw ApiFailure(
            {413, "too_large",
             std::string(what) + " is " + std::to_string(*declared) + " bytes, " + limit_text,
             nullptr});
    }
    std::string body;
    const std::function<Status(std::string_view)> sink = [&](std::string_view bytes) -> Status {
        if (body.size() + bytes.size() > limit)
            return sys_error(EFBIG, std::string(what) + " is " + limit_text);
        body.append(bytes);
        return {};
    };
    Status status = co_await read_body_chunks(sink);
    if (!status) throw ApiFailure(api_error(status.error()));
    co_return body;
}

template <class Response>
void Exchange::prepare(Response& response) {
    response.set(http::field::server, "corrald/" CORRAL_VERSION);
    response.keep_alive(keep_alive());
    response_started_ = true;
}

template <class Write>
asio::awaitable<void> Exchange::bounded(Write write) {
    beast::error_code ec;
    if (watch_) watch_->arm(write_timeout_);
    const size_t written = co_await write(asio::redirect_error(asio::use_awaitable, ec));
    if (watch_) watch_->disarm();
    if (!ec || ec == http::error::need_buffer) {
        rate_bytes_ += written;
        check_rate();
        co_return;
    }
    force_close_ = true;
    if (ec == asio::error::operation_aborted && watch_ && watch_->expired())
        throw beast::system_error(asio::error::make_error_code(asio::error::timed_out),
                                  "the client took no response bytes for " +
                                      std::to_string(write_timeout_.count()) + " ms");
    throw beast::system_error(ec);
}

void Exchange::begin_rate_bound() {
    rate_since_ = std::chrono::steady_clock::now();
    rate_bytes_ = 0;
}

void Exchange::check_rate() {
    if (!rate_since_ || min_write_rate_ == 0) return;
    // Allowed: one write timeout, plus the time the bytes taken so far need at the minimum rate.
    const auto allowed =
        write_timeout_ + std::chrono::milliseconds(rate_bytes_ * 1000 / min_write_rate_);
    const auto taken = std::chrono::steady_clock::now() - *rate_since_;
    if (taken <= allowed) return;
    force_close_ = true;
    throw beast::system_error(
        asio::error::make_error_code(asio::error::timed_out),
        "the client took " + std::to_string(rate_bytes_) + " response bytes in " +
            std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(taken).count()) +
            " ms, below the minimum of " + std::to_string(min_write_rate_) + " bytes/s");
}

asio::awaitable<void> Exchange::send_pieces(unsigned status, std::string_view content_type,
                                            const PieceSource& next) {
    std::string pending;
    bool more = true;
    while (more && pending.size() < kResponsePiece) more = next(pending);
    begin_rate_bound();
    const beast::string_view type(content_type.data(), content_type.size());
    if (!more) {
        http::response<http::string_body> res{static_cast<http::status>(status), 11};
        res.set(http::field::content_type, type);
        res.body() = std::move(pending);
        prepare(res);
        res.prepare_payload();
        co_await bounded([&](auto token) { return http::async_write(socket_, res, token); });
        co_return;
    }
    co_await begin_chunked(content_type, /*event_stream=*/false);
    // One piece is made only once the one before it was taken: that is the backpressure.
    do {
        co_await send_chunk(pending);
        pending.clear();
        while (more && pending.size() < kResponsePiece) more = next(pending);
    } while (more || !pending.empty());
    co_await end_chunked();
}

asio::awaitable<void> Exchange::send_json(unsigned status, const nlohmann::json& body) {
    http::response<http::string_body> res{static_cast<http::status>(status), 11};
    res.set(http::field::content_type, "application/json");
    res.body() = dump_json(body) + "\n";
    prepare(res);
    res.prepare_payload();
    co_await bounded([&](auto token) { return http::async_write(socket_, res, token); });
}

asio::awaitable<void> Exchange::send_json(unsigned status, const nlohmann::json& body,
                                          std::vector<PieceSource> sources) {
    const PieceSource next = streamed_json(body, std::move(sources));
    co_await send_pieces(status, "application/json", next);
}

asio::awaitable<void> Exchange::send_text(unsigned status, std::string_view content_type,
                                          const std::string& body) {
    http::response<http::string_body> res{static_cast<http::status>(status), 11};
    res.set(http::field::content_type, std::string(content_type));
    res.body() = body;
    prepare(res);
    res.prepare_payload();
    co_await bounded([&](auto token) { return http::async_write(socket_, res, token); });
}

asio::awaitable<void> Exchange::send_error(const ApiError& error, const std::string& allow) {
    http::response<http::string_body> res{static_cast<http::status>(error.status), 11};
    res.set(http::field::content_type, "application/json");
    if (!allow.empty()) res.set(http::field::allow, allow);
    res.body() = dump_json(error.to_json()) + "\n";
    prepare(res);
    res.prepare_payload();
    co_await bounded([&](auto token) { return http::async_write(socket_, res, token); });
}

asio::awaitable<bool> Exchange::send_file(int fd, uint64_t size, const std::string& content_range) {
    http::response<http::buffer_body> res{
        content_range.empty() ? http::status::ok : http::status::partial_content, 11};
    res.set(http::field::content_type, "application/octet-stream");
    res.set(http::field::accept_ranges, "bytes");
    if (!content_range.empty()) res.set(http::field::content_range, content_range);
    res.content_length(size);
    prepare(res);
    http::response_serializer<http::buffer_body> serializer{res};
    res.body().data = nullptr;
    res.body().more = true;
    begin_rate_bound();
    co_await bounded(
        [&](auto token) { return http::async_write_header(socket_, serializer, token); });

    // Not zeroed, and no larger than the file's range (see read_body_chunks).
    const size_t capacity = static_cast<size_t>(std::clamp<uint64_t>(size, 1, kChunk));
    const std::unique_ptr<char[]> chunk(new char[capacity]);
    uint64_t sent = 0;
    bool complete = true;
    while (sent < size) {
        // A regular file: a blocking read is short and bounded by the chunk size.
        const ssize_t n = ::read(fd, chunk.get(), std::min<uint64_t>(capacity, size - sent));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            complete = false;  // truncated under us or I/O error: cannot keep the promise
            break;
        }
        sent += static_cast<uint64_t>(n);
        res.body().data = chunk.get();
        res.body().size = static_cast<size_t>(n);
        res.body().more = sent < size;
        co_await bounded([&](auto token) { return http::async_write(socket_, serializer, token); });
    }
    if (!complete) {
        force_close_ = true;
        co_return false;
    }
    if (size == 0) {
        res.body().data = nullptr;
        res.body().more = false;
        co_await bounded([&](auto token) { return http::async_write(socket_, serializer, token); });
    }
    co_return true;
}

asio::awaitable<void> Exchange::begin_chunked(std::string_view content_type, bool event_stream,
                                              unsigned status) {
    http::response<http::empty_body> res{static_cast<http::status>(status), 11};
    res.set(http::field::content_type,
            beast::string_view(content_type.data(), content_type.size()));
    if (event_stream) res.set(http::field::cache_control, "no-cache");
    if (unframed_body()) force_close_ = true;  // the close is the body's end
    prepare(res);
    res.chunked(!unframed_body());
    http::response_serializer<http::empty_body> serializer{res};
    co_await bounded(
        [&](auto token) { return http::async_write_header(socket_, serializer, token); });
}

asio::awaitable<void> Exchange::send_chunk(std::string_view data) {
    if (data.empty()) co_return;
    if (unframed_body()) {
        const auto raw = asio::buffer(data.data(), data.size());
        co_await bounded([&](auto token) { return asio::async_write(socket_, raw, token); });
        co_return;
    }
    const auto chunk = http::make_chunk(asio::buffer(data.data(), data.size()));
    co_await bounded([&](auto token) { return asio::async_write(socket_, chunk, token); });
}

asio::awaitable<void> Exchange::end_chunked() {
    if (unframed_body()) co_return;  // the connection's close ends the body
    const auto last = http::make_chunk_last();
    co_await bounded([&](auto token) { return asio::async_write(socket_, last, token); });
}

}  // namespace corral::daemon
