#pragma once
// The WebSocket of one terminal process (GET /v1/sessions/{sid}/terminals/{proc}/ws, issue 14).
//
// Wire format (docs/API.md "Terminals"):
//   client -> daemon  binary frame: bytes typed into the terminal (written to the pty master)
//                     text frame:   {"type":"resize","cols":C,"rows":R}   (1..4096 each)
//   daemon -> client  binary frame: bytes the terminal shows; first the kept scrollback (the
//                                   latest 64 KiB), then live output
//                     text frame:   {"type":"error","code":...,"message":...} for a bad frame
//                                   (the connection stays open), and last
//                                   {"type":"exit","status":...,"exitCode":..,"signal":..}
//                                   once the process's record is final, then a normal close.
// Several sockets may attach to one terminal: each reads the process's output ring on its own
// offset, so a slow watcher only slows itself (it skips what fell out of the ring).

#include <string>

#include "sessions/session_manager.hpp"
#include "supervisor/daemon/async_event.hpp"
#include "supervisor/daemon/exchange.hpp"

namespace corral::daemon {

/// Accepts the upgrade on `ex` and bridges the terminal until it exits or the client leaves.
asio::awaitable<void> serve_terminal_socket(Exchange& ex, SessionManager& sessions,
                                            WaitRegistry& waits, std::string sid,
                                            std::string proc);

}  // namespace corral::daemon
