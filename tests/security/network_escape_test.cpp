// Escapes over the network and over sockets: raw sockets, the host's loopback services, abstract
// Unix sockets (scoped by the network namespace), and Unix socket files of host services.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include "base/unique_fd.hpp"
#include "support/sandbox_harness.hpp"

namespace corral::security {
namespace {

namespace fs = std::filesystem;

/// A listening socket on the host; returns the port (0 on failure).
uint16_t listen_tcp(UniqueFd& fd, int family) {
    fd.reset(::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_storage storage{};
    socklen_t len;
    if (family == AF_INET6) {
        auto* a = reinterpret_cast<sockaddr_in6*>(&storage);
        a->sin6_family = AF_INET6;
        a->sin6_addr = in6addr_loopback;
        len = sizeof *a;
    } else {
        auto* a = reinterpret_cast<sockaddr_in*>(&storage);
        a->sin_family = AF_INET;
        a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        len = sizeof *a;
    }
    auto* addr = reinterpret_cast<sockaddr*>(&storage);
    if (::bind(fd.get(), addr, len) != 0 || ::listen(fd.get(), 8) != 0) return 0;
    ::getsockname(fd.get(), addr, &len);
    return family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port)
                              : ntohs(reinterpret_cast<sockaddr_in*>(&storage)->sin_port);
}

/// A listening AF_UNIX socket: abstract when `path` starts with '@'.
bool listen_unix(UniqueFd& fd, const std::string& path) {
    fd.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path, path.data(), path.size());
    if (path[0] == '@') a.sun_path[0] = '\0';
    auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size());
    return ::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), len) == 0 &&
           ::listen(fd.get(), 8) == 0;
}

class NetworkEscape : public SandboxTest, public ::testing::WithParamInterface<const char*> {};

// CAP_NET_RAW gives raw and packet sockets: spoofing on the host's networks, and AF_PACKET was
// the way in for CVE-2020-14386 (and CVE-2017-7308). No capability, so both are refused.
TEST_P(NetworkEscape, RawAndPacketSocketsAreRefused_CVE_2020_14386) {
    auto control = attack("none", {"raw-sockets"});
    EXPECT_EQ(answers(control.out)["raw-inet"], "ok") << "control: " << control.out;
    auto r = attack(GetParam(), {"raw-sockets"});
    auto a = answers(r.out);
    EXPECT_EQ(a["raw-inet"], "EPERM") << r.out << r.err;
    EXPECT_EQ(a["raw-packet"], "EPERM") << r.out << r.err;
}

// Services bound to the host's loopback trust local callers (databases, debuggers, the kubelet's
// read-only port, corrald's TCP listener): an isolated network namespace has its own loopback.
TEST_P(NetworkEscape, HostLoopbackListenersAreUnreachable) {
    UniqueFd v4, v6;
    const uint16_t port4 = listen_tcp(v4, AF_INET);
    ASSERT_NE(port4, 0);
    auto control = attack("none", {"connect-tcp", "127.0.0.1", std::to_string(port4)});
    EXPECT_EQ(answers(control.out)["connect"], "ok") << "control: " << control.out;
    auto r4 = attack(GetParam(), {"connect-tcp", "127.0.0.1", std::to_string(port4)});
    EXPECT_EQ(answers(r4.out)["connect"], "ECONNREFUSED") << r4.out << r4.err;

    const uint16_t port6 = listen_tcp(v6, AF_INET6);
    if (port6 == 0) return;  // no IPv6 loopback on this host
    auto r6 = attack(GetParam(), {"connect-tcp", "::1", std::to_string(port6)});
    const std::string answer = answers(r6.out)["connect"];
    EXPECT_TRUE(answer == "ECONNREFUSED" || answer == "ENETUNREACH" || answer == "EADDRNOTAVAIL")
        << r6.out << r6.err;
}

// CVE-2020-15257 (containerd-shim): the shim's API listened on an abstract Unix socket, which any
// container sharing the host's network namespace could connect to and use to escape. Abstract
// sockets are scoped by the network namespace, so an isolated sandbox must not reach the host's.
TEST_P(NetworkEscape, HostAbstractUnixSocketsAreUnreachable_CVE_2020_15257) {
    const std::string name = unique_token();
    UniqueFd listener;
    ASSERT_TRUE(listen_unix(listener, "@" + name));
    auto control = attack("none", {"connect-abstract", name});
    EXPECT_EQ(answers(control.out)["connect"], "ok") << "control: " << control.out;
    auto r = attack(GetParam(), {"connect-abstract", name});
    EXPECT_EQ(answers(r.out)["connect"], "ECONNREFUSED") << r.out << r.err;
}

// Unix socket files of host services are not scoped by any namespace: a sandbox that can see the
// file can connect (a read-only mount does not stop connect()). The Docker socket mounted into a
// container is the best-known escape of this kind; corrald's own socket (/run/corral/corrald.sock,
// root 0660, full rights without a token) is the one that matters here. The listener mimics it:
// root-owned, mode 0660, in a directory under /run.
TEST_P(NetworkEscape, HostUnixSocketFilesUnderRunAreUnreachable) {
    const fs::path run_dir = "/run/" + unique_token();
    fs::create_directories(run_dir);
    const std::string path = (run_dir / "api.sock").string();
    UniqueFd listener;
    ASSERT_TRUE(listen_unix(listener, path));
    ::chmod(path.c_str(), 0660);
    auto control = attack("none", {"connect-unix", path});
    auto r = attack(GetParam(), {"connect-unix", path});
    listener.reset();
    std::error_code ignored;
    fs::remove_all(run_dir, ignored);

    EXPECT_EQ(answers(control.out)["connect"], "ok") << "control: " << control.out;
    const std::string answer = answers(r.out)["connect"];
    EXPECT_TRUE(answer == "ENOENT" || answer == "EACCES" || answer == "ECONNREFUSED")
        << "a host service's socket is reachable from inside the sandbox: " << r.out << r.err;
}

INSTANTIATE_TEST_SUITE_P(Presets, NetworkEscape, ::testing::Values("default", "strict"));

}  // namespace
}  // namespace corral::security
