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
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "sessions/network/tcp_relay.hpp"

namespace corral {
namespace {

using boost::asio::ip::tcp;
using namespace std::chrono_literals;

TEST(RelayLinger, AClientThatNeverReadsDoesNotHoldTheRelayOnceTheServerIsGone) {
    boost::asio::io_context io;
    auto guard = boost::asio::make_work_guard(io);
    std::thread loop([&] { io.run(); });
    std::atomic<bool> finished{false};
    std::shared_ptr<TcpRelay> relay;
    // Runs first on the way out: the loop thread is gone before what its handlers touch.
    struct Join {
        boost::asio::io_context& io;
        std::thread& loop;
        decltype(guard)& work;
        ~Join() {
            work.reset();
            io.stop();
            loop.join();
        }
    } join{io, loop, guard};

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

}  // namespace
}  // namespace corral
