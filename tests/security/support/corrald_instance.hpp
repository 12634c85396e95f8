#pragma once
// A real corrald for the input-hardening tests: its own socket under /run, state and policy dir
// under /var/lib, a loopback TCP listener, and whatever extra options a test gives (short
// connection timeouts, a small connection cap). Plus raw-socket helpers with timeouts, since
// these tests send what no HTTP client library would (malformed requests, one byte a second)
// and must not hang when the daemon does.

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace corral::security {

/// A started corrald; SIGTERM then SIGKILL (bounded) and its directories removed on destruction.
class CorraldInstance {
  public:
    explicit CorraldInstance(std::vector<std::string> extra_args = {});
    ~CorraldInstance();
    CorraldInstance(const CorraldInstance&) = delete;
    CorraldInstance& operator=(const CorraldInstance&) = delete;

    /// Whether it answered on its socket and reported its TCP port.
    bool ready() const { return tcp_port_ != 0; }
    pid_t pid() const { return pid_; }
    const std::string& socket_path() const { return socket_; }
    const std::string& policy_dir() const { return policy_dir_; }
    /// A scratch dir of the test's own (outside the policy dir), removed at the end.
    const std::string& scratch_dir() const { return scratch_dir_; }
    uint16_t tcp_port() const { return tcp_port_; }
    /// Everything corrald wrote to stdout/stderr so far.
    std::string log() const;
    /// Resident memory of corrald in KiB (VmRSS), 0 if unknown.
    long rss_kib() const;
    /// CPU time (user + system) corrald used so far.
    std::chrono::milliseconds cpu_time() const;

  private:
    std::string run_dir_, state_dir_, policy_dir_, scratch_dir_, socket_;
    std::string instance_;  ///< its cgroup instance, removed at the end if corrald left it
    pid_t pid_ = -1;
    uint16_t tcp_port_ = 0;
};

/// A connected client socket (Unix path, or TCP port on 127.0.0.1); closed on destruction.
class RawConnection {
  public:
    static RawConnection unix_socket(const std::string& path);
    static RawConnection tcp(uint16_t port);
    RawConnection(RawConnection&& other) noexcept;
    RawConnection& operator=(RawConnection&&) = delete;
    ~RawConnection();

    bool connected() const { return fd_ >= 0; }
    /// Sends all of `bytes`; false when the peer is gone.
    bool send(const std::string& bytes);
    /// Reads until the peer closes or `timeout` passes; what arrived (nullopt: nothing arrived
    /// and the connection is still open when the time ran out).
    std::optional<std::string> read_until_close(std::chrono::milliseconds timeout);
    /// Reads one whole HTTP response (by Content-Length); nullopt on timeout or close before it.
    std::optional<std::string> read_response(std::chrono::milliseconds timeout);
    /// Whether the peer has closed (a read would return EOF) within `timeout`.
    bool closed_within(std::chrono::milliseconds timeout);
    void close();

  private:
    explicit RawConnection(int fd) : fd_(fd) {}
    int fd_ = -1;
    std::string pending_;
};

/// One request on a fresh connection, answered within `timeout` or nullopt (the daemon hung).
/// The answer is read even when the daemon stopped reading the request (413 on a large body).
std::optional<std::string> request_within(const std::string& socket_path, const std::string& raw,
                                          std::chrono::milliseconds timeout);
/// "GET /v1/health" on a fresh connection within `timeout`: true when it answered 200.
bool health_within(const std::string& socket_path, std::chrono::milliseconds timeout);
/// A POST request with a body, as raw HTTP/1.1 text.
std::string post_request(const std::string& target, const std::string& body,
                         const std::string& content_type = "application/json",
                         const std::string& extra_headers = "");
/// The status code of a raw response ("HTTP/1.1 400 ..."), 0 when none.
unsigned status_of(const std::string& response);
/// The body of a raw response.
std::string body_of(const std::string& response);

}  // namespace corral::security
