#pragma once
// A fixture around support/daemon_harness's real corrald: starts one per test and creates
// sessions, uploads attacker programs and runs commands in them over HTTP.

#include <gtest/gtest.h>
#include <sys/types.h>

#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "../../integration/support/http_client.hpp"
#include "daemon_harness.hpp"

namespace corral::security {

/// Fixture: a fresh Daemon per test (skips without root or without a built corrald).
class DaemonTest : public ::testing::Test {
  protected:
    void SetUp() override;
    void TearDown() override;

    /// A client of the daemon's socket (full rights, no token).
    testing::HttpClient client() const {
        return testing::HttpClient::unix_socket(daemon_->socket_path());
    }
    /// Creates a session under `policy`; returns {base path "/v1/sessions/<id>", its root on the
    /// host}.
    std::pair<std::string, std::filesystem::path> session(testing::HttpClient& c,
                                                          const std::string& policy);
    /// Puts a program into the session as ./NAME (default: the attacker program as ./probe).
    void upload_probe(testing::HttpClient& c, const std::string& base,
                      const std::string& program = CORRAL_ESCAPE_PROBE,
                      const std::string& name = "probe");
    /// Runs a shell command in the session; returns its stdout.
    std::string run(testing::HttpClient& c, const std::string& base, const std::string& command);

    std::vector<std::string> daemon_env_;  ///< set in a derived constructor to reach SetUp
    std::unique_ptr<Daemon> daemon_;
};

}  // namespace corral::security
