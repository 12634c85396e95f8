#pragma once
// A real corrald child process for tests that stress, crash and restart it: its own socket, state
// dir, cgroup instance and port range, started again with the same arguments after a kill -9.
// Besides starting and stopping, it counts what corral left on the host (processes in its cgroups,
// cgroups, v1 cgroups, mounts, session directories), and its destructor removes all of that —
// only through the instance cgroup and names this test's daemon created — even when a test
// failed half-way.

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/unique_fd.hpp"
#include "http_client.hpp"
#include "instance_leftovers.hpp"
#include "isolation/cgroup.hpp"
#include "tests/support/exec_logged.hpp"
#include "tests/support/temp_dir.hpp"

namespace corral::testing {

/// What corral has on the host for one instance.
struct CorralFootprint {
    size_t processes = 0;     ///< in the instance's session cgroups (holders included)
    size_t cgroups = 0;       ///< below <instance>/sessions
    size_t v1_cgroups = 0;    ///< corral-<instance>-* in the v1 hierarchies
    size_t mounts = 0;        ///< below the state dir
    size_t session_dirs = 0;  ///< <state>/sessions/*
    bool empty() const {
        return processes == 0 && cgroups == 0 && v1_cgroups == 0 && mounts == 0 &&
               session_dirs == 0;
    }
    std::string describe() const {
        return std::to_string(processes) + " processes, " + std::to_string(cgroups) + " cgroups, " +
               std::to_string(v1_cgroups) + " v1 cgroups, " + std::to_string(mounts) + " mounts, " +
               std::to_string(session_dirs) + " session dirs";
    }
};

/// A process's state letter in /proc/<pid>/stat ('S', 'T', 'Z', ...); 0 when there is none.
inline char process_state(pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    std::getline(in, line);
    const auto name_end = line.rfind(')');  // the name may hold anything, ')' included
    return name_end != std::string::npos && name_end + 2 < line.size() ? line[name_end + 2] : 0;
}

/// The children of every thread of `pid` (/proc/<pid>/task/*/children).
inline std::vector<pid_t> children_of(pid_t pid) {
    std::vector<pid_t> found;
    const std::string self = "/proc/" + std::to_string(pid);
    for (const auto& task : subdirectory_names(self + "/task")) {
        std::ifstream children(self + "/task/" + task + "/children");
        for (pid_t child; children >> child;) found.push_back(child);
    }
    return found;
}

/// Those of `pid`'s children whose name (/proc/<child>/comm) is `comm`.
inline std::vector<pid_t> children_named(pid_t pid, const std::string& comm) {
    std::vector<pid_t> found;
    for (pid_t child : children_of(pid)) {
        std::ifstream in("/proc/" + std::to_string(child) + "/comm");
        std::string name;
        if (std::getline(in, name) && name == comm) found.push_back(child);
    }
    return found;
}

/// Whether a CorraldProcess can run here (root, corrald built); if not, `why` says what is
/// missing, for the test's GTEST_SKIP.
inline bool corrald_can_run(std::string& why) {
    if (::geteuid() != 0) {
        why = "needs root (cgroups, namespaces)";
        return false;
    }
    if (!std::filesystem::exists(CORRAL_BINARY_DIR "/supervisor/corrald")) {
        why = "corrald is not built";
        return false;
    }
    return true;
}

/// Who starts corrald: the test, as its child in its process group; or a shell that ends, as
/// `corrald &` from a script or a terminal that is then closed: a process of a session of its own
/// forks corrald into a process group of its own and stays until end_starting_shell(). The test,
/// a child subreaper meanwhile, then inherits corrald (as init inherits a daemon whose shell
/// exited), and corrald's process group is an orphaned one (POSIX), which the kernel hangs up
/// (SIGHUP, SIGCONT) at that moment if any process in it is stopped.
enum class StartedBy { test, shell_that_ends };

class CorraldProcess {
  public:
    /// Prepares the directories and starts the daemon; check ready().
    explicit CorraldProcess(std::vector<std::string> extra_args = {},
                            StartedBy started_by = StartedBy::test)
        : started_by_(started_by) {
        static int counter = 0;
        dir_ = test_support::make_temp_dir("corral-robust-test");
        instance_ = "corral-robust-" + std::to_string(::getpid()) + "-" + std::to_string(++counter);
        const uint16_t first = static_cast<uint16_t>(61000 + (::getpid() % 100) * 40);
        args_ = {CORRAL_BINARY_DIR "/supervisor/corrald",
                 "--socket",
                 dir_ + "/corrald.sock",
                 "--state-dir",
                 dir_ + "/state",
                 "--instance",
                 instance_,
                 "--port-range",
                 std::to_string(first) + "-" + std::to_string(first + 39)};
        args_.insert(args_.end(), extra_args.begin(), extra_args.end());
        if (auto host = discover_cgroup_host()) host_ = *host;
        start();
    }
    ~CorraldProcess() {
        stop(std::chrono::seconds(30));  // ends the starting shell first
        clean_up();
    }
    CorraldProcess(const CorraldProcess&) = delete;
    CorraldProcess& operator=(const CorraldProcess&) = delete;

