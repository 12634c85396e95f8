#pragma once
// Notices a client that went away while its request is still being served: `run` and `exec` wait
// on a process, not on the socket, so a closed connection would otherwise go unseen until the
// response is written (for a quiet `sleep 600`, ten minutes later). The watch waits for the socket
// to become readable and peeks: end of file or a reset means the client is gone; bytes (a
// pipelined request) are left for the connection and end the watch.
//
// Destroy the watch before the connection reads its next request: it cancels its wait then.

// clang-format off
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded
// clang-format on

#include <functional>
#include <memory>

#include "supervisor/daemon/exchange.hpp"

namespace corral::daemon {

/// Calls `on_gone` once if the client closes the connection while the watch lives.
class DisconnectWatch {
  public:
    DisconnectWatch(Socket& socket, std::function<void()> on_gone);
    ~DisconnectWatch();
    DisconnectWatch(const DisconnectWatch&) = delete;
    DisconnectWatch& operator=(const DisconnectWatch&) = delete;

  private:
    struct State {
        std::function<void()> on_gone;
        bool pending = false;
    };
    static void arm(Socket& socket, const std::shared_ptr<State>& state);

    Socket& socket_;
    std::shared_ptr<State> state_;
};

}  // namespace corral::daemon
