#include "instance_leftovers.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

namespace corral::testing {
namespace {

void remove_tree(const std::string& dir) {
    for (const auto& child : subdirectory_names(dir)) remove_tree(dir + "/" + child);
    for (int i = 0; i < 100 && ::rmdir(dir.c_str()) != 0 && errno == EBUSY; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

// v1 has no cgroup.kill: every pid of the tree gets SIGKILL.
void kill_tree_v1(const std::string& dir) {
    for (const auto& child : subdirectory_names(dir)) kill_tree_v1(dir + "/" + child);
    std::ifstream procs(dir + "/cgroup.procs");
    for (pid_t pid; procs >> pid;) ::kill(pid, SIGKILL);
}

bool populated(const std::string& cgroup) {
    std::ifstream events(cgroup + "/cgroup.events");
    std::string key;
    int value = 0;
    while (events >> key >> value)
        if (key == "populated") return value != 0;
    return false;
}

// v2: cgroup.kill on the tree (a cgroup our tests made), waiting for populated 0, then removal.
void kill_and_remove_v2(const std::string& dir) {
    std::ofstream(dir + "/cgroup.kill") << "1";
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (populated(dir) && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    remove_tree(dir);
}

/// <pid> of a "corral-test-<pid>-..." name (v1 names carry corral's "corral-" before it).
std::optional<pid_t> test_process_of(const std::string& name) {
    std::string rest = name;
    if (rest.rfind("corral-corral-test-", 0) == 0) rest = rest.substr(7);
    const std::string prefix = "corral-test-";
    if (rest.rfind(prefix, 0) != 0) return std::nullopt;
    rest = rest.substr(prefix.size());
    const size_t dash = rest.find('-');
    if (dash == 0 || dash == std::string::npos ||
        rest.find_first_not_of("0123456789") != dash)
        return std::nullopt;
    return static_cast<pid_t>(std::stol(rest.substr(0, dash)));
}

bool left_by_a_process_that_is_gone(pid_t pid) {
    return pid == ::getpid() || (::kill(pid, 0) != 0 && errno == ESRCH);
}

}  // namespace

void sweep_stale_test_instances(const CgroupHost& host) {
    if (!host.v2_own.empty())
        for (const auto& name : subdirectory_names(host.v2_own))
            if (auto pid = test_process_of(name); pid && left_by_a_process_that_is_gone(*pid))
                kill_and_remove_v2(host.v2_own + "/" + name);
    std::vector<std::string> seen;
    for (const auto& [controller, dir] : host.v1_own) {
        if (std::find(seen.begin(), seen.end(), dir) != seen.end()) continue;
        seen.push_back(dir);
        for (const auto& name : subdirectory_names(dir))
            if (auto pid = test_process_of(name); pid && left_by_a_process_that_is_gone(*pid)) {
                kill_tree_v1(dir + "/" + name);
                remove_tree(dir + "/" + name);
            }
    }
}

std::vector<std::string> instance_v1_cgroups(const CgroupHost& host, const std::string& instance) {
    std::vector<std::string> found;
    const std::string prefix = "corral-" + instance + "-";
    std::vector<std::string> seen;
    for (const auto& [controller, dir] : host.v1_own) {
        if (std::find(seen.begin(), seen.end(), dir) != seen.end()) continue;
        seen.push_back(dir);
        for (const auto& name : subdirectory_names(dir))
            if (name.rfind(prefix, 0) == 0) found.push_back(dir + "/" + name);
    }
    return found;
}

void remove_instance_leftovers(const CgroupHost& host, const std::string& instance) {
    if (instance.empty()) return;
    const std::string v2 = host.v2_own + "/" + instance;
    if (!host.v2_own.empty() && std::filesystem::exists(v2)) kill_and_remove_v2(v2);
    for (const auto& dir : instance_v1_cgroups(host, instance)) {
        kill_tree_v1(dir);
        remove_tree(dir);
    }
}

void remove_instance_leftovers(const std::string& instance) {
    if (auto host = discover_cgroup_host()) remove_instance_leftovers(*host, instance);
}

}  // namespace corral::testing
