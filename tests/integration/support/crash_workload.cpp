#include "crash_workload.hpp"

#include <dirent.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "http_client.hpp"
#include "isolation/pid_ref.hpp"
#include "instance_leftovers.hpp"

namespace corral::testing {

const char* const kCrashPolicies[3] = {
    "name: crash-a\nextends: default\nworkdir: { size: 16Mi }\nlimits: { pids: 64 }\n",
    "name: crash-b\nextends: none\nlimits: { memory: 256Mi }\n",
    "name: crash-c\nextends: none\nworkdir: { size: 8Mi }\n",
};

void crash_workload(CorraldProcess& daemon, size_t worker, size_t round, CrashLedger& ledger) {
    HttpClient c = daemon.client();
    for (size_t n = 0;; ++n) {
        const std::string id =
            "r" + std::to_string(round) + "-w" + std::to_string(worker) + "-" + std::to_string(n);
        auto created = c.post("/v1/sessions", {{"id", id}, {"policyYaml", kCrashPolicies[n % 3]}});
        if (created.status != 201) throw std::runtime_error("create: " + created.body);
        {
            std::lock_guard lock(ledger.mutex);
            ledger.ids.push_back(id);
            ledger.tokens[id] = created.json()["token"];
        }
        const std::string s = "/v1/sessions/" + id;
        c.post(s + "/processes", {{"command", "sleep 600 & sleep 600"}});
        c.post(s + "/run", {{"argv", {"/bin/true"}}});
        c.request("PUT", s + "/files?path=upload.bin", std::string(64 << 10, 'x'));
        if (n % 2 == 0) {
            {
                std::lock_guard lock(ledger.mutex);
                ledger.deleting.insert(id);
            }
            c.del(s);
        }
    }
}

namespace {

bool cgroup_populated(const std::string& dir) {
    std::ifstream events(dir + "/cgroup.events");
    std::string key;
    int value = 0;
    while (events >> key >> value)
        if (key == "populated") return value == 1;
    return false;
}

/// Whether every process in `dir` shares all its namespaces with this test: a keeper.
bool holds_only_keepers(const std::string& dir) {
    std::ifstream procs(dir + "/cgroup.procs");
    for (pid_t pid; procs >> pid;) {
        for (const char* ns : {"pid", "mnt", "user", "net", "uts", "ipc"}) {
            std::error_code error;
            const auto theirs = std::filesystem::read_symlink(
                "/proc/" + std::to_string(pid) + "/ns/" + ns, error);
            if (error) continue;  // gone meanwhile
            if (theirs != std::filesystem::read_symlink(std::string("/proc/self/ns/") + ns))
                return false;
        }
    }
    return true;
}

}  // namespace

std::set<std::string> populated_sessions(const CorraldProcess& daemon) {
    std::set<std::string> found;
    const std::string sessions = daemon.instance_cgroup() + "/sessions";
    for (const auto& sid : subdirectory_names(sessions)) {
        const std::string dir = sessions + "/" + sid;
        if (!cgroup_populated(dir)) continue;
        bool beyond_keeper = false;
        for (const auto& leaf : subdirectory_names(dir))
            beyond_keeper = beyond_keeper || (cgroup_populated(dir + "/" + leaf) &&
                                              (leaf != "holder" || !holds_only_keepers(dir + "/" + leaf)));
        if (beyond_keeper) found.insert(sid);
    }
    return found;
}

namespace {

/// Mount points below `dir` (from /proc/self/mountinfo).
std::vector<std::string> mount_points_below(const std::string& dir) {
    std::vector<std::string> found;
    std::ifstream mountinfo("/proc/self/mountinfo");
    for (std::string line; std::getline(mountinfo, line);) {
        std::istringstream fields(line);
        std::string id, parent, device, root, point;
        fields >> id >> parent >> device >> root >> point;
        if (point.rfind(dir + "/", 0) == 0) found.push_back(point);
    }
    return found;
}

}  // namespace

std::vector<std::string> unowned(const CorraldProcess& daemon,
                                 const std::set<std::string>& owners) {
    std::vector<std::string> stray;
    for (const auto& sid : subdirectory_names(daemon.instance_cgroup() + "/sessions"))
        if (!owners.count(sid)) stray.push_back("cgroup " + sid);
    const std::string sessions_dir = daemon.state_dir() + "/sessions";
    for (const auto& sid : subdirectory_names(sessions_dir))
        if (!owners.count(sid)) stray.push_back("directory " + sid);
    const std::string prefix = "corral-" + daemon.instance() + "-";
    for (const auto& path : daemon.v1_cgroups()) {
        const std::string name = std::filesystem::path(path).filename();
        if (!owners.count(name.substr(prefix.size()))) stray.push_back("v1 cgroup " + path);
    }
    for (const auto& point : mount_points_below(daemon.state_dir())) {
        // Ours are <state>/sessions/<sid>/...; anything else below the state dir is no one's.
        const std::string rest = point.rfind(sessions_dir + "/", 0) == 0
                                     ? point.substr(sessions_dir.size() + 1)
                                     : std::string();
        const std::string sid = rest.substr(0, rest.find('/'));
        if (sid.empty() || !owners.count(sid)) stray.push_back("mount " + point);
    }
    return stray;
}

bool is_launch_zygote_of(pid_t pid, pid_t daemon) {
    std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
    std::string name;
    if (!std::getline(comm, name) || name != "corrald-launch") return false;
    // A command the zygote started has its name and parent until it execs: only the one in the
    // daemon's own cgroup is the zygote.
    auto cgroup_of = [](pid_t p) {
        std::ifstream in("/proc/" + std::to_string(p) + "/cgroup");
        return std::string(std::istreambuf_iterator<char>(in), {});
    };
    if (cgroup_of(pid) != cgroup_of(daemon)) return false;
    auto parent = process_stat_field(pid, 4);  // ppid
    return parent && static_cast<pid_t>(*parent) == daemon;
}

std::vector<InstanceProcess> instance_processes(const CorraldProcess& daemon) {
    std::vector<InstanceProcess> found;
    const std::string v2_mark = "/" + daemon.instance() + "/";
    const std::string v2_sessions = v2_mark + "sessions/";
    const std::string v1_mark = "corral-" + daemon.instance() + "-";
    DIR* proc = ::opendir("/proc");
    if (proc == nullptr) return found;
    while (dirent* entry = ::readdir(proc)) {
        char* end = nullptr;
        const long pid = std::strtol(entry->d_name, &end, 10);
        if (pid <= 0 || *end != '\0' || pid == daemon.pid()) continue;
        if (is_launch_zygote_of(static_cast<pid_t>(pid), daemon.pid())) continue;  // the daemon's
        std::ifstream cgroups(std::string("/proc/") + entry->d_name + "/cgroup");
        InstanceProcess process;
        bool ours = false;
        for (std::string line; std::getline(cgroups, line);) {
            const std::string path = line.substr(line.find(':', line.find(':') + 1) + 1);
            if (const size_t at = (path + "/").find(v2_mark); at != std::string::npos) {
                ours = true;
                process.where = path.substr(at + 1);
                if (const size_t s = path.find(v2_sessions); s != std::string::npos) {
                    const std::string rest = path.substr(s + v2_sessions.size());
                    process.session = rest.substr(0, rest.find('/'));
                }
            } else if (const size_t at = path.find(v1_mark); at != std::string::npos) {
                ours = true;
                if (process.where.empty()) process.where = path;
                if (process.session.empty()) {
                    const std::string rest = path.substr(at + v1_mark.size());
                    process.session = rest.substr(0, rest.find('/'));
                }
            }
        }
        if (!ours) continue;
        process.pid = static_cast<pid_t>(pid);
        std::ifstream stat(std::string("/proc/") + entry->d_name + "/stat");
        std::string line;
        std::getline(stat, line);
        const size_t close = line.rfind(')');
        process.zombie = close != std::string::npos && close + 2 < line.size() &&
                         (line[close + 2] == 'Z' || line[close + 2] == 'X');
        found.push_back(std::move(process));
    }
    ::closedir(proc);
    return found;
}

std::vector<InstanceProcess> orphaned_processes(const CorraldProcess& daemon,
                                                const std::set<std::string>& owners,
                                                std::chrono::milliseconds zombie_bound) {
    const auto deadline = std::chrono::steady_clock::now() + zombie_bound;
    for (;;) {
        std::vector<InstanceProcess> orphans;
        bool zombies = false;
        for (auto& process : instance_processes(daemon)) {
            if (!process.session.empty() && owners.count(process.session)) continue;
            // A zombie, or a process whose cgroup is gone ("(deleted)": it left it in its exit,
            // e.g. a pid namespace's init waiting for its namespace to be reaped), is on its way out.
            zombies = zombies || process.zombie ||
                      process.where.find("(deleted)") != std::string::npos;
            orphans.push_back(std::move(process));
        }
        if (!zombies || std::chrono::steady_clock::now() >= deadline) return orphans;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
}

}  // namespace corral::testing
