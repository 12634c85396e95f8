#pragma once
// The egress suites' shared setup: a real corrald whose egress names come from a hosts file this
// object writes first and removes last (`--egress-hosts-file`), so test names such as
// registry.example.test lead to origin servers the test runs on host loopback addresses
// (origin_server.hpp) and never to DNS. Header-only.

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "daemon_process.hpp"

namespace corral::testing {

/// A shell command for a session: python connects to `host`:`port` directly (no proxy; a name
/// is resolved through the session's resolver) and prints "connected BODY" with what the origin
/// answered, "TIMEOUT" (20 s: only a hang reaches it), "gaierror N", or the errno's name
/// (ECONNREFUSED for what the namespace refuses).
inline std::string direct_connect_command(const std::string& host, uint16_t port) {
    return "/usr/bin/python3 -c '\n"
           "import socket, errno\n"
           "try:\n"
           "    s = socket.create_connection((\"" +
           host + "\", " + std::to_string(port) +
           "), 20)\n"
           "    s.sendall(b\"GET / HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n\")\n"
           "    print(\"connected\", s.recv(4096).decode().split(\"\\r\\n\\r\\n\")[-1])\n"
           "except socket.gaierror as e:\n"
           "    print(\"gaierror\", e.errno)\n"
           "except socket.timeout:\n"
           "    print(\"TIMEOUT\")\n"
           "except OSError as e:\n"
           "    print(errno.errorcode.get(e.errno, e.errno))\n'";
}

/// A temporary /etc/hosts-style file, removed with the object.
class HostsFile {
  public:
    explicit HostsFile(const std::string& text) {
        char tmpl[] = "/tmp/corral-egress-hosts-XXXXXX";
        const int fd = ::mkstemp(tmpl);
        if (fd < 0) return;
        ::close(fd);
        path_ = tmpl;
        std::ofstream(path_) << text;
    }
    ~HostsFile() {
        if (!path_.empty()) ::unlink(path_.c_str());
    }
    HostsFile(const HostsFile&) = delete;
    HostsFile& operator=(const HostsFile&) = delete;
    /// Empty when it could not be made.
    const std::string& hosts_file() const { return path_; }

  private:
    std::string path_;
};

/// corrald with `--egress-hosts-file` naming `hosts` (file text), then `extra_args`. The daemon
/// stops before the file goes.
class EgressHostsDaemon : public HostsFile, public DaemonProcess {
  public:
    EgressHostsDaemon(uint16_t port_base, const std::string& hosts,
                      std::vector<std::string> extra_args = {},
                      std::function<bool(const std::string&)> in_child = {})
        : HostsFile(hosts),
          DaemonProcess(port_base, with_hosts(hosts_file(), std::move(extra_args)),
                        std::move(in_child)) {}

  private:
    static std::vector<std::string> with_hosts(const std::string& file,
                                               std::vector<std::string> extra) {
        std::vector<std::string> args{"--egress-hosts-file", file};
        args.insert(args.end(), extra.begin(), extra.end());
        return args;
    }
};

}  // namespace corral::testing
