#pragma once
// The egress suites' shared setup: a real corrald whose egress names come from a hosts file this
// object writes first and removes last (`--egress-hosts-file`), so test names such as
// registry.example.test lead to origin servers the test runs on host loopback addresses
// (origin_server.hpp) and never to DNS. Header-only.

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "daemon_process.hpp"

namespace corral::testing {

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
