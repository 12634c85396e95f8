// The test HTTP client's own promise: a server that accepts and then never answers fails the
// request with a message after the idle timeout, instead of holding the test until ctest kills it.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <filesystem>
#include <stdexcept>
#include <string>

#include "support/http_client.hpp"

namespace {

namespace fs = std::filesystem;

/// A Unix socket that the kernel accepts connections on (backlog) but nobody ever reads.
class SilentServer {
  public:
    SilentServer() {
        dir_ = fs::temp_directory_path() / ("corral-http-client-" + std::to_string(getpid()));
        fs::create_directories(dir_);
        path_ = (dir_ / "silent.sock").string();
        fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_un addr{};
        addr.sun_family = AF_UNIX;
        path_.copy(addr.sun_path, sizeof addr.sun_path - 1);
        if (bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(fd_, 4) != 0)
            throw std::runtime_error("silent server: bind/listen failed");
    }
    ~SilentServer() {
        close(fd_);
        std::error_code ignored;
        fs::remove_all(dir_, ignored);
    }
    const std::string& path() const { return path_; }

  private:
    fs::path dir_;
    std::string path_;
    int fd_ = -1;
};

TEST(HttpClient, AServerThatNeverAnswersFailsTheRequestAfterTheIdleTimeout) {
    SilentServer server;
    auto client = corral::testing::HttpClient::unix_socket(server.path());
    client.set_idle_timeout(std::chrono::seconds(1));
    try {
        client.get("/v1/health");
        FAIL() << "a request to a server that never answers returned";
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("no progress within 1 s"), std::string::npos) << e.what();
    }
}

}  // namespace
