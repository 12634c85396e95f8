#include "sessions/network/tcp_relay.hpp"

#include <boost/asio/write.hpp>
#include <utility>

namespace corral {

using boost::asio::ip::tcp;
using boost::system::error_code;

TcpRelay::TcpRelay(tcp::socket a, tcp::socket b, size_t buffer_size, FinishedHandler on_finished)
    : a_(std::move(a)), b_(std::move(b)), on_finished_(std::move(on_finished)) {
    a_to_b_.buffer.resize(buffer_size);
    b_to_a_.buffer.resize(buffer_size);
}

void TcpRelay::start() {
    // Bytes are relayed as they come; Nagle on the relay's sockets would add a round trip of
    // delay to every small interactive write (WebSocket frames, keystrokes).
    error_code ignored;
    a_.set_option(tcp::no_delay(true), ignored);
    b_.set_option(tcp::no_delay(true), ignored);
    pump(a_, b_, a_to_b_);
    pump(b_, a_, b_to_a_);
}

void TcpRelay::pump(tcp::socket& from, tcp::socket& to, Direction& direction) {
    auto self = shared_from_this();
    from.async_read_some(boost::asio::buffer(direction.buffer),
                         [self, &from, &to, &direction](const error_code& error, size_t length) {
                             if (self->closed_) return;
                             if (error == boost::asio::error::eof)
                                 return self->on_read_end(to, direction);
                             if (error) return self->close();
                             boost::asio::async_write(
                                 to, boost::asio::buffer(direction.buffer.data(), length),
                                 [self, &from, &to, &direction](const error_code& error, size_t) {
                                     if (self->closed_) return;
                                     if (error) return self->close();
                                     self->pump(from, to, direction);
                                 });
                         });
}

void TcpRelay::on_read_end(tcp::socket& to, Direction& direction) {
    error_code ignored;
    to.shutdown(tcp::socket::shutdown_send, ignored);
    direction.finished = true;
    if (a_to_b_.finished && b_to_a_.finished) close();
}

void TcpRelay::close() {
    if (closed_) return;
    closed_ = true;
    error_code ignored;
    a_.close(ignored);
    b_.close(ignored);
    if (auto handler = std::exchange(on_finished_, nullptr)) handler(*this);
}

}  // namespace corral
