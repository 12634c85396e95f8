// A TCP relay (port forwards, the egress proxy) must not be held open forever by a peer that
// stops reading: each held relay is two sockets and two buffers of the daemon's, so a client
// could pile them up (a slowloris-style exhaustion, issue 10 red-team round 3). The bounded
// linger used to start only once the other direction was done; when that direction was blocked
// writing to a client that never reads, it never was. Now the bound runs from the first failed
// write. Loopback only.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "sessions/network/tcp_relay.hpp"

namespace corral {
namespace {

using boost::asio::ip::tcp;
using namespace std::chrono_literals;

/// Runs `io` on a thread of its own until the end of the scope. Declare it after everything its
/// handlers touch (and that after the io_context): it is gone first, before they are.
struct LoopThread {
    explicit LoopThread(boost::asio::io_context& io)
        : io(io), guard(io.get_executor()), loop([&io] { io.run(); }) {}
    ~LoopThread() {
        guard.reset();
        io.stop();
        loop.join();
    }
    boost::asio::io_context& io;
    boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard;
    std::thread loop;
};

TEST(RelayLinger, AClientThatNeverReadsDoesNotHoldTheRelayOnceTheServerIsGone) {
    boost::asio::io_context io;
    std::atomic<bool> finished{false};
    std::shared_ptr<TcpRelay> relay;
    LoopThread thread(io);

    // client <-> a (relay) and b (relay) <-> server, all on loopback.
    const auto loopback = boost::asio::ip::make_address("127.0.0.1");
    tcp::acceptor front(io, {loopback, 0}), back(io, {loopback, 0});
    tcp::socket client(io), a(io), b(io), server(io);
    client.connect(front.local_endpoint());
    front.accept(a);
    b.connect(back.local_endpoint());
    back.accept(server);

    relay = std::make_shared<TcpRelay>(std::move(a), std::move(b), 64 * 1024,
                                       [&](TcpRelay&) { finished = true; });
    relay->set_linger_limit(1s);
    boost::asio::post(io, [relay] { relay->start(); });

    // The server writes until nothing moves: the client reads nothing, so the relay ends up
    // blocked in a write to it with its buffer full.
    const int s = server.native_handle();
    ASSERT_EQ(::fcntl(s, F_SETFL, ::fcntl(s, F_GETFL) | O_NONBLOCK), 0);
    std::vector<char> chunk(64 * 1024, 'x');
    for (int idle = 0; idle < 50;) {
        if (::send(s, chunk.data(), chunk.size(), MSG_NOSIGNAL) > 0) {
            idle = 0;
        } else {
            ASSERT_TRUE(errno == EAGAIN || errno == EWOULDBLOCK) << std::strerror(errno);
            ++idle;
            std::this_thread::sleep_for(10ms);
        }
    }
    // The server goes with a reset; the client then sends, and the relay's write to the server
    // fails: the first sink failure.
    linger reset{1, 0};
    ASSERT_EQ(::setsockopt(s, SOL_SOCKET, SO_LINGER, &reset, sizeof reset), 0);
    server.close();
    const int c = client.native_handle();
    ASSERT_EQ(::fcntl(c, F_SETFL, ::fcntl(c, F_GETFL) | O_NONBLOCK), 0);
    const auto give_up = std::chrono::steady_clock::now() + 30s;  // a hang bound, not a timing
    while (!finished && std::chrono::steady_clock::now() < give_up) {
        (void)::send(c, "more", 4, MSG_NOSIGNAL);
        std::this_thread::sleep_for(50ms);
    }
    EXPECT_TRUE(finished) << "a client that never reads held the relay open";
}

// Issue 15 item 3: an egress tunnel (CONNECT or the transparent relay) that the sandbox opened and
// forgot, or holds open on purpose to pile up the daemon's sockets, is closed once nothing moved
// either way for its idle limit (corrald --egress-idle-timeout, 10 minutes by default); a tunnel
// that keeps carrying bytes, however slowly, is not.
TEST(RelayIdle, AnIdleTunnelIsClosedAndABusyOneIsNot) {
    boost::asio::io_context io;
    const auto loopback = boost::asio::ip::make_address("127.0.0.1");
    tcp::acceptor front(io, {loopback, 0}), back(io, {loopback, 0});
    struct Pair {
        tcp::socket client, server;
        std::shared_ptr<TcpRelay> relay;
        std::atomic<bool> finished{false};
    };
    auto make = [&](Pair& p) {
        tcp::socket a(io), b(io);
        p.client.connect(front.local_endpoint());
        front.accept(a);
        b.connect(back.local_endpoint());
        back.accept(p.server);
        p.relay = std::make_shared<TcpRelay>(std::move(a), std::move(b), 4096,
                                             [&p](TcpRelay&) { p.finished = true; });
        p.relay->set_idle_limit(1500ms);
        boost::asio::post(io, [relay = p.relay] { relay->start(); });
    };
    Pair idle{tcp::socket(io), tcp::socket(io)}, busy{tcp::socket(io), tcp::socket(io)};
    make(idle);
    make(busy);
    LoopThread thread(io);
    // The busy one sends a byte every 100 ms for 3 s, well past the idle limit.
    char byte = 'x';
    for (int i = 0; i < 30; ++i) {
        boost::asio::write(busy.client, boost::asio::buffer(&byte, 1));
        char got = 0;
        boost::asio::read(busy.server, boost::asio::buffer(&got, 1));
        ASSERT_EQ(got, 'x');
        std::this_thread::sleep_for(100ms);
    }
    EXPECT_FALSE(busy.finished) << "a tunnel carrying bytes was closed as idle";
    EXPECT_TRUE(idle.finished) << "an idle tunnel outlived its limit";
    EXPECT_TRUE(idle.relay->closed_idle());
    // Both peers of the idle tunnel see it end.
    char scratch = 0;
    boost::system::error_code error;
    idle.client.read_some(boost::asio::buffer(&scratch, 1), error);
    EXPECT_EQ(error, boost::asio::error::eof);
    boost::asio::post(io, [relay = busy.relay] { relay->close(); });
}

}  // namespace
}  // namespace corral
