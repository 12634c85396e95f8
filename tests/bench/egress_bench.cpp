// corral_bench_egress: what the egress proxy costs a session's connections. Measured in one run
// against a baseline of the same client talking to the same server directly on host loopback:
//   - throughput of one bulk transfer through a CONNECT tunnel (MB/s), and
//   - connection setup latency: connect + CONNECT + 200 + one request/answer through the proxy
//     vs connect + the same request/answer directly (ms).
// The proxy is the real HttpEgressProxy inside a network namespace this program makes (a thread
// that unshares one); the server is a sink on 127.0.0.1. Needs root. Prints ROW lines.
//
// And the session DNS resolver (dns_resolver.hpp), in the same namespace: the median time of one
// A query over UDP from inside, against the daemon resolving the same name itself (EgressLookup
// on the same event loop, the baseline), for a name whose address is already open and for a name
// whose answer first opens its name-bound allowance (an nftables element and a route, through
// the transparent relay: the cost of the first lookup of each name).
//
//   corral_bench_egress [--runs N] [--megabytes M]

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "base/asio.hpp"
#include "isolation/namespaces.hpp"
#include "sessions/network/dns_message.hpp"
#include "sessions/network/dns_resolver.hpp"
#include "sessions/network/egress_lookup.hpp"
#include "sessions/network/http_proxy.hpp"
#include "sessions/network/transparent_relay.hpp"
#include "tests/bench/bench_report.hpp"

using namespace corral;
using namespace corral::bench;

namespace {

/// Reads everything until EOF, then answers "done": a sink that says when it has it all.
class SinkServer {
  public:
    SinkServer() {
        fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in in{};
        in.sin_family = AF_INET;
        in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        ::bind(fd_, reinterpret_cast<sockaddr*>(&in), sizeof in);
        ::listen(fd_, 256);
        socklen_t length = sizeof in;
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&in), &length);
        port_ = ntohs(in.sin_port);
        thread_ = std::thread([this] { serve(); });
    }
    ~SinkServer() {
        stopping_ = true;
        thread_.join();
        ::close(fd_);
    }
    uint16_t port() const { return port_; }

  private:
    void serve() {
        while (!stopping_) {
            pollfd p{fd_, POLLIN, 0};
            if (::poll(&p, 1, 50) <= 0) continue;
            const int client = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
            if (client < 0) continue;
            std::thread([client] {
                std::vector<char> buffer(1 << 16);
                while (::read(client, buffer.data(), buffer.size()) > 0) {
                }
                (void)!::write(client, "done", 4);
                ::close(client);
            }).detach();
        }
    }
    int fd_ = -1;
    uint16_t port_ = 0;
    std::thread thread_;
    std::atomic<bool> stopping_{false};
};

int connect_to(int fd, uint16_t port) {
    sockaddr_in in{};
    in.sin_family = AF_INET;
    in.sin_port = htons(port);
    in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return ::connect(fd, reinterpret_cast<sockaddr*>(&in), sizeof in);
}

bool read_exactly(int fd, size_t length, std::string* out = nullptr) {
    std::string got;
    char buffer[256];
    while (got.size() < length) {
        const ssize_t n = ::read(fd, buffer, std::min(sizeof buffer, length - got.size()));
        if (n <= 0) return false;
        got.append(buffer, static_cast<size_t>(n));
    }
    if (out) *out = got;
    return true;
}

/// One transfer of `bytes` to the sink, over `fd` (already connected, tunnel established).
bool transfer(int fd, size_t bytes) {
    static const std::vector<char> chunk(1 << 16, 'x');
    size_t sent = 0;
    while (sent < bytes) {
        const ssize_t n = ::send(fd, chunk.data(), std::min(chunk.size(), bytes - sent), MSG_NOSIGNAL);
        if (n <= 0) return false;
        sent += static_cast<size_t>(n);
    }
    ::shutdown(fd, SHUT_WR);
    return read_exactly(fd, 4);
}

/// A client socket: inside the namespace (through the proxy) or on the host (direct).
struct Client {
    std::shared_ptr<NetnsRunner> netns;  ///< null: direct
    uint16_t proxy_port = 0;
    uint16_t sink_port = 0;

    /// A connected socket whose next bytes reach the sink; -1 on failure.
    int open() const {
        if (!netns) {
            const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
            if (connect_to(fd, sink_port) != 0) return ::close(fd), -1;
            return fd;
        }
        auto made = netns->tcp_socket(AF_INET);
        if (!made) return -1;
        const int fd = made->release();
        if (connect_to(fd, proxy_port) != 0) return ::close(fd), -1;
        const std::string request =
            "CONNECT 127.0.0.1:" + std::to_string(sink_port) + " HTTP/1.1\r\n\r\n";
        const std::string established = "HTTP/1.1 200 Connection established\r\n\r\n";
        std::string answer;
        if (::write(fd, request.data(), request.size()) != static_cast<ssize_t>(request.size()) ||
            !read_exactly(fd, established.size(), &answer) || answer != established)
            return ::close(fd), -1;
        return fd;
    }
};

