#pragma once
// The escape suite's harness: runs the real `corral run` in a fresh temporary directory (the
// sandbox's working directory) with the attacker program copied in as ./probe, and checks after
// every run that corral removed its cgroup. Also small host-side helpers the attacks need: a host
// process to aim at, a scan for processes that outlived their session, the probe's answer lines.

#include <gtest/gtest.h>
#include <sys/types.h>

#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace corral::security {

/// What one `corral` invocation did.
struct RunOutcome {
    int exit_code = -1;  ///< corral's exit code, 128+N when corral itself died of signal N
    std::string out;     ///< the command's stdout (corral passes it through)
    std::string err;
    pid_t corral_pid = -1;
};

/// Options for SandboxTest::corral.
struct RunOptions {
    std::string corral_binary;            ///< default: the build's supervisor/corral
    int stdin_fd = -1;                    ///< default: /dev/null
    std::function<void()> in_child;       ///< runs in the forked child before exec
    std::function<void(pid_t)> on_start;  ///< runs in the test once corral is started
};

/// The probe's answer lines "<label> <result>" as a map label -> result (last one wins).
std::map<std::string, std::string> answers(const std::string& probe_output);

/// Whether a process with this pid exists (zombies included).
bool process_exists(pid_t pid);

/// Host pids whose command line contains `token` (never the caller).
std::vector<pid_t> processes_with_token(const std::string& token);

/// SIGKILLs (by pid) every process whose command line contains `token`; returns how many.
size_t kill_processes_with_token(const std::string& token);

/// A unique token for this test process: "corral-escape-<pid>-<n>".
std::string unique_token();

/// A `sleep` the test starts on the host as a target; killed and reaped by pid when destroyed.
class HostProcess {
  public:
    HostProcess();
    ~HostProcess();
    HostProcess(const HostProcess&) = delete;
    HostProcess& operator=(const HostProcess&) = delete;
    pid_t pid() const { return pid_; }
    /// Alive and not a zombie: the attack did not kill it.
    bool alive() const;

  private:
    pid_t pid_ = -1;
};

/// Fixture: a temporary working directory (mode 0755 so `strict`'s nobody can enter it) holding
/// ./probe, removed with everything in it afterwards. Skips without root.
class SandboxTest : public ::testing::Test {
  protected:
    void SetUp() override;
    void TearDown() override;

    /// Runs `corral ARGS` with the working directory as cwd. Checks that the run's cgroup is gone.
    RunOutcome corral(const std::vector<std::string>& args, const RunOptions& options = {});
    /// `corral run --policy POLICY [--timeout 60s] -- ./probe PROBE_ARGS...`, the suite's usual
    /// call.
    RunOutcome attack(const std::string& policy, const std::vector<std::string>& probe_args);

    /// The probe's path inside (and outside: the working directory is the same path in both).
    std::string probe() const { return (dir_ / "probe").string(); }
    const std::filesystem::path& dir() const { return dir_; }
    /// Creates a directory below the working directory that a `default` sandbox can write where
    /// the kernel cannot idmap the working directory (see SetUp); elsewhere as created.
    void make_job_dir(const std::filesystem::path& relative);

    std::filesystem::path dir_;
    std::string v2_own_;
    bool idmaps_ = true;  ///< the kernel can idmap dir_ (false: tmpfs before 6.3, 9p)
};

}  // namespace corral::security