    /// Starts the daemon (again, with the same arguments); true once it answers. Its log goes
    /// to log(), each start's appended.
    bool start() {
        ready_ = false;
        end_starting_shell();  // a previous start's
        if (started_by_ == StartedBy::shell_that_ends) {
            if (!start_from_a_shell()) return false;
        } else {
            pid_ = ::fork();
            if (pid_ == 0) exec_corrald();
        }
        HttpClient probe = client();
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        while (std::chrono::steady_clock::now() < deadline) {
            if (probe.can_connect()) {
                learn_cgroup_base(probe);
                return ready_ = true;
            }
            int status = 0;
            if (::waitpid(pid_, &status, WNOHANG) == pid_) {
                pid_ = -1;
                exit_status_ = status;
                return false;
            }
            if (shell_ > 0 && ended_before_its_shell()) return false;
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        return false;
    }
    bool ready() const { return ready_; }
    /// StartedBy::shell_that_ends: the shell exits and is reaped; corrald is the test's child
    /// from then on. Does nothing otherwise, or a second time.
    void end_starting_shell() {
        if (shell_ > 0) {
            shell_release_ = UniqueFd();  // the shell reads end-of-file and exits
            ::waitpid(shell_, nullptr, 0);
            shell_ = -1;
        }
        // corrald is our child now; nothing else of it is to come back to us (were corrald hung
        // up, its zygote and holders would be reparented here and never reaped).
        if (subreaper_set_ && ::prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) == 0)
            subreaper_set_ = false;
    }
    /// The command line start() uses (tests that restart with other options change it).
    std::vector<std::string>& arguments() { return args_; }
    pid_t pid() const { return pid_; }

