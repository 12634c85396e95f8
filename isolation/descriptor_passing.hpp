#pragma once
// One message and its descriptors over a SOCK_SEQPACKET socket (SCM_RIGHTS), for the launch
// worker's thread and the launch zygote (launch_worker.hpp, launch_zygote.hpp). Both may
// allocate; the holder's descriptor store, which may not, has its own (descriptor_store.cpp).

#include <chrono>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.hpp"
#include "base/unique_fd.hpp"

namespace corral {

/// Most descriptors one message carries (SCM_RIGHTS takes up to 253).
inline constexpr size_t kMaxPassedDescriptors = 64;

/// What arrived: the bytes, and the descriptors (close-on-exec, ours) in the order sent.
struct PassedMessage {
    std::string bytes;
    std::vector<UniqueFd> fds;
};

/// Sends `bytes` (not empty) with `fds` attached (at most kMaxPassedDescriptors). EMSGSIZE: too
/// large for one message on this socket. `what` names the sender in errors.
Status send_passing(int socket, std::string_view bytes, std::span<const int> fds,
                    const char* what);
/// Receives one message whole. EPIPE once the other end is gone; EPROTO for a message whose
/// descriptors did not all arrive (they are closed); ETIMEDOUT when nothing came by `deadline`
/// (signals do not extend it).
Result<PassedMessage> receive_passing(
    int socket, const char* what,
    std::optional<std::chrono::steady_clock::time_point> deadline = std::nullopt);

}  // namespace corral
