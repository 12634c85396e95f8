#pragma once
// The limits corrald puts on each client connection (its command line sets them).

#include <chrono>
#include <cstddef>

namespace corral::daemon {

/// How much a client may take of the server (corrald options; DESIGN "API", docs/API.md
/// "Limits"). Precedents: slowloris (one header byte a second holds a connection; issue 12
/// item 4), nginx's client_header_timeout / client_body_timeout / worker_connections.
struct ConnectionLimits {
    /// A request's header must be complete this long after its first byte (or after accept).
    std::chrono::milliseconds header_timeout{std::chrono::seconds(10)};
    /// Each wait for body bytes (and for a client to read an error response) is bounded so.
    std::chrono::milliseconds body_timeout{std::chrono::seconds(30)};
    /// Each write of a response (one chunk of it) must be taken by the client within this, or the
    /// connection is dropped: a client that asks for a large response and does not read it holds
    /// one chunk and the socket's buffer, and only this long (issue 12 item 3).
    std::chrono::milliseconds write_timeout{std::chrono::seconds(30)};
    /// A response of known extent (a JSON body made a piece at a time, a file download) must on
    /// average go at least this fast once its first write timeout has passed: each piece taken
    /// just inside the write timeout would otherwise hold the response (and the one copy of a
    /// run's output it is made from) for hours. Streams that follow a process are paced by the
    /// process and are not held to it.
    size_t min_write_rate = 1024 * 1024;  // bytes per second
    /// A keep-alive connection may sit idle between requests this long.
    std::chrono::milliseconds idle_timeout{std::chrono::seconds(60)};
    /// Open connections served at once; the next one is answered 503 and closed.
    size_t max_connections = 512;
};

}  // namespace corral::daemon
