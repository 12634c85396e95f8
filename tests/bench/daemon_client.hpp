#pragma once
// A minimal keep-alive HTTP/1.1 client over a Unix socket, for the daemon benchmarks only. The
// project's own client (supervisor/cli/http_client.hpp) closes the connection after each request
// by design; measuring requests per second over one kept-alive connection needs this one.

#include <functional>
#include <string>

namespace corral::bench {

/// One HTTP response, body de-chunked.
struct Response {
    int status = 0;
    std::string body;
};

/// One connection to corrald; requests go one after another on it.
class DaemonConnection {
  public:
    /// Connects to the AF_UNIX socket at `path`; connected() says whether it worked.
    explicit DaemonConnection(const std::string& path);
    ~DaemonConnection();
    DaemonConnection(const DaemonConnection&) = delete;
    DaemonConnection& operator=(const DaemonConnection&) = delete;

    bool connected() const { return fd_ >= 0; }

    /// Sends one request and reads the whole response (status 0 on a transport error).
    Response request(const std::string& method, const std::string& target,
                     const std::string& body = "");

    /// Sends one request and hands the body to `on_data` piece by piece as it arrives (for the
    /// NDJSON exec stream), without keeping it. Returns the status (0 on a transport error).
    /// `headers`: extra request header lines, each ending in "\r\n".
    int stream(const std::string& method, const std::string& target, const std::string& body,
               const std::function<void(const char*, size_t)>& on_data,
               const std::string& headers = "");

  private:
    bool send_request(const std::string& method, const std::string& target,
                      const std::string& body, const std::string& headers);
    bool fill();  ///< reads more bytes into buf_; false on EOF/error
    bool read_line(std::string& line);
    bool read_exact(size_t n, const std::function<void(const char*, size_t)>& sink);

    int fd_ = -1;
    std::string buf_;
    size_t pos_ = 0;
};

/// A daemon's pool of prepared sessions of one policy (corrald --prepare), as GET /v1/health
/// says: both 0 where there is none (or the daemon did not answer).
struct PreparedPool {
    size_t target = 0;
    size_t ready = 0;
};
PreparedPool prepared_pool(DaemonConnection& c, const std::string& policy);

}  // namespace corral::bench
