#include "sessions/network/accept_loop.hpp"

#include <sys/socket.h>
#include <unistd.h>

namespace corral {

using boost::asio::ip::tcp;
using boost::system::error_code;

Status AcceptLoop::adopt(UniqueFd listener, int family, const std::string& what) {
    error_code error;
    const int raw = listener.release();
    acceptor_.assign(family == AF_INET6 ? tcp::v6() : tcp::v4(), raw, error);
    if (error) {
        ::close(raw);
        return sys_error(error.value(), what + ": adopt the listener");
    }
    return {};
}

void AcceptLoop::start(std::shared_ptr<void> keep, Handler on_accept) {
    on_accept_ = std::move(on_accept);
    next(std::move(keep));
}

void AcceptLoop::next(std::shared_ptr<void> keep) {
    acceptor_.async_accept([this, keep](const error_code& error, tcp::socket client) {
        if (stopped_ || error == boost::asio::error::operation_aborted) return;
        if (!error) {
            on_accept_(std::move(client));
            if (!stopped_) next(keep);
            return;
        }
        if (error == boost::asio::error::connection_aborted) return next(keep);
        retry_.expires_after(kRetryDelay);
        retry_.async_wait([this, keep](const error_code& waited) {
            if (!waited && !stopped_) next(keep);
        });
    });
}

void AcceptLoop::stop() {
    if (stopped_) return;
    stopped_ = true;
    error_code ignored;
    acceptor_.close(ignored);
    retry_.cancel();
}

}  // namespace corral
