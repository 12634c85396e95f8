#include "sandbox_harness.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <sstream>
#include <thread>

#include "isolation/cgroup.hpp"
#include "isolation/sandbox.hpp"

namespace corral::security {

namespace fs = std::filesystem;

namespace {

std::string drain(int fd) {
    std::string text;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
    ::close(fd);
    return text;
}

std::string cmdline_of(const std::string& pid) {
    std::ifstream in("/proc/" + pid + "/cmdline");
    std::string text((std::istreambuf_iterator<char>(in)), {});
    for (char& c : text)
        if (c == '\0') c = ' ';
    return text;
}

}  // namespace

std::map<std::string, std::string> answers(const std::string& probe_output) {
    std::map<std::string, std::string> result;
    std::istringstream lines(probe_output);
    for (std::string line; std::getline(lines, line);) {
        auto space = line.rfind(' ');
        if (space == std::string::npos) continue;
        result[line.substr(0, space)] = line.substr(space + 1);
    }
    return result;
}

bool process_exists(pid_t pid) {
    return ::kill(pid, 0) == 0 || errno != ESRCH;
}

std::vector<pid_t> processes_with_token(const std::string& token) {
    std::vector<pid_t> found;
    DIR* proc = ::opendir("/proc");
    if (!proc) return found;
    while (dirent* e = ::readdir(proc)) {
        std::string name = e->d_name;
        if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
        pid_t pid = std::stoi(name);
        if (pid == ::getpid()) continue;
        if (cmdline_of(name).find(token) != std::string::npos) found.push_back(pid);
    }
    ::closedir(proc);
    return found;
}

size_t kill_processes_with_token(const std::string& token) {
    auto pids = processes_with_token(token);
    for (pid_t pid : pids) ::kill(pid, SIGKILL);
    return pids.size();
}

std::string unique_token() {
    static std::atomic<int> counter{0};
    return "corral-escape-" + std::to_string(::getpid()) + "-" + std::to_string(++counter);
}

HostProcess::HostProcess() {
    pid_ = ::fork();
    if (pid_ == 0) {
        int null = ::open("/dev/null", O_RDWR);
        ::dup2(null, 0);
        ::dup2(null, 1);
        ::execl("/bin/sleep", "sleep", "1000", static_cast<char*>(nullptr));
        ::_exit(127);
    }
}

HostProcess::~HostProcess() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
}

bool HostProcess::alive() const {
    int status = 0;
    return pid_ > 0 && ::waitpid(pid_, &status, WNOHANG) == 0;
}

void SandboxTest::SetUp() {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (cgroups and namespaces)";
    char tmpl[] = "/tmp/corral-escape-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ::chmod(dir_.c_str(), 0755);
    // Where the kernel cannot idmap this file system (tmpfs before 6.3, 9p: the pure-v2 VM's
    // Debian 6.1), a `default` sandbox reaches its bound or copied job directory as its own
    // unprivileged range (README "Identity"), so the directory must let any user write, as a CI
    // checkout shared with an unprivileged job user would; else the attacks could not even plant
    // their links. Idmapping hosts keep 0755.
    idmaps_ = static_cast<bool>(corral::probe_idmapped_mount(dir_.string()));
    if (!idmaps_) ::chmod(dir_.c_str(), 0777);
    fs::copy_file(CORRAL_ESCAPE_PROBE, dir_ / "probe");
    ::chmod((dir_ / "probe").c_str(), 0755);
    auto host = corral::discover_cgroup_host();
    ASSERT_TRUE(host) << host.error().describe();
    v2_own_ = host->v2_own;
}

void SandboxTest::make_job_dir(const fs::path& relative) {
    fs::create_directories(dir_ / relative);
    if (idmaps_) return;
    for (fs::path p = relative; !p.empty(); p = p.parent_path())
        ASSERT_EQ(::chmod((dir_ / p).c_str(), 0777), 0);
}

void SandboxTest::TearDown() {
    std::error_code ignored;
    if (!dir_.empty()) fs::remove_all(dir_, ignored);
}

RunOutcome SandboxTest::corral(const std::vector<std::string>& args, const RunOptions& options) {
    const std::string binary = options.corral_binary.empty()
                                   ? std::string(CORRAL_BINARY_DIR) + "/supervisor/corral"
                                   : options.corral_binary;
    int out[2], err[2];
    EXPECT_EQ(::pipe2(out, O_CLOEXEC), 0);
    EXPECT_EQ(::pipe2(err, O_CLOEXEC), 0);
    pid_t pid = ::fork();
    if (pid == 0) {
        int in = options.stdin_fd >= 0 ? options.stdin_fd : ::open("/dev/null", O_RDONLY);
        ::dup2(in, 0);
        ::dup2(out[1], 1);
        ::dup2(err[1], 2);
        if (::chdir(dir_.c_str()) != 0) ::_exit(99);
        if (options.in_child) options.in_child();
        std::vector<char*> argv{const_cast<char*>(binary.c_str())};
        for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
        argv.push_back(nullptr);
        ::execv(binary.c_str(), argv.data());
        ::_exit(98);
    }
    ::close(out[1]);
    ::close(err[1]);
    if (options.on_start) options.on_start(pid);
    RunOutcome result;
    result.corral_pid = pid;
    std::thread err_reader([&] { result.err = drain(err[0]); });
    result.out = drain(out[0]);
    err_reader.join();
    int status = 0;
    ::waitpid(pid, &status, 0);
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    EXPECT_FALSE(fs::exists(v2_own_ + "/corral-run-" + std::to_string(pid)))
        << "corral left its cgroup behind";
    return result;
}

RunOutcome SandboxTest::attack(const std::string& policy,
                               const std::vector<std::string>& probe_args) {
    std::vector<std::string> args = {"run", "--policy", policy, "--timeout", "60s", "--", probe()};
    args.insert(args.end(), probe_args.begin(), probe_args.end());
    return corral(args);
}

}  // namespace corral::security
