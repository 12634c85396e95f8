#include "http_client.hpp"

// clang-format off
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded
// clang-format on

#include "base/asio.hpp"
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <chrono>
#include <limits>
#include <optional>
#include <stdexcept>

namespace corral::testing {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using GenericSocket = asio::generic::stream_protocol::socket;

nlohmann::json HttpResponse::json() const {
    auto value = nlohmann::json::parse(body, nullptr, false);
    return value.is_discarded() ? nlohmann::json() : value;
}

std::string HttpResponse::error_code() const {
    auto j = json();
    if (!j.is_object() || !j.contains("error")) return "";
    return j["error"].value("code", "");
}

std::string HttpResponse::error_message() const {
    auto j = json();
    if (!j.is_object() || !j.contains("error")) return "";
    return j["error"].value("message", "");
}

HttpHeaders bearer(const std::string& token) {
    if (token.empty()) return {};
    return {{"Authorization", "Bearer " + token}};
}

struct HttpClient::Impl {
    asio::io_context io;
    std::string unix_path;
    std::string host;
    uint16_t port = 0;
    std::optional<GenericSocket> socket;
    beast::flat_buffer buffer;
    /// How long one read or write may make no progress before the request fails: a daemon that
    /// hangs fails the test that met it with a message, instead of holding it until ctest's
    /// 600 s timeout (no test waits this long for a single answer or stream chunk).
    std::chrono::seconds idle_timeout{120};

    /// Runs one asynchronous operation to completion or until the idle timeout, then drops the
    /// connection; the sync operations of Asio cannot time out on a blocking socket.
    template <class Start>
    beast::error_code run_bounded(Start start, const char* what) {
        std::optional<beast::error_code> result;
        start([&](beast::error_code ec, std::size_t) { result = ec; });
        io.restart();
        io.run_for(idle_timeout);
        if (!result) {
            drop();
            io.restart();
            io.run();  // lets the cancelled operation finish before its buffers go
            throw std::runtime_error(std::string(what) + ": no progress within " +
                                     std::to_string(idle_timeout.count()) + " s");
        }
        return *result;
    }