/// One A query for `name` over UDP from inside `netns` to its resolver; the answer's rcode, or -1.
int dns_query(const std::shared_ptr<NetnsRunner>& netns, const std::string& name) {
    static uint16_t id = 0;
    const std::vector<uint8_t> q = dns::build_query(name, dns::kTypeA, ++id);
    static UniqueFd fd;
    if (!fd) {
        auto made = netns->run([]() -> Result<UniqueFd> {
            UniqueFd s(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
            if (!s) return sys_error("socket");
            return s;
        });
        if (!made) return -1;
        fd = std::move(*made);
        sockaddr_in in{};
        in.sin_family = AF_INET;
        in.sin_port = htons(53);
        in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        ::connect(fd.get(), reinterpret_cast<sockaddr*>(&in), sizeof in);
        timeval tv{2, 0};
        ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    }
    if (::send(fd.get(), q.data(), q.size(), 0) != static_cast<ssize_t>(q.size())) return -1;
    uint8_t answer[1500];
    const ssize_t n = ::recv(fd.get(), answer, sizeof answer, 0);
    return n >= 12 ? answer[3] & 0x0F : -1;
}

/// The DNS rows: a resolver and a transparent relay in `netns`, names from a hosts override.
void bench_dns(boost::asio::io_context& io, const std::shared_ptr<NetnsRunner>& netns, int runs) {
    const std::string group = "session DNS";
    std::string text = "127.0.0.1 open.bench.test\n";
    for (int i = 0; i < runs; ++i)
        text += "10.99." + std::to_string(i / 250) + "." + std::to_string(i % 250 + 1) + " n" +
                std::to_string(i) + ".bench.test\n";
    auto hosts = std::make_shared<const EgressHosts>(*parse_egress_hosts(text));
    auto rules = EgressRules::compile({EgressMode::custom, {"*.bench.test"}, {}, {}});
    auto gate = std::make_shared<EgressGate>("bench-dns", std::move(*rules), EgressEnvironment{hosts, nullptr, {}});
    std::promise<std::pair<std::unique_ptr<TransparentRelay>, Result<std::unique_ptr<SessionResolver>>>> started;
    boost::asio::post(io, [&] {
        auto relay = TransparentRelay::start(io, netns, gate);
        std::unique_ptr<TransparentRelay> kept = relay ? std::move(*relay) : nullptr;
        TransparentRelay* raw = kept.get();
        auto grant = [gate, raw](const std::string& name, bool pinned, const std::vector<IpAddress>& addresses,
                                 std::chrono::seconds lifetime) {
            std::vector<IpAddress> added;
            for (const auto& a : addresses) {
                auto change = gate->allowances().grant(a, name, pinned, std::chrono::steady_clock::now() + lifetime);
                added.insert(added.end(), change.added.begin(), change.added.end());
            }
            if (raw) (void)raw->change_named(added, {});
        };
        started.set_value({std::move(kept), SessionResolver::start(io, netns, gate, grant)});
    });
    auto [relay, resolver] = started.get_future().get();
    if (!resolver) return print_failed_row(group, "(all)", resolver.error().describe());
    auto lookup = std::make_shared<EgressLookup>(io);
    auto direct = [&] {
        std::promise<size_t> found;
        boost::asio::post(io, [&] {
            lookup->start(hosts.get(), "open.bench.test", 0, AF_INET, std::chrono::seconds(5),
                          [&](EgressLookupResult r) { found.set_value(r.addresses.size()); });
        });
        return found.get_future().get() == 1;
    };
    std::vector<double> direct_us, open_us, first_us;
    dns_query(netns, "open.bench.test");  // grants it once
    for (int i = 0; i < runs; ++i) {
        double start = now_ms();
        if (direct()) direct_us.push_back((now_ms() - start) * 1000);
        start = now_ms();
        if (dns_query(netns, "open.bench.test") == 0) open_us.push_back((now_ms() - start) * 1000);
        start = now_ms();
        if (dns_query(netns, "n" + std::to_string(i) + ".bench.test") == 0)
            first_us.push_back((now_ms() - start) * 1000);
    }
    print_row(group, "daemon's own lookup (hosts file), no DNS", quantile(direct_us, 0.5),
              quantile(direct_us, 0.99), "us", 0, "baseline");
    print_row(group, "A query over UDP, address already open", quantile(open_us, 0.5),
              quantile(open_us, 0.99), "us", quantile(direct_us, 0.5));
    print_row(group, std::string("A query over UDP, first answer opens it") +
                         (relay ? "" : " (no nf_tables)"),
              quantile(first_us, 0.5), quantile(first_us, 0.99), "us", quantile(direct_us, 0.5),
              "nft element + /32 route");
    std::promise<void> stopped;
    boost::asio::post(io, [&] {
        (*resolver)->stop();
        if (relay) relay->stop();
        stopped.set_value();
    });
    stopped.get_future().get();
}

}  // namespace