    /// kill -9, as a crash would; reaps it.
    void kill_hard() {
        end_starting_shell();  // corrald is ours to reap only once it is our child
        if (pid_ <= 0) return;
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &exit_status_, 0);
        pid_ = -1;
    }
    /// SIGTERM, then wait (SIGKILL after `bound`); returns the wait status.
    int stop(std::chrono::seconds bound) {
        end_starting_shell();
        if (pid_ <= 0) return exit_status_;
        ::kill(pid_, SIGTERM);
        const auto deadline = std::chrono::steady_clock::now() + bound;
        int status = 0;
        while (::waitpid(pid_, &status, WNOHANG) == 0) {
            if (std::chrono::steady_clock::now() > deadline) {
                ::kill(pid_, SIGKILL);
                ::waitpid(pid_, &status, 0);
                break;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        pid_ = -1;
        exit_status_ = status;
        return status;
    }

    HttpClient client() const { return HttpClient::unix_socket(socket_path()); }
    /// Where the daemon listens (for tests that speak raw HTTP on it).
    std::string socket_path() const { return dir_ + "/corrald.sock"; }
    std::string log() const {
        std::ifstream in(dir_ + "/corrald.log");
        return std::string(std::istreambuf_iterator<char>(in), {});
    }
    std::string state_dir() const { return dir_ + "/state"; }
    const std::string& instance() const { return instance_; }
    std::string instance_cgroup() const { return host_.v2_own + "/" + instance_; }

    /// What corral has on the host for this instance right now.
    CorralFootprint footprint() const {
        CorralFootprint count;
        const std::string sessions = instance_cgroup() + "/sessions";
        for (const auto& sid : subdirectory_names(sessions)) {
            count.cgroups += count_tree(sessions + "/" + sid, count.processes);
        }
        for (const auto& dir : v1_cgroups()) {
            (void)dir;
            ++count.v1_cgroups;
        }
        count.mounts = mounts_below(dir_).size();
        count.session_dirs = subdirectory_names(state_dir() + "/sessions").size();
        return count;
    }

    /// corrald's children (of any of its threads) that have exited and were not reaped: each
    /// one a process-table slot held for good. A snapshot: one that exits this moment shows
    /// until the loop reaps it.
    size_t zombie_children() const {
        size_t zombies = 0;
        for (pid_t child : children_of(pid_))
            if (process_state(child) == 'Z') ++zombies;
        return zombies;
    }

    /// corral-<instance>-* cgroups in the v1 hierarchies (full paths).
    std::vector<std::string> v1_cgroups() const { return instance_v1_cgroups(host_, instance_); }

  private:
    [[noreturn]] void exec_corrald() {
        test_support::exec_logged(args_, dir_ + "/corrald.log", test_support::LogOpen::append);
    }

    /// Whether corrald, still the starting shell's child (not ours to wait for), has ended: its
    /// pid gone or a zombie. The shell is ended then, so that corrald is reaped and its status kept.
    bool ended_before_its_shell() {
        if (const char state = process_state(pid_); state != 0 && state != 'Z') return false;
        end_starting_shell();  // corrald (a zombie or gone to the shell's reaping) comes to us
        ::waitpid(pid_, &exit_status_, WNOHANG);
        pid_ = -1;
        return true;
    }

    /// StartedBy::shell_that_ends: the shell (a session leader) forks corrald into a process
    /// group of its own, says its pid, and waits for end_starting_shell().
    bool start_from_a_shell() {
        if (!subreaper_set_) {
            if (::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) return false;
            subreaper_set_ = true;
        }
        int said[2], release[2];
        if (::pipe2(said, O_CLOEXEC) != 0) return false;
        UniqueFd said_read(said[0]), said_write(said[1]);
        if (::pipe2(release, O_CLOEXEC) != 0) return false;
        UniqueFd release_read(release[0]);
        shell_release_ = UniqueFd(release[1]);
        shell_ = ::fork();
        if (shell_ < 0) return false;
        if (shell_ == 0) {
            shell_release_ = UniqueFd();
            ::setsid();
            const pid_t corrald = ::fork();
            if (corrald == 0) {
                ::setpgid(0, 0);  // a job of its own, as a shell with job control starts one
                exec_corrald();
            }
            (void)!::write(said_write.get(), &corrald, sizeof corrald);
            char ignored;
            while (::read(release_read.get(), &ignored, 1) < 0 && errno == EINTR) {
            }
            ::_exit(0);
        }
        said_write = UniqueFd();
        release_read = UniqueFd();
        pid_t corrald = -1;
        if (::read(said_read.get(), &corrald, sizeof corrald) != sizeof corrald || corrald <= 0) {
            end_starting_shell();
            return false;
        }
        pid_ = corrald;
        return true;
    }

    /// Cgroups in the tree at `dir` (itself included); adds its processes to `processes`.
    static size_t count_tree(const std::string& dir, size_t& processes) {
        std::ifstream procs(dir + "/cgroup.procs");
        for (pid_t pid; procs >> pid;) ++processes;
        size_t cgroups = 1;
        for (const auto& child : subdirectory_names(dir))
            cgroups += count_tree(dir + "/" + child, processes);
        return cgroups;
    }

    static std::vector<std::string> mounts_below(const std::string& dir) {
        std::vector<std::string> found;
        std::ifstream mountinfo("/proc/self/mountinfo");
        for (std::string line; std::getline(mountinfo, line);) {
            std::istringstream fields(line);
            std::string id, parent, device, root, point;
            fields >> id >> parent >> device >> root >> point;
            if (point.rfind(dir + "/", 0) == 0) found.push_back(point);
        }
        std::sort(found.begin(), found.end(),
                  [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
        return found;
    }

    /// Where corrald built its instance is its own decision (isolation/cgroup_placement.hpp):
    /// beneath this test's cgroup where it may, else at the cgroup2 mount's root (cgroupfs-root,
    /// e.g. from a login shell's scope on a pure v2 host without systemd) or in a scope systemd
    /// gave it. /v1/health says where its sessions live, so the footprint and the clean-up look
    /// there and not at a guess that would find nothing.
    void learn_cgroup_base(HttpClient& probe) {
        const auto health = probe.get("/v1/health");
        if (health.status != 200) return;
        const auto body = health.json();
        const auto cgroup = body.find("cgroup");
        if (cgroup == body.end() || !cgroup->contains("sessions") ||
            !(*cgroup)["sessions"].is_string())
            return;
        const std::string sessions = (*cgroup)["sessions"];
        const std::string tail = "/" + instance_ + "/sessions";
        if (sessions.size() > tail.size() &&
            sessions.compare(sessions.size() - tail.size(), tail.size(), tail) == 0)
            host_.v2_own = sessions.substr(0, sessions.size() - tail.size());
    }

    /// Whatever a failed test (or a daemon that crashed) left: the instance cgroup this test's
    /// daemon made is killed and removed, so are its v1 cgroups and mounts, then the temp dir.
    void clean_up() {
        remove_instance_leftovers(host_, instance_);
        for (const auto& point : mounts_below(dir_)) ::umount2(point.c_str(), MNT_DETACH);
        std::error_code ignored;
        std::filesystem::remove_all(dir_, ignored);
    }

    std::string dir_;
    std::string instance_;
    std::vector<std::string> args_;
    CgroupHost host_;
    pid_t pid_ = -1;
    int exit_status_ = -1;
    bool ready_ = false;
    StartedBy started_by_ = StartedBy::test;
    pid_t shell_ = -1;          ///< StartedBy::shell_that_ends, until end_starting_shell()
    UniqueFd shell_release_;    ///< closing it ends the shell
    bool subreaper_set_ = false;
};

}  // namespace corral::testing