    void connect() {
        buffer.clear();
        if (!unix_path.empty()) {
            asio::local::stream_protocol::socket s(io);
            s.connect(asio::local::stream_protocol::endpoint(unix_path));
            socket.emplace(io, asio::generic::stream_protocol(AF_UNIX, 0), s.release());
        } else {
            asio::ip::tcp::socket s(io);
            s.connect(asio::ip::tcp::endpoint(asio::ip::make_address(host), port));
            const int family = s.local_endpoint().protocol().family();
            socket.emplace(io, asio::generic::stream_protocol(family, IPPROTO_TCP), s.release());
        }
    }
    void drop() {
        beast::error_code ignored;
        if (socket) socket->close(ignored);
        socket.reset();
        buffer.clear();
    }
    http::request<http::string_body> make(std::string_view method, std::string_view target,
                                          std::string body, const HttpHeaders& headers) {
        http::request<http::string_body> req;
        req.method_string(beast::string_view(method.data(), method.size()));
        req.target(beast::string_view(target.data(), target.size()));
        req.version(11);
        req.set(http::field::host, "corrald");
        req.keep_alive(true);
        for (const auto& [name, value] : headers) req.set(name, value);
        req.body() = std::move(body);
        req.prepare_payload();
        return req;
    }
    /// Writes the request on a fresh or reused connection (reconnects once if the reused one
    /// was closed by the server).
    void send(const http::request<http::string_body>& req) {
        for (int attempt = 0; attempt < 2; ++attempt) {
            if (!socket) connect();
            auto ec = run_bounded(
                [&](auto done) { http::async_write(*socket, req, done); }, "write request");
            if (!ec) return;
            drop();
            if (attempt == 1) throw std::runtime_error("write request: " + ec.message());
        }
    }
};

HttpClient::HttpClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpClient::HttpClient(HttpClient&&) noexcept = default;
HttpClient& HttpClient::operator=(HttpClient&&) noexcept = default;
HttpClient::~HttpClient() = default;

HttpClient HttpClient::unix_socket(std::string path) {
    auto impl = std::make_unique<Impl>();
    impl->unix_path = std::move(path);
    return HttpClient(std::move(impl));
}

HttpClient HttpClient::tcp(std::string host, uint16_t port) {
    auto impl = std::make_unique<Impl>();
    impl->host = std::move(host);
    impl->port = port;
    return HttpClient(std::move(impl));
}

void HttpClient::set_idle_timeout(std::chrono::seconds timeout) { impl_->idle_timeout = timeout; }

bool HttpClient::can_connect() {
    try {
        impl_->drop();
        impl_->connect();
        return true;
    } catch (const std::exception&) {
        impl_->drop();
        return false;
    }
}

HttpResponse HttpClient::request(std::string_view method, std::string_view target, std::string body,
                                 const HttpHeaders& headers) {
    auto req = impl_->make(method, target, std::move(body), headers);
    for (int attempt = 0; attempt < 2; ++attempt) {
        impl_->send(req);
        http::response_parser<http::string_body> parser;
        parser.body_limit(std::numeric_limits<std::uint64_t>::max());
        auto ec = impl_->run_bounded(
            [&](auto done) { http::async_read(*impl_->socket, impl_->buffer, parser, done); },
            "read response");
        if (ec) {
            impl_->drop();
            // A kept-alive connection the server closed meanwhile: retry once on a new one.
            if (attempt == 0 && (ec == http::error::end_of_stream || ec == asio::error::eof ||
                                 ec == asio::error::connection_reset))
                continue;
            throw std::runtime_error("read response: " + ec.message());
        }
        auto res = parser.release();
        HttpResponse out;
        out.status = res.result_int();
        for (const auto& field : res) {
            std::string name(field.name_string());
            for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
            out.headers[name] = std::string(field.value());
        }
        out.body = std::move(res.body());
        if (!res.keep_alive()) impl_->drop();
        return out;
    }
    throw std::runtime_error("unreachable");
}

HttpResponse HttpClient::get(std::string_view target, const HttpHeaders& headers) {
    return request("GET", target, "", headers);
}

HttpResponse HttpClient::post(std::string_view target, const nlohmann::json& body,
                              const HttpHeaders& headers) {
    auto h = headers;
    h.emplace_back("Content-Type", "application/json");
    return request("POST", target, body.dump(), h);
}

HttpResponse HttpClient::del(std::string_view target, const HttpHeaders& headers) {
    return request("DELETE", target, "", headers);
}

unsigned HttpClient::stream_lines(std::string_view method, std::string_view target,
                                  std::string body, const HttpHeaders& headers,
                                  const std::function<bool(const std::string&)>& on_line) {
    impl_->drop();  // a stream gets its own connection
    auto req = impl_->make(method, target, std::move(body), headers);
    impl_->send(req);
    http::response_parser<http::buffer_body> parser;
    parser.body_limit(std::numeric_limits<std::uint64_t>::max());
    auto ec = impl_->run_bounded(
        [&](auto done) { http::async_read_header(*impl_->socket, impl_->buffer, parser, done); },
        "read stream header");
    if (ec) throw std::runtime_error("read stream header: " + ec.message());
    const unsigned status = parser.get().result_int();
    std::string pending;
    char chunk[16384];
    while (!parser.is_done()) {
        parser.get().body().data = chunk;
        parser.get().body().size = sizeof chunk;
        ec = impl_->run_bounded(
            // read_some: hand each line on as soon as it arrives (async_read would wait for the
            // whole 16 KiB buffer, which a quiet stream such as files/watch may never fill).
            [&](auto done) { http::async_read_some(*impl_->socket, impl_->buffer, parser, done); },
            "read stream");
        if (ec && ec != http::error::need_buffer) {
            impl_->drop();
            throw std::runtime_error("read stream: " + ec.message());
        }
        pending.append(chunk, sizeof chunk - parser.get().body().size);
        size_t newline;
        while ((newline = pending.find('\n')) != std::string::npos) {
            std::string line = pending.substr(0, newline);
            pending.erase(0, newline + 1);
            if (!on_line(line)) {
                impl_->drop();
                return status;
            }
        }
    }
    if (!pending.empty()) on_line(pending);
    impl_->drop();
    return status;
}

std::string url_encode(std::string_view text) {
    static constexpr char hex[] = "0123456789ABCDEF";
    std::string out;
    for (unsigned char c : text) {
        if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == '/') {
            out.push_back(static_cast<char>(c));
        } else {
            out.push_back('%');
            out.push_back(hex[c >> 4]);
            out.push_back(hex[c & 15]);
        }
    }
    return out;
}

}  // namespace corral::testing
