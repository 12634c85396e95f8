#include "sessions/network/port_waiter.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <string>

namespace corral {

using boost::asio::ip::tcp;
using boost::system::error_code;

namespace {
constexpr std::chrono::milliseconds kFirstDelay{5};
constexpr std::chrono::milliseconds kMaxDelay{250};
}  // namespace

struct PortWait::State : std::enable_shared_from_this<State> {
    State(boost::asio::io_context& io, SocketMaker make_socket, std::vector<SocketAddress> targets,
          std::chrono::milliseconds timeout, Handler handler)
        : io(io),
          socket(io),
          retry(io),
          deadline(io),
          make_socket(std::move(make_socket)),
          targets(std::move(targets)),
          timeout(timeout),
          handler(std::move(handler)) {}

    void begin();
    void attempt(size_t target);
    void finish(Status status);
    void cancel();
    std::string describe_timeout() const;

    boost::asio::io_context& io;
    tcp::socket socket;
    boost::asio::steady_timer retry;
    boost::asio::steady_timer deadline;
    SocketMaker make_socket;
    std::vector<SocketAddress> targets;
    std::chrono::milliseconds timeout;
    Handler handler;
    std::chrono::milliseconds delay = kFirstDelay;
    error_code last_error;
    bool done = false;
};

void PortWait::State::begin() {
    deadline.expires_after(timeout);
    deadline.async_wait([self = shared_from_this()](const error_code& error) {
        if (error || self->done) return;
        self->finish(sys_error(ETIMEDOUT, self->describe_timeout()));
    });
    attempt(0);
}

std::string PortWait::State::describe_timeout() const {
    std::string port = targets.empty() ? "?" : std::to_string(targets.front().port);
    std::string message = "nothing accepted connections on port " + port + " within " +
                          std::to_string(timeout.count()) + " ms";
    if (last_error) message += " (last attempt: " + last_error.message() + ")";
    return message;
}

void PortWait::State::attempt(size_t target) {
    if (done) return;
    if (target >= targets.size()) {
        // Every address refused this round: back off, then try again.
        retry.expires_after(delay);
        delay = std::min(delay * 2, kMaxDelay);
        retry.async_wait([self = shared_from_this()](const error_code& error) {
            if (!error) self->attempt(0);
        });
        return;
    }
    auto fd = make_socket(targets[target].family);
    if (!fd) return finish(std::move(fd.error().context("wait for port")));
    tcp::endpoint endpoint(boost::asio::ip::make_address(targets[target].address),
                           targets[target].port);
    error_code error;
    socket.close(error);
    int raw = fd->release();
    socket.assign(endpoint.protocol(), raw, error);
    if (error) {
        ::close(raw);
        return finish(sys_error(error.value(), "wait for port: adopt socket"));
    }
    socket.async_connect(endpoint, [self = shared_from_this(), target](const error_code& error) {
        if (self->done) return;
        if (!error) return self->finish(Status{});
        self->last_error = error;
        self->attempt(target + 1);
    });
}

void PortWait::State::finish(Status status) {
    if (done) return;
    done = true;
    error_code ignored;
    socket.close(ignored);
    retry.cancel();
    deadline.cancel();
    if (auto callback = std::exchange(handler, nullptr)) {
        boost::asio::post(
            io, [callback = std::move(callback), status = std::move(status)] { callback(status); });
    }
}

void PortWait::State::cancel() {
    handler = nullptr;
    finish(Status{});
}

PortWait& PortWait::operator=(PortWait&& other) noexcept {
    cancel();
    state_ = std::move(other.state_);
    return *this;
}

void PortWait::cancel() {
    if (state_) state_->cancel();
    state_.reset();
}

PortWait wait_for_port(boost::asio::io_context& io, SocketMaker make_socket,
                       std::vector<SocketAddress> targets, std::chrono::milliseconds timeout,
                       PortWait::Handler handler) {
    auto state = std::make_shared<PortWait::State>(io, std::move(make_socket), std::move(targets),
                                                   timeout, std::move(handler));
    // Started from a posted job, so the handler can never run inside this call.
    boost::asio::post(io, [state] {
        if (!state->done) state->begin();
    });
    return PortWait(state);
}

PortWait wait_for_port_in_namespace(boost::asio::io_context& io, std::shared_ptr<NetnsRunner> netns,
                                    uint16_t port, std::chrono::milliseconds timeout,
                                    PortWait::Handler handler) {
    SocketMaker inside = [netns = std::move(netns)](int family) {
        return netns->tcp_socket(family);
    };
    return wait_for_port(io, std::move(inside),
                         {{AF_INET, "127.0.0.1", port}, {AF_INET6, "::1", port}}, timeout,
                         std::move(handler));
}

}  // namespace corral
