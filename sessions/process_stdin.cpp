// A process's stdin: writes are queued and written as the pipe drains, so a large body never
// blocks the event loop and a process that never reads never blocks the daemon.
#include "sessions/process.hpp"

namespace corral {

void Process::write_stdin(std::string data, bool eof, std::function<void(Status)> handler) {
    auto alive = std::make_shared<bool>(true);
    if (!stdin_pipe_.is_open() || stdin_eof_requested_) {
        post(alive, [handler = std::move(handler), id = setup_.id] {
            handler(sys_error(EBADF, "stdin of process " + id + " is not open"));
        });
        return;
    }
    if (eof) stdin_eof_requested_ = true;
    stdin_queue_.push_back(StdinWrite{std::move(data), eof, std::move(handler)});
    if (!stdin_writing_) write_next_stdin();
}

void Process::write_next_stdin() {
    if (stdin_queue_.empty()) {
        stdin_writing_ = false;
        if (finished_) close_stdin();
        return;
    }
    stdin_writing_ = true;
    boost::asio::async_write(
        stdin_pipe_, boost::asio::buffer(stdin_queue_.front().data),
        [self = shared_from_this()](const boost::system::error_code& error, size_t) {
            if (self->stdin_queue_.empty()) return;  // cleared by close_stdin
            StdinWrite done = std::move(self->stdin_queue_.front());
            self->stdin_queue_.pop_front();
            Status result;
            if (error) {
                const int code =
                    error == boost::asio::error::operation_aborted ? ECANCELED : error.value();
                result = sys_error(code, "write stdin of process " + self->setup_.id);
            }
            if (done.handler) done.handler(std::move(result));
            if (error || done.eof) {
                self->close_stdin();
                return;
            }
            self->write_next_stdin();
        });
}

// Fails queued writes (their bytes can no longer be delivered) and closes our end: the process
// reads EOF.
void Process::close_stdin() {
    auto pending = std::move(stdin_queue_);
    stdin_queue_.clear();
    stdin_writing_ = false;
    stdin_eof_requested_ = true;
    boost::system::error_code ignored;
    stdin_pipe_.close(ignored);
    for (auto& write : pending) {
        if (!write.handler) continue;
        auto alive = std::make_shared<bool>(true);
        post(alive, [handler = std::move(write.handler), id = setup_.id] {
            handler(sys_error(EPIPE, "stdin of process " + id + " was closed"));
        });
    }
}

}  // namespace corral