int main(int argc, char** argv) {
    int runs = 200;
    size_t megabytes = 256;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (std::strcmp(argv[i], "--runs") == 0) runs = std::atoi(argv[i + 1]);
        if (std::strcmp(argv[i], "--megabytes") == 0) megabytes = std::strtoul(argv[i + 1], nullptr, 10);
    }
    if (std::getenv("CORRAL_BENCH_QUICK")) runs = std::min(runs, 40), megabytes = std::min<size_t>(megabytes, 64);
    const std::string group = "egress proxy";
    if (::geteuid() != 0) {
        print_failed_row(group, "(all)", "needs root (network namespaces)");
        return 0;
    }
    // The namespace: a thread unshares one, brings lo up, and hands its fd to a NetnsRunner.
    std::promise<Result<UniqueFd>> made;
    std::thread([&made] {
        if (::unshare(CLONE_NEWNET) != 0) return made.set_value(sys_error("unshare"));
        bring_loopback_up();
        made.set_value(UniqueFd(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC)));
    }).join();
    auto ns = made.get_future().get();
    if (!ns) return print_failed_row(group, "(all)", ns.error().describe()), 0;
    auto netns = NetnsRunner::start(std::move(*ns));
    if (!netns) return print_failed_row(group, "(all)", netns.error().describe()), 0;

    boost::asio::io_context io;
    auto guard = boost::asio::make_work_guard(io);
    std::thread loop([&io] { io.run(); });
    auto rules = EgressRules::compile({EgressMode::custom, {}, {"127.0.0.1/32"}, {}});
    auto gate = std::make_shared<EgressGate>("bench", std::move(*rules), EgressEnvironment{});
    std::promise<Result<std::unique_ptr<HttpEgressProxy>>> started;
    boost::asio::post(io, [&] { started.set_value(HttpEgressProxy::start(io, *netns, gate)); });
    auto proxy = started.get_future().get();
    if (!proxy) return print_failed_row(group, "(all)", proxy.error().describe()), 0;

    SinkServer sink;
    const Client direct{nullptr, 0, sink.port()};
    const Client proxied{*netns, (*proxy)->port(), sink.port()};

    // Connection setup: open, one byte, the sink's "done". Interleaved, so drift hits both.
    std::vector<double> direct_ms, proxied_ms;
    for (int i = 0; i < runs; ++i) {
        for (const Client* client : {&direct, &proxied}) {
            const double start = now_ms();
            const int fd = client->open();
            const bool ok = fd >= 0 && transfer(fd, 1);
            const double took = now_ms() - start;
            if (fd >= 0) ::close(fd);
            if (ok) (client == &direct ? direct_ms : proxied_ms).push_back(took);
        }
    }
    print_row(group, "connect+1 request, direct loopback", quantile(direct_ms, 0.5),
              quantile(direct_ms, 0.99), "ms", 0, "baseline");
    print_row(group, "connect+CONNECT+1 request, via proxy", quantile(proxied_ms, 0.5),
              quantile(proxied_ms, 0.99), "ms", quantile(direct_ms, 0.5));

    // Throughput: one bulk transfer per run.
    const int bulk_runs = std::max(3, runs / 40);
    const size_t bytes = megabytes << 20;
    std::vector<double> direct_mbs, proxied_mbs;
    for (int i = 0; i < bulk_runs; ++i) {
        for (const Client* client : {&direct, &proxied}) {
            const int fd = client->open();
            const double start = now_ms();
            const bool ok = fd >= 0 && transfer(fd, bytes);
            const double took = now_ms() - start;
            if (fd >= 0) ::close(fd);
            if (ok && took > 0)
                (client == &direct ? direct_mbs : proxied_mbs)
                    .push_back(static_cast<double>(megabytes) / (took / 1000.0));
        }
    }
    const std::string note = std::to_string(megabytes) + " MiB x " + std::to_string(bulk_runs);
    print_row(group, "throughput, direct loopback", quantile(direct_mbs, 0.5),
              quantile(direct_mbs, 0.01), "MB/s", 0, "baseline; p99 column = p1");
    print_row(group, "throughput, via proxy (CONNECT)", quantile(proxied_mbs, 0.5),
              quantile(proxied_mbs, 0.01), "MB/s", quantile(direct_mbs, 0.5),
              note + "; p99 column = p1");

    bench_dns(io, *netns, runs);

    boost::asio::post(io, [&] { (*proxy)->stop(); });
    guard.reset();
    boost::asio::post(io, [&] { io.stop(); });
    loop.join();
    (*netns)->stop();
    return 0;
}
