#include "supervisor/cli/http_client.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace corral::cli {
namespace {

constexpr size_t kReadSize = 64 * 1024;
constexpr size_t kMaxHeadBytes = 64 * 1024;
constexpr const char* kTcpPrefix = "tcp://";

std::string lower(std::string text) {
    std::transform(text.begin(), text.end(), text.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return text;
}

std::string trim(const std::string& text) {
    size_t begin = text.find_first_not_of(" \t");
    if (begin == std::string::npos) return {};
    size_t end = text.find_last_not_of(" \t\r");
    return text.substr(begin, end - begin + 1);
}

Result<DaemonAddress> parse_tcp_address(const std::string& spec) {
    std::string rest = spec.substr(std::strlen(kTcpPrefix));
    size_t colon = rest.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == rest.size()) {
        return plain_error("bad daemon address `" + spec + "` (expected tcp://127.0.0.1:PORT)");
    }
    DaemonAddress address;
    address.tcp_host = rest.substr(0, colon);
    std::string port = rest.substr(colon + 1);
    if (port.size() > 5 || !std::all_of(port.begin(), port.end(), ::isdigit) ||
        std::stoul(port) == 0 || std::stoul(port) > 65535) {
        return plain_error("bad port in daemon address `" + spec + "`");
    }
    address.tcp_port = static_cast<uint16_t>(std::stoul(port));
    in_addr probe{};
    if (inet_pton(AF_INET, address.tcp_host.c_str(), &probe) != 1) {
        return plain_error("bad host in daemon address `" + spec +
                           "` (expected a numeric IPv4 address)");
    }
    return address;
}

std::string connect_failure(const DaemonAddress& address, int err) {
    return "cannot connect to corrald at " + address.describe() + ": " + errno_name(err) + " (" +
           std::strerror(err) + ") — is corrald running?";
}

Status write_all(int fd, const char* data, size_t size) {
    while (size > 0) {
        ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR) continue;
            return sys_error("send request to corrald");
        }
        data += n;
        size -= static_cast<size_t>(n);
    }
    return {};
}

Status write_all(int fd, const std::string& text) {
    return write_all(fd, text.data(), text.size());
}

/// Reads up to `capacity` bytes from the body source, retrying on EINTR.
Result<size_t> read_source(int fd, char* out, size_t capacity) {
    for (;;) {
        ssize_t n = ::read(fd, out, capacity);
        if (n >= 0) return static_cast<size_t>(n);
        if (errno != EINTR) return sys_error("read request body");
    }
}

Status stream_sized_body(int sock, int source, uint64_t size) {
    std::string chunk(kReadSize, '\0');
    while (size > 0) {
        auto n = read_source(source, chunk.data(), std::min<uint64_t>(chunk.size(), size));
        if (!n) return std::move(n.error());
        if (*n == 0)
            return plain_error("request body ended " + std::to_string(size) + " bytes early");
        CORRAL_TRY(write_all(sock, chunk.data(), *n), "");
        size -= *n;
    }
    return {};
}

Status stream_chunked_body(int sock, int source) {
    std::string chunk(kReadSize, '\0');
    for (;;) {
        auto n = read_source(source, chunk.data(), chunk.size());
        if (!n) return std::move(n.error());
        char size_line[32];
        int len = std::snprintf(size_line, sizeof size_line, "%zx\r\n", *n);
        CORRAL_TRY(write_all(sock, size_line, static_cast<size_t>(len)), "");
        if (*n == 0) return write_all(sock, "\r\n");
        CORRAL_TRY(write_all(sock, chunk.data(), *n), "");
        CORRAL_TRY(write_all(sock, "\r\n"), "");
    }
}

Result<HttpResponseHead> parse_status_line(const std::string& line) {
    // "HTTP/1.1 200 OK"
    if (line.rfind("HTTP/1.", 0) != 0 || line.size() < 12 || line[8] != ' ') {
        return plain_error("bad HTTP status line from corrald: `" + line.substr(0, 80) + "`");
    }
    std::string code = line.substr(9, 3);
    if (!std::all_of(code.begin(), code.end(), ::isdigit)) {
        return plain_error("bad HTTP status code from corrald: `" + line.substr(0, 80) + "`");
    }
    HttpResponseHead head;
    head.status = std::stoi(code);
    head.reason = line.size() > 13 ? line.substr(13) : "";
    return head;
}

}  // namespace

