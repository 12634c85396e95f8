// `corral shell SID`: a person's terminal in a session (issue 14). Starts a login shell on a pty
// (POST /terminals, sized like the local terminal) and attaches to it over the WebSocket: the
// local terminal goes raw (every key, ^C and ^Z included, travels to the remote pty, whose own
// line discipline does the rest), SIGWINCH sends the new size, and the remote shell's exit code
// becomes corral's. The local terminal's mode is restored on every way out (exit frame, closed
// socket, SIGTERM/SIGHUP, an exception), by a guard that lives for the whole attachment.

#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

// clang-format off
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded
// clang-format on
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <deque>
#include <ostream>

#include "supervisor/cli/client_subcommands.hpp"

namespace corral::cli {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
using nlohmann::json;
using Socket = asio::generic::stream_protocol::socket;

/// Raw mode for the local terminal while it lives; the saved mode comes back in the destructor.
class RawMode {
  public:
    explicit RawMode(int fd) : fd_(fd) {
        if (::isatty(fd_) != 1 || ::tcgetattr(fd_, &saved_) != 0) return;
        termios raw = saved_;
        ::cfmakeraw(&raw);
        active_ = ::tcsetattr(fd_, TCSAFLUSH, &raw) == 0;
    }
    ~RawMode() {
        if (active_) ::tcsetattr(fd_, TCSAFLUSH, &saved_);
    }
    RawMode(const RawMode&) = delete;
    RawMode& operator=(const RawMode&) = delete;

  private:
    int fd_;
    termios saved_{};
    bool active_ = false;
};

/// The local window size (80x24 when stdout is not a terminal).
std::pair<int, int> window_size() {
    winsize ws{};
    if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 && ws.ws_row > 0)
        return {ws.ws_col, ws.ws_row};
    if (::ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 && ws.ws_row > 0)
        return {ws.ws_col, ws.ws_row};
    return {80, 24};
}

std::string resize_message() {
    auto [cols, rows] = window_size();
    return json{{"type", "resize"}, {"cols", cols}, {"rows", rows}}.dump();
}

/// One attachment: local stdin -> binary frames, frames -> local stdout, SIGWINCH -> resize.
class Attachment {
  public:
    Attachment(asio::io_context& io, Socket socket)
        : io_(io), ws_(std::move(socket)), input_(io), signals_(io, SIGWINCH, SIGTERM, SIGHUP) {
        signals_.add(SIGINT);  // raw mode makes ^C a byte; a SIGINT from elsewhere ends us
    }

    /// Runs until the terminal exits or the connection ends; the exit code to take.
    int run(const std::string& host, const std::string& target, const std::string& token,
            std::ostream& err) {
        ws_.set_option(websocket::stream_base::decorator([token](websocket::request_type& req) {
            if (!token.empty()) req.set(beast::http::field::authorization, "Bearer " + token);
        }));
        beast::error_code ec;
        websocket::response_type response;
        ws_.handshake(response, host, target, ec);
        if (ec) {
            err << "corral: shell: attach to the terminal: " << ec.message() << " (HTTP "
                << response.result_int() << ")\n";
            return client_exit::kUnreachable;
        }
        const int in = ::dup(STDIN_FILENO);
        if (in >= 0) {
            boost::system::error_code assigned;
            input_.assign(in, assigned);
            if (!assigned) read_input();
            else ::close(in);  // a regular file as stdin: nothing to type
        }
        read_frames();
        wait_signals();
        io_.run();
        return code_;
    }

