// PortPool: unique loopback port leases, safe under concurrency, skipping ports held by others.
#include "sessions/network/port_pool.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <set>
#include <thread>

#include "base/unique_fd.hpp"

namespace corral {
namespace {

// A high range that the ephemeral range (32768-60999 by default) may overlap; the pool skips
// whatever happens to be busy, so the tests only need "mostly free".
constexpr uint16_t kFirst = 41000;
constexpr uint16_t kLast = 44999;

/// Listens on 127.0.0.1 on an ephemeral-free port in [first, last]; returns the port or 0.
uint16_t listen_somewhere(UniqueFd& sock, uint16_t first, uint16_t last) {
    for (uint32_t port = first; port <= last; ++port) {
        sock.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_port = htons(static_cast<uint16_t>(port));
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (::bind(sock.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
            ::listen(sock.get(), 1) == 0) {
            return static_cast<uint16_t>(port);
        }
    }
    return 0;
}

TEST(PortPool, RefusesAnEmptyRange) {
    EXPECT_FALSE(PortPool::create(5000, 4999).ok());
    EXPECT_FALSE(PortPool::create(0, 10).ok());
    EXPECT_TRUE(PortPool::create(5000, 5000).ok());
}

TEST(PortPool, LeasesAreUniqueAcross8ThreadsOf200Leases) {
    auto pool = PortPool::create(kFirst, kLast);
    ASSERT_TRUE(pool.ok());
    constexpr int kThreads = 8, kLeases = 200;
    std::vector<std::vector<uint16_t>> got(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            for (int i = 0; i < kLeases; ++i) {
                auto port = (*pool)->lease("session-" + std::to_string(t));
                if (port.ok()) got[t].push_back(*port);
            }
        });
    }
    for (auto& thread : threads) thread.join();
    std::set<uint16_t> all;
    for (int t = 0; t < kThreads; ++t) {
        ASSERT_EQ(got[t].size(), static_cast<std::size_t>(kLeases)) << "thread " << t;
        for (uint16_t port : got[t]) {
            EXPECT_TRUE(all.insert(port).second) << "port " << port << " leased twice";
            EXPECT_GE(port, kFirst);
            EXPECT_LE(port, kLast);
        }
        EXPECT_EQ((*pool)->leases_of("session-" + std::to_string(t)).size(),
                  static_cast<std::size_t>(kLeases));
    }
    EXPECT_EQ((*pool)->leased_count(), static_cast<std::size_t>(kThreads * kLeases));
}

TEST(PortPool, ExhaustionNamesTheRangeAndReleaseReturnsThePort) {
    UniqueFd probe;
    uint16_t base = listen_somewhere(probe, 45100, 45900);  // just to find a free neighbourhood
    ASSERT_NE(base, 0);
    probe.reset();
    const uint16_t first = base, last = static_cast<uint16_t>(base + 2);
    auto pool = PortPool::create(first, last);
    ASSERT_TRUE(pool.ok());
    std::set<uint16_t> leased;
    while (true) {
        auto port = (*pool)->lease("s1");
        if (!port.ok()) {
            EXPECT_EQ(port.error().code, EADDRNOTAVAIL);
            EXPECT_NE(port.error().message.find(std::to_string(first) + "-" + std::to_string(last)),
                      std::string::npos)
                << port.error().message;
            break;
        }
        leased.insert(*port);
        ASSERT_LE(leased.size(), 3u);
    }
    ASSERT_FALSE(leased.empty()) << "no port in " << first << "-" << last << " was free";

    uint16_t some = *leased.begin();
    EXPECT_TRUE((*pool)->release(some));
    EXPECT_FALSE((*pool)->release(some)) << "double release must be harmless";
    EXPECT_FALSE((*pool)->owner_of(some).has_value());
    auto again = (*pool)->lease("s2");
    ASSERT_TRUE(again.ok()) << again.error().describe();
    EXPECT_EQ(*again, some);
    EXPECT_EQ((*pool)->owner_of(some), std::optional<std::string>("s2"));
}

TEST(PortPool, ReleaseAllFreesOnlyThatOwnersPorts) {
    auto pool = PortPool::create(kFirst, kLast);
    ASSERT_TRUE(pool.ok());
    auto a1 = (*pool)->lease("a"), b1 = (*pool)->lease("b"), a2 = (*pool)->lease("a");
    ASSERT_TRUE(a1.ok() && b1.ok() && a2.ok());
    auto released = (*pool)->release_all("a");
    std::vector<uint16_t> expected{std::min(*a1, *a2), std::max(*a1, *a2)};
    EXPECT_EQ(released, expected);
    EXPECT_TRUE((*pool)->leases_of("a").empty());
    EXPECT_EQ((*pool)->leases_of("b"), std::vector<uint16_t>{*b1});
    EXPECT_TRUE((*pool)->release_all("a").empty());
}

TEST(PortPool, SkipsAPortAnotherProgramListensOn) {
    UniqueFd listener;
    uint16_t busy = listen_somewhere(listener, 46000, 46900);
    ASSERT_NE(busy, 0);
    EXPECT_FALSE(loopback_port_is_free(busy));
    auto pool = PortPool::create(busy, busy);
    ASSERT_TRUE(pool.ok());
    auto port = (*pool)->lease("s");
    ASSERT_FALSE(port.ok());
    EXPECT_NE(port.error().message.find("1 in use by other programs"), std::string::npos)
        << port.error().message;
    listener.reset();
    auto after = (*pool)->lease("s");
    ASSERT_TRUE(after.ok()) << after.error().describe();
    EXPECT_EQ(*after, busy);
}

TEST(PortPool, HandsOutPortsRoundRobinSoAReleasedPortIsNotReusedAtOnce) {
    auto pool = PortPool::create(kFirst, kLast);
    ASSERT_TRUE(pool.ok());
    auto first = (*pool)->lease("s");
    ASSERT_TRUE(first.ok());
    (*pool)->release(*first);
    auto second = (*pool)->lease("s");
    ASSERT_TRUE(second.ok());
    EXPECT_NE(*second, *first);
}

}  // namespace
}  // namespace corral
