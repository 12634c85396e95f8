#include "supervisor/daemon/disconnect_watch.hpp"

#include <sys/socket.h>

#include <cerrno>

namespace corral::daemon {

DisconnectWatch::DisconnectWatch(Socket& socket, std::function<void()> on_gone)
    : socket_(socket), state_(std::make_shared<State>()) {
    state_->on_gone = std::move(on_gone);
    arm(socket_, state_);
}

DisconnectWatch::~DisconnectWatch() {
    state_->on_gone = nullptr;
    if (state_->pending) {
        // Only the watch's own wait is outstanding here (the handler's writes are done), and the
        // connection must not find it pending when it reads the next request.
        boost::system::error_code ignored;
        socket_.cancel(ignored);
    }
}

void DisconnectWatch::arm(Socket& socket, const std::shared_ptr<State>& state) {
    state->pending = true;
    socket.async_wait(Socket::wait_read, [&socket, weak = std::weak_ptr<State>(state)](
                                             const boost::system::error_code& error) {
        auto state = weak.lock();
        if (!state) return;
        state->pending = false;
        if (error || !state->on_gone) return;
        char byte;
        const ssize_t n = ::recv(socket.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
        if (n > 0) return;  // a pipelined request: the client is still there
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            arm(socket, state);
            return;
        }
        auto on_gone = std::move(state->on_gone);
        state->on_gone = nullptr;
        on_gone();
    });
}

}  // namespace corral::daemon
