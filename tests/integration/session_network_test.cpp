// Network isolation through the session manager (root, real kernel): a server inside an isolated
// session is reachable through its leased port from the host; wait-for-port sees it start; one
// session's server is unreachable from another; network.allow lets exactly the listed host
// listener in; after the session ends the port refuses, is free again, and no namespace thread
// or descriptor is left.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <optional>

#include "sessions/network/port_pool.hpp"
#include "sessions/session_manager.hpp"
#include "tests/integration/netns_fixture.hpp"

namespace corral {
namespace {

using namespace nettest;
using namespace std::chrono_literals;

/// A python3 server inside the session: answers each connection with "echo:" + what it read.
std::string echo_server_command(uint16_t port) {
    return "exec /usr/bin/python3 -c '\n"
           "import socket\n"
           "s = socket.socket()\n"
           "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
           "s.bind((\"127.0.0.1\", " +
           std::to_string(port) +
           "))\n"
           "s.listen(64)\n"
           "while True:\n"
           "    c, _ = s.accept()\n"
           "    c.sendall(b\"echo:\" + c.recv(65536))\n"
           "    c.close()\n'";
}

class SessionNetworkTest : public ::testing::Test {
  protected:
    void SetUp() override {
        if (::geteuid() != 0) GTEST_SKIP() << "needs root";
        if (::access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "needs /usr/bin/python3";
        auto host = discover_cgroup_host();
        ASSERT_TRUE(host) << host.error().describe();
        char tmpl[] = "/tmp/corral-net-test-XXXXXX";
        ASSERT_NE(::mkdtemp(tmpl), nullptr);
        state_dir_ = tmpl;
        SessionManagerConfig config;
        config.state_dir = state_dir_;
        config.instance_name = "corral-test-" + std::to_string(::getpid()) + "-net";
        config.port_first = static_cast<uint16_t>(15000 + (::getpid() % 500) * 10);  // 15000-19999
        config.port_last = static_cast<uint16_t>(config.port_first + 9);
        config.ended_retention = 200ms;
        auto manager = SessionManager::create(io_, config, *host);
        ASSERT_TRUE(manager) << manager.error().describe();
        manager_ = std::move(*manager);
    }
    void TearDown() override {
        manager_.reset();
        if (!state_dir_.empty()) std::filesystem::remove_all(state_dir_);
    }

    bool run_until(const std::function<bool()>& done, std::chrono::milliseconds bound = 30s) {
        const auto deadline = std::chrono::steady_clock::now() + bound;
        io_.restart();
        while (!done()) {
            if (std::chrono::steady_clock::now() > deadline) return false;
            io_.run_one_for(20ms);
        }
        return true;
    }
    /// Runs `work` on a thread while the loop serves the forwarders; returns its result.
    template <class T>
    T with_loop(std::function<T()> work) {
        auto task = std::async(std::launch::async, std::move(work));
        EXPECT_TRUE(run_until([&] { return task.wait_for(0s) == std::future_status::ready; }))
            << "client hung";
        return task.get();
    }
    CreatedSession create_isolated(const std::string& extra_network = "") {
        CreateSessionRequest request;
        request.policy_yaml =
            "name: net-test\nextends: none\n"
            "namespaces: { network: isolated }\n"
            "network: { ports: 1" +
            extra_network + " }\n";
        auto created = manager_->create_session(request);
        EXPECT_TRUE(created) << created.error().describe();
        return created ? *created : CreatedSession{};
    }
    std::string start(const std::string& sid, const std::string& command) {
        ProcessRequest request;
        request.command = command;
        auto started = manager_->start_process(sid, request);
        EXPECT_TRUE(started) << started.error().describe();
        return started ? started->id : "";
    }
    /// Runs a command to its end and returns its stdout.
    std::string run(const std::string& sid, std::vector<std::string> argv) {
        ProcessRequest request;
        request.argv = std::move(argv);
        auto started = manager_->start_process(sid, request);
        EXPECT_TRUE(started) << started.error().describe();
        if (!started) return "";
        bool done = false;
        auto handle = manager_->async_wait_process(sid, started->id, std::nullopt,
                                                   [&](Result<ProcessInfo>, bool) { done = true; });
        EXPECT_TRUE(run_until([&] { return done; }));
        auto chunk = manager_->read_output(sid, started->id, OutputStream::out, 0);
        return chunk ? chunk->data : "";
    }
    Status wait_port(const std::string& sid, uint16_t port, std::chrono::milliseconds timeout) {
        std::optional<Status> result;
        auto handle = manager_->async_wait_port(sid, port, timeout,
                                                [&](Status status) { result = std::move(status); });
        EXPECT_TRUE(run_until([&] { return result.has_value(); })) << "wait_port hung";
        return result.value_or(Status(plain_error("no result")));
    }
    void end(const std::string& sid) {
        bool done = false;
        manager_->end_session(sid, [&](Result<EndSessionReport>) { done = true; });
        EXPECT_TRUE(run_until([&] { return done; })) << "end_session hung";
    }
    /// Host client: sends `text`, reads the reply to EOF ("" when the connection fails).
    std::string exchange(uint16_t port, const std::string& text) {
        return with_loop<std::string>([port, text] {
            UniqueFd client = connect_host(port);
            if (!client.valid()) return std::string("<refused>");
            write_all(client.get(), text);
            return read_to_eof(client.get());
        });
    }

    boost::asio::io_context io_;
    std::unique_ptr<SessionManager> manager_;
    std::string state_dir_;
};

TEST_F(SessionNetworkTest, LeasedPortReachesServerInsideUntilSessionEnds) {
    CreatedSession session = create_isolated();
    ASSERT_EQ(session.info.ports.size(), 1u);
    const std::string sid = session.info.id;
    const uint16_t port = session.info.ports[0].port;
    start(sid, echo_server_command(port));
    Status ready = wait_port(sid, port, 20s);
    ASSERT_TRUE(ready) << ready.error().describe();
    EXPECT_EQ(exchange(port, "hi"), "echo:hi");

    end(sid);
    EXPECT_EQ(exchange(port, "hi"), "<refused>");
    EXPECT_TRUE(loopback_port_is_free(port)) << "port still held after the session ended";
    // The namespace thread and the nftables worker serve every session and outlive them all
    // (netns_runner.hpp); a session adds no thread that outlives it.
    const int threads_between = thread_count();
    end(create_isolated().info.id);
    // A joined thread can linger in /proc/self/task for a moment (port_forwarder_test): wait.
    for (int i = 0; i < 200 && thread_count() > threads_between; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_EQ(thread_count(), threads_between) << "a thread outlived the session";
}

TEST_F(SessionNetworkTest, PortLeasedLaterIsForwardedAndReleaseStopsIt) {
    CreatedSession session = create_isolated();
    const std::string sid = session.info.id;
    auto lease = manager_->lease_port(sid);
    ASSERT_TRUE(lease) << lease.error().describe();
    start(sid, echo_server_command(lease->port));
    ASSERT_TRUE(wait_port(sid, lease->port, 20s));
    EXPECT_EQ(exchange(lease->port, "later"), "echo:later");
    ASSERT_TRUE(manager_->release_port(sid, lease->port));
    EXPECT_EQ(exchange(lease->port, "later"), "<refused>");
    end(sid);
}

TEST_F(SessionNetworkTest, WaitForPortTimesOutWhenNothingListens) {
    CreatedSession session = create_isolated();
    const uint16_t port = session.info.ports[0].port;
    Status status = wait_port(session.info.id, port, 300ms);
    ASSERT_FALSE(status);
    EXPECT_EQ(status.error().code, ETIMEDOUT) << status.error().describe();
    EXPECT_EQ(wait_port(session.info.id, 1, 300ms).error().code, ENOENT);  // not leased
    end(session.info.id);
}

TEST_F(SessionNetworkTest, OneSessionCannotReachAnothersServer) {
    CreatedSession first = create_isolated();
    CreatedSession second = create_isolated();
    const uint16_t port = first.info.ports[0].port;
    start(first.info.id, echo_server_command(port));
    ASSERT_TRUE(wait_port(first.info.id, port, 20s));
    // From inside the second session: neither the first's server nor the host's forward.
    EXPECT_EQ(run(second.info.id, {CORRAL_PROBE, "connect", std::to_string(port)}),
              "ECONNREFUSED\n");
    end(first.info.id);
    end(second.info.id);
}

TEST_F(SessionNetworkTest, AllowListLetsOnlyListedHostListenerIn) {
    auto allowed = make_tcp_listener({AF_INET, "127.0.0.1", 0});
    auto other = make_tcp_listener({AF_INET, "127.0.0.1", 0});
    ASSERT_TRUE(allowed && other);
    EchoServer allowed_server(std::move(*allowed));
    EchoServer other_server(std::move(*other));
    CreatedSession session =
        create_isolated(", allow: [\"127.0.0.1:" + std::to_string(allowed_server.port()) + "\"]");
    const std::string sid = session.info.id;
    EXPECT_EQ(run(sid, {CORRAL_PROBE, "connect", std::to_string(allowed_server.port())}), "ok\n");
    EXPECT_EQ(run(sid, {CORRAL_PROBE, "connect", std::to_string(other_server.port())}),
              "ECONNREFUSED\n");
    EXPECT_EQ(other_server.accepted(), 0);
    end(sid);
}

}  // namespace
}  // namespace corral
