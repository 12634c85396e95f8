// deploy/systemd/corrald.service: what it must say (Delegate=yes, the socket and state
// directories corrald uses), what it must not (settings that would break corrald or its
// sessions), and that systemd itself accepts it (`systemd-analyze verify`, where installed).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "supervisor/daemon/daemon_options.hpp"

namespace {

namespace fs = std::filesystem;

const fs::path kUnit = fs::path(CORRAL_SOURCE_DIR) / "deploy" / "systemd" / "corrald.service";

/// Key=value lines of the file (comments and section headers skipped; last one wins).
std::map<std::string, std::string> directives(const std::string& text) {
    std::map<std::string, std::string> out;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
        if (line.empty() || line[0] == '#' || line[0] == ';' || line[0] == '[') continue;
        auto eq = line.find('=');
        if (eq != std::string::npos) out[line.substr(0, eq)] = line.substr(eq + 1);
    }
    return out;
}

std::string slurp(const fs::path& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

/// Runs a shell command; returns its exit status and everything it printed (both streams).
std::pair<int, std::string> run(const std::string& command) {
    std::string output;
    FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
    if (!pipe) return {-1, "popen failed"};
    char buffer[4096];
    for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) output.append(buffer, n);
    int status = ::pclose(pipe);
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

bool have_systemd_analyze() {
    return run("command -v systemd-analyze").first == 0;
}

/// A copy of the unit in a fresh directory whose ExecStart names an executable that exists
/// here (verify checks it), with the first `from` replaced by `to`.
fs::path staged_unit(const std::string& dir_name, const std::string& from, const std::string& to) {
    fs::path dir = fs::temp_directory_path() / (dir_name + "-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    std::string text = slurp(kUnit);
    const std::string exec = "ExecStart=/usr/local/bin/corrald";
    text.replace(text.find(exec), exec.size(), "ExecStart=/bin/true");
    if (!from.empty()) text.replace(text.find(from), from.size(), to);
    std::ofstream(dir / "corrald.service") << text;
    return dir / "corrald.service";
}

TEST(DeploySystemdUnit, DelegatesTheCgroupAndUsesCorraldsOwnPaths) {
    auto unit = directives(slurp(kUnit));
    EXPECT_EQ(unit["Delegate"], "yes") << "corrald must own its cgroup subtree";
    EXPECT_EQ(unit["RuntimeDirectory"], "corral");
    EXPECT_EQ(unit["StateDirectory"], "corral");
    EXPECT_EQ(unit["KillMode"], "mixed") << "SIGTERM to corrald alone: it ends the sessions";
    // The paths on ExecStart are corrald's defaults and lie in the directories systemd makes.
    const corral::daemon::DaemonOptions defaults;
    const std::string& exec = unit["ExecStart"];
    EXPECT_NE(exec.find("--socket " + defaults.socket_path), std::string::npos) << exec;
    EXPECT_NE(exec.find("--state-dir " + defaults.state_dir), std::string::npos) << exec;
    EXPECT_EQ(defaults.socket_path.rfind("/run/" + unit["RuntimeDirectory"] + "/", 0), 0u);
    EXPECT_EQ(defaults.state_dir, "/var/lib/" + unit["StateDirectory"]);
}

// Security (issue 11.6): the socket's directory mode is its access control (a request without a
// token has corrald's full rights, as with Docker's socket, whose docs warn that only trusted
// users may reach it), so nothing may open it to other users; and nothing may make the cgroup
// tree read-only (ProtectControlGroups) or otherwise reach into every session.
TEST(DeploySystemdUnit, SocketDirectoryIsClosedAndCgroupsStayWritable) {
    auto unit = directives(slurp(kUnit));
    ASSERT_EQ(unit.count("RuntimeDirectoryMode"), 1u);
    const int mode = std::stoi(unit["RuntimeDirectoryMode"], nullptr, 8);
    EXPECT_EQ(mode & 07, 0) << "others must not reach the socket";
    EXPECT_EQ(mode & 02, 0);
    const int state_mode = std::stoi(unit["StateDirectoryMode"], nullptr, 8);
    EXPECT_EQ(state_mode & 077, 0) << "session tokens live in the state dir";
    for (const char* breaking : {"ProtectControlGroups", "PrivateDevices", "SystemCallFilter",
                                 "MemoryDenyWriteExecute", "CapabilityBoundingSet",
                                 "ProtectSystem", "PrivateTmp", "ProtectHome"})
        EXPECT_EQ(unit.count(breaking), 0u) << breaking << " would reach every session";
}

TEST(DeploySystemdUnit, SystemdAnalyzeVerifyAcceptsIt) {
    if (!have_systemd_analyze()) GTEST_SKIP() << "systemd-analyze is not installed";
    const fs::path unit = staged_unit("corral-unit-verify", "", "");
    auto [status, output] = run("systemd-analyze verify --man=no '" + unit.string() + "'");
    EXPECT_EQ(status, 0) << output;
    // verify exits 0 on unknown or misspelt keys and only warns: any word about our file fails.
    EXPECT_EQ(output.find(unit.string()), std::string::npos) << output;
    EXPECT_EQ(output.find("corrald.service"), std::string::npos) << output;
    fs::remove_all(unit.parent_path());
}

// The control for the test above: the same check sees a misspelt key, so silence means a clean
// unit and not a verifier that ignores us.
TEST(DeploySystemdUnit, SystemdAnalyzeVerifyCatchesAMisspeltKey) {
    if (!have_systemd_analyze()) GTEST_SKIP() << "systemd-analyze is not installed";
    const fs::path unit = staged_unit("corral-unit-verify-bad", "\nDelegate=yes", "\nDelegat=yes");
    auto [status, output] = run("systemd-analyze verify --man=no '" + unit.string() + "'");
    EXPECT_NE(output.find("Delegat"), std::string::npos) << status << ": " << output;
    fs::remove_all(unit.parent_path());
}

}  // namespace