std::string DaemonAddress::describe() const {
    if (tcp_port != 0) return tcp_host + ":" + std::to_string(tcp_port);
    return unix_path;
}

Result<DaemonAddress> resolve_daemon_address(const std::string& socket_flag,
                                             const std::string& token_flag,
                                             const std::string& socket_env,
                                             const std::string& token_env) {
    std::string spec = !socket_flag.empty()  ? socket_flag
                       : !socket_env.empty() ? socket_env
                                             : kDefaultDaemonSocket;
    DaemonAddress address;
    if (spec.rfind(kTcpPrefix, 0) == 0) {
        auto tcp = parse_tcp_address(spec);
        if (!tcp) return std::move(tcp.error());
        address = std::move(*tcp);
    } else {
        address.unix_path = spec;
    }
    address.token = !token_flag.empty() ? token_flag : token_env;
    return address;
}

Result<UniqueFd> connect_to_daemon(const DaemonAddress& address) {
    if (address.tcp_port != 0) {
        UniqueFd sock(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
        if (!sock) return sys_error("socket(AF_INET)");
        sockaddr_in sin{};
        sin.sin_family = AF_INET;
        sin.sin_port = htons(address.tcp_port);
        if (inet_pton(AF_INET, address.tcp_host.c_str(), &sin.sin_addr) != 1) {
            return plain_error("bad daemon host `" + address.tcp_host + "`");
        }
        if (::connect(sock.get(), reinterpret_cast<sockaddr*>(&sin), sizeof sin) != 0) {
            return plain_error(connect_failure(address, errno));
        }
        return sock;
    }
    sockaddr_un sun{};
    sun.sun_family = AF_UNIX;
    if (address.unix_path.empty() || address.unix_path.size() >= sizeof sun.sun_path) {
        return plain_error("bad corrald socket path `" + address.unix_path +
                           "` (empty or longer than " + std::to_string(sizeof sun.sun_path - 1) +
                           " bytes)");
    }
    std::memcpy(sun.sun_path, address.unix_path.data(), address.unix_path.size());
    UniqueFd sock(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!sock) return sys_error("socket(AF_UNIX)");
    if (::connect(sock.get(), reinterpret_cast<sockaddr*>(&sun), sizeof sun) != 0) {
        return plain_error(connect_failure(address, errno));
    }
    return sock;
}

std::optional<std::string> HttpResponseHead::header(const std::string& name) const {
    auto it = headers.find(lower(name));
    if (it == headers.end()) return std::nullopt;
    return it->second;
}

Status send_request(int fd, const HttpRequest& request, const std::string& token) {
    std::string head = request.method + " " + request.target + " HTTP/1.1\r\nHost: localhost\r\n";
    if (!token.empty()) head += "Authorization: Bearer " + token + "\r\n";
    for (const auto& [name, value] : request.headers) head += name + ": " + value + "\r\n";
    bool chunked = request.body_fd >= 0 && !request.body_size;
    if (chunked) {
        head += "Transfer-Encoding: chunked\r\n";
    } else {
        uint64_t length = request.body_fd >= 0 ? *request.body_size : request.body.size();
        head += "Content-Length: " + std::to_string(length) + "\r\n";
    }
    head += "Connection: close\r\n\r\n";
    if (request.body_fd < 0) head += request.body;  // one write for small requests
    CORRAL_TRY(write_all(fd, head), "");
    if (request.body_fd < 0) return {};
    if (chunked) return stream_chunked_body(fd, request.body_fd);
    return stream_sized_body(fd, request.body_fd, *request.body_size);
}

HttpResponseReader::HttpResponseReader(UniqueFd fd) : fd_(std::move(fd)) {}

Result<size_t> HttpResponseReader::fill() {
    if (buffer_pos_ > 0) {
        buffer_.erase(0, buffer_pos_);
        buffer_pos_ = 0;
    }
    size_t old = buffer_.size();
    buffer_.resize(old + kReadSize);
    for (;;) {
        ssize_t n = ::recv(fd_.get(), buffer_.data() + old, kReadSize, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            buffer_.resize(old);
            return sys_error("read response from corrald");
        }
        buffer_.resize(old + static_cast<size_t>(n));
        if (n == 0) socket_eof_ = true;
        return static_cast<size_t>(n);
    }
}

Result<std::string> HttpResponseReader::read_protocol_line() {
    for (;;) {
        size_t nl = buffer_.find('\n', buffer_pos_);
        if (nl != std::string::npos) {
            std::string line = buffer_.substr(buffer_pos_, nl - buffer_pos_);
            buffer_pos_ = nl + 1;
            if (!line.empty() && line.back() == '\r') line.pop_back();
            return line;
        }
        if (buffer_.size() - buffer_pos_ > kMaxHeadBytes)
            return plain_error("response header line too long");
        auto n = fill();
        if (!n) return std::move(n.error());
        if (*n == 0)
            return plain_error("corrald closed the connection in the middle of a response");
    }
}

Result<HttpResponseHead> HttpResponseReader::read_head() {
    for (;;) {
        auto status_line = read_protocol_line();
        if (!status_line) return std::move(status_line.error());
        auto head = parse_status_line(*status_line);
        if (!head) return head;
        size_t total = 0;
        for (;;) {
            auto line = read_protocol_line();
            if (!line) return std::move(line.error());
            if (line->empty()) break;
            total += line->size();
            if (total > kMaxHeadBytes) return plain_error("response headers too large");
            size_t colon = line->find(':');
            if (colon == std::string::npos)
                return plain_error("bad response header `" + *line + "`");
            std::string name = lower(trim(line->substr(0, colon)));
            std::string value = trim(line->substr(colon + 1));
            auto [it, inserted] = head->headers.emplace(name, value);
            if (!inserted) it->second += ", " + value;
        }
        if (head->status >= 100 && head->status < 200)
            continue;  // interim response: the real one follows
        auto encoding = head->header("transfer-encoding");
        auto length = head->header("content-length");
        if (encoding && lower(*encoding).find("chunked") != std::string::npos) {
            framing_ = Framing::Chunked;
            CORRAL_TRY(begin_chunk(), "read chunked response");
        } else if (length) {
            if (length->empty() || !std::all_of(length->begin(), length->end(), ::isdigit)) {
                return plain_error("bad Content-Length `" + *length + "` from corrald");
            }
            framing_ = Framing::Length;
            remaining_ = std::stoull(*length);
            body_done_ = remaining_ == 0;
        } else if (head->status == 204 || head->status == 304) {
            body_done_ = true;
        } else {
            framing_ = Framing::UntilClose;
        }
        return head;
    }
}

size_t HttpResponseReader::take_buffered(char* out, size_t capacity) {
    size_t n = std::min(capacity, buffer_.size() - buffer_pos_);
    std::memcpy(out, buffer_.data() + buffer_pos_, n);
    buffer_pos_ += n;
    return n;
}

// Reads a chunk-size line; a zero size ends the body (trailers are read and dropped).
Status HttpResponseReader::begin_chunk() {
    auto line = read_protocol_line();
    if (!line) return std::move(line.error());
    std::string size_text = trim(line->substr(0, line->find(';')));
    if (size_text.empty() || size_text.size() > 15 ||
        !std::all_of(size_text.begin(), size_text.end(), ::isxdigit)) {
        return plain_error("bad chunk size `" + line->substr(0, 40) + "`");
    }
    remaining_ = std::stoull(size_text, nullptr, 16);
    if (remaining_ > 0) return {};
    for (;;) {
        auto trailer = read_protocol_line();
        if (!trailer) return std::move(trailer.error());
        if (trailer->empty()) break;
    }
    body_done_ = true;
    return {};
}

Result<size_t> HttpResponseReader::read_chunked(char* out, size_t capacity) {
    if (remaining_ == 0) {
        // The previous chunk's data is followed by CRLF, then the next size line.
        auto crlf = read_protocol_line();
        if (!crlf) return std::move(crlf.error());
        if (!crlf->empty()) return plain_error("chunk data longer than its declared size");
        CORRAL_TRY(begin_chunk(), "read chunked response");
        if (body_done_) return size_t{0};
    }
    if (buffer_pos_ == buffer_.size()) {
        auto n = fill();
        if (!n) return std::move(n.error());
        if (*n == 0) return plain_error("corrald closed the connection in the middle of a chunk");
    }
    size_t n = take_buffered(out, std::min<uint64_t>(capacity, remaining_));
    remaining_ -= n;
    return n;
}

Result<size_t> HttpResponseReader::read_body(char* out, size_t capacity) {
    if (body_done_ || capacity == 0) return size_t{0};
    if (framing_ == Framing::Chunked) return read_chunked(out, capacity);
    if (buffer_pos_ == buffer_.size()) {
        auto n = fill();
        if (!n) return std::move(n.error());
        if (*n == 0) {
            body_done_ = true;
            if (framing_ == Framing::Length) {
                return plain_error("corrald closed the connection " + std::to_string(remaining_) +
                                   " bytes before the end of the response");
            }
            return size_t{0};
        }
    }
    size_t want = framing_ == Framing::Length ? std::min<uint64_t>(capacity, remaining_) : capacity;
    size_t n = take_buffered(out, want);
    if (framing_ == Framing::Length) {
        remaining_ -= n;
        if (remaining_ == 0) body_done_ = true;
    }
    return n;
}

Result<std::optional<std::string>> HttpResponseReader::read_line() {
    std::string piece(kReadSize, '\0');
    for (;;) {
        size_t nl = pending_line_.find('\n');
        if (nl != std::string::npos) {
            std::string line = pending_line_.substr(0, nl);
            pending_line_.erase(0, nl + 1);
            if (!line.empty() && line.back() == '\r') line.pop_back();
            return std::optional<std::string>(std::move(line));
        }
        auto n = read_body(piece.data(), piece.size());
        if (!n) return std::move(n.error());
        if (*n == 0) {
            if (pending_line_.empty()) return std::optional<std::string>();
            return std::optional<std::string>(std::exchange(pending_line_, {}));
        }
        pending_line_.append(piece.data(), *n);
    }
}

Result<std::string> HttpResponseReader::read_all(size_t limit) {
    std::string body = std::exchange(pending_line_, {});
    std::string piece(kReadSize, '\0');
    for (;;) {
        auto n = read_body(piece.data(), piece.size());
        if (!n) return std::move(n.error());
        if (*n == 0) return body;
        body.append(piece.data(), *n);
        if (body.size() > limit)
            return plain_error("response body larger than " + std::to_string(limit) + " bytes");
    }
}

Result<std::pair<HttpResponseHead, HttpResponseReader>> HttpClient::open(
    const HttpRequest& request) const {
    auto sock = connect_to_daemon(address_);
    if (!sock) return std::move(sock.error());
    int fd = sock->get();
    HttpResponseReader reader(std::move(*sock));
    auto sent = send_request(fd, request, address_.token);
    if (!sent) {
        // corrald may have answered early (e.g. 413 or 401) and closed: prefer its answer.
        auto early = reader.read_head();
        if (early) return std::make_pair(std::move(*early), std::move(reader));
        return std::move(sent.error().context(request.method + " " + request.target));
    }
    auto head = reader.read_head();
    if (!head) return std::move(head.error().context(request.method + " " + request.target));
    return std::make_pair(std::move(*head), std::move(reader));
}

Result<HttpResponse> HttpClient::fetch(const HttpRequest& request) const {
    auto opened = open(request);
    if (!opened) return std::move(opened.error());
    auto body = opened->second.read_all();
    if (!body) return std::move(body.error().context(request.method + " " + request.target));
    return HttpResponse{std::move(opened->first), std::move(*body)};
}

std::string url_encode(const std::string& value, bool keep_slash) {
    static const char* hex = "0123456789ABCDEF";
    std::string out;
    for (unsigned char c : value) {
        if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' ||
            (c == '/' && keep_slash)) {
            out += static_cast<char>(c);
        } else {
            out += '%';
            out += hex[c >> 4];
            out += hex[c & 15];
        }
    }
    return out;
}

}  // namespace corral::cli