  private:
    void read_input() {
        input_.async_read_some(asio::buffer(in_buf_), [this](beast::error_code ec, size_t n) {
            if (ec || done_) return;  // EOF: no more typing, the terminal goes on
            send(false, std::string(in_buf_, n));
            read_input();
        });
    }
    void read_frames() {
        ws_.async_read(frame_, [this](beast::error_code ec, size_t) {
            if (ec) {
                finish(exit_seen_ ? code_ : client_exit::kExecFailure);
                return;
            }
            const std::string data = beast::buffers_to_string(frame_.data());
            frame_.consume(frame_.size());
            if (ws_.got_binary()) {
                for (size_t off = 0; off < data.size();) {
                    const ssize_t w = ::write(STDOUT_FILENO, data.data() + off, data.size() - off);
                    if (w < 0 && errno == EINTR) continue;
                    if (w <= 0) break;
                    off += static_cast<size_t>(w);
                }
            } else {
                on_control(data);
            }
            read_frames();
        });
    }
    void on_control(const std::string& text) {
        const auto message = json::parse(text, nullptr, false);
        if (!message.is_object()) return;
        if (message.value("type", "") == "exit") {
            exit_seen_ = true;
            const auto code = message.find("exitCode");
            code_ = code != message.end() && code->is_number_integer() ? code->get<int>()
                                                                      : client_exit::kExecFailure;
        } else if (message.value("type", "") == "error") {
            errors_ += "corral: shell: " + message.value("message", text) + "\r\n";
        }
    }
    void wait_signals() {
        signals_.async_wait([this](beast::error_code ec, int signal) {
            if (ec || done_) return;
            if (signal == SIGWINCH) {
                send(true, resize_message());
                wait_signals();
                return;
            }
            finish(128 + signal);
        });
    }
    void send(bool text, std::string data) {
        queue_.emplace_back(text, std::move(data));
        if (!writing_) write_next();
    }
    void write_next() {
        if (queue_.empty() || done_) {
            writing_ = false;
            return;
        }
        writing_ = true;
        ws_.text(queue_.front().first);
        ws_.async_write(asio::buffer(queue_.front().second), [this](beast::error_code ec, size_t) {
            queue_.pop_front();
            if (ec) {
                writing_ = false;
                return;  // the read side sees the end
            }
            write_next();
        });
    }
    void finish(int code) {
        if (done_) return;
        done_ = true;
        code_ = code;
        beast::error_code ignored;
        input_.close(ignored);
        signals_.cancel(ignored);
        beast::get_lowest_layer(ws_).close(ignored);
    }

  public:
    std::string errors_;

  private:
    asio::io_context& io_;
    websocket::stream<Socket> ws_;
    asio::posix::stream_descriptor input_;
    asio::signal_set signals_;
    beast::flat_buffer frame_;
    char in_buf_[4096];
    std::deque<std::pair<bool, std::string>> queue_;
    bool writing_ = false;
    bool done_ = false;
    bool exit_seen_ = false;
    int code_ = client_exit::kExecFailure;
};

}  // namespace

int run_shell_command(const std::vector<std::string>& args, ClientIo& io) {
    ArgsSpec spec{"shell",
                  {{"--command", true, "-c"}, {"--cwd", true}},
                  1,
                  1,
                  {"SID"},
                  false,
                  "corral shell SID [--command CMD] [--cwd DIR]"};
    auto prepared = prepare_command(args, spec, io);
    if (!prepared) return report_usage_error(prepared.error(), io.err);
    const ParsedArgs& parsed = prepared->args;
    const std::string& sid = parsed.positionals[0];
    auto [cols, rows] = window_size();
    json body = {{"cols", cols}, {"rows", rows}};
    if (auto command = parsed.value("--command")) body["command"] = *command;
    if (auto cwd = parsed.value("--cwd")) body["cwd"] = *cwd;
    auto reply = call_api(prepared->client, "POST", session_path(sid) + "/terminals", &body);
    if (int code = failure_code(reply, io.err)) return code;
    const std::string proc = reply->body.value("id", "");
    const DaemonAddress& address = prepared->client.address();
    auto fd = connect_to_daemon(address);
    if (!fd) return report_transport_error(fd.error(), io.err);

    asio::io_context context;
    const int family = address.tcp_port != 0 ? AF_INET : AF_UNIX;
    const int protocol = address.tcp_port != 0 ? IPPROTO_TCP : 0;
    Socket socket(context, asio::generic::stream_protocol(family, protocol), fd->release());
    Attachment attachment(context, std::move(socket));
    // SIGWINCH & co. are delivered to the signal_set only while blocked elsewhere: asio handles it.
    int code;
    {
        RawMode raw(STDIN_FILENO);
        code = attachment.run("localhost",
                              session_path(sid) + "/terminals/" + url_encode(proc, false) + "/ws",
                              address.token, io.err);
    }
    io.err << attachment.errors_;
    return code;
}

}  // namespace corral::cli
