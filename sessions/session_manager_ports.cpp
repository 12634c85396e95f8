// SessionManager's wait-for-port (the network issue's addition to the port API).
#include "sessions/session.hpp"
#include "sessions/session_manager.hpp"

namespace corral {

WaitHandle SessionManager::async_wait_port(const std::string& sid, uint16_t port, Millis timeout,
                                           StatusHandler handler) {
    auto alive = std::make_shared<bool>(true);
    auto guarded = [alive, handler = std::move(handler)](Status status) {
        if (*alive) handler(std::move(status));
    };
    auto session = find_active(sid);
    Result<PortWait> wait = session ? (*session)->wait_for_port(port, timeout, guarded)
                                    : Result<PortWait>(std::move(session.error()));
    if (!wait) {
        boost::asio::post(io_, [guarded, error = std::move(wait.error())] { guarded(error); });
        return WaitHandle(alive);
    }
    (*session)->touch();
    // The wait ends by itself (success, error or its timeout); a cancelled WaitHandle only
    // silences the handler.
    wait->detach();
    return WaitHandle(alive);
}

}  // namespace corral
