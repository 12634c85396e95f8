// See cgroup_tree.hpp.
#include "tests/bench/cgroup_tree.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <sstream>

#include "tests/bench/bench_report.hpp"

namespace corral::bench {
namespace {

std::string slurp(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

bool write_text(const std::string& path, const std::string& text) {
    int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return false;
    bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    ::close(fd);
    return ok;
}

/// Mount points by filesystem: "cgroup2" -> path, and for v1 each controller name -> path.
std::map<std::string, std::string> cgroup_mounts() {
    std::map<std::string, std::string> mounts;
    std::istringstream lines(slurp("/proc/self/mountinfo"));
    for (std::string line; std::getline(lines, line);) {
        std::istringstream f(line);
        std::vector<std::string> fields;
        for (std::string w; f >> w;) fields.push_back(w);
        size_t dash = 0;
        while (dash < fields.size() && fields[dash] != "-") ++dash;
        if (dash + 3 >= fields.size() + 1 || fields.size() < 5) continue;
        const std::string& fstype = fields[dash + 1];
        if (fstype == "cgroup2") mounts["cgroup2"] = fields[4];
        if (fstype != "cgroup" || dash + 3 >= fields.size()) continue;
        std::istringstream opts(fields[dash + 3]);
        for (std::string o; std::getline(opts, o, ',');) mounts[o] = fields[4];
    }
    return mounts;
}

/// Controller list ("" for v2) -> our path in that hierarchy, from /proc/self/cgroup.
std::map<std::string, std::string> own_paths() {
    std::map<std::string, std::string> paths;
    std::istringstream lines(slurp("/proc/self/cgroup"));
    for (std::string line; std::getline(lines, line);) {
        auto a = line.find(':'), b = line.find(':', a + 1);
        if (a == std::string::npos || b == std::string::npos) continue;
        paths[line.substr(a + 1, b - a - 1)] = line.substr(b + 1);
    }
    return paths;
}

std::vector<std::string> subdirs(const std::string& dir) {
    std::vector<std::string> out;
    if (DIR* d = ::opendir(dir.c_str())) {
        while (dirent* e = ::readdir(d))
            if (e->d_type == DT_DIR && e->d_name[0] != '.') out.push_back(e->d_name);
        ::closedir(d);
    }
    return out;
}

void rmdir_bottom_up(const std::string& dir) {
    for (const auto& sub : subdirs(dir)) rmdir_bottom_up(dir + "/" + sub);
    ::rmdir(dir.c_str());
}

}  // namespace

std::string process_tree_script(int pairs) {
    return "i=0; while [ $i -lt " + std::to_string(pairs) +
           " ]; do sleep 3600 & setsid sh -c 'sleep 3600 &'; i=$((i+1)); done; wait";
}

std::string own_v2_cgroup() {
    auto mounts = cgroup_mounts();
    auto paths = own_paths();
    if (!mounts.count("cgroup2") || !paths.count("")) return "";
    std::string own = paths[""];
    return own == "/" ? mounts["cgroup2"] : mounts["cgroup2"] + own;
}

int count_procs_recursive(const std::string& dir) {
    std::istringstream procs(slurp(dir + "/cgroup.procs"));
    int n = 0;
    for (std::string line; std::getline(procs, line);) n += !line.empty();
    for (const auto& sub : subdirs(dir)) n += count_procs_recursive(dir + "/" + sub);
    return n;
}

bool wait_for_stable_procs(const std::string& dir, int want) {
    int stable = 0;
    for (int i = 0; i < 1200; ++i) {
        stable = count_procs_recursive(dir) == want ? stable + 1 : 0;
        if (stable == 3) return true;
        ::usleep(50000);
    }
    return false;
}

double kill_and_wait_empty(const std::string& dir, int timeout_ms) {
    int events = ::open((dir + "/cgroup.events").c_str(), O_RDONLY | O_CLOEXEC);
    if (events < 0) return -1;
    auto populated = [&] {
        char buf[256];
        ssize_t n = ::pread(events, buf, sizeof buf - 1, 0);
        if (n <= 0) return true;
        buf[n] = 0;
        return std::string(buf).find("populated 1") != std::string::npos;
    };
    double start = now_ms();
    if (!write_text(dir + "/cgroup.kill", "1")) {
        ::close(events);
        return -1;
    }
    // kernfs wakes pollers of cgroup.events with POLLPRI when it changes; re-read after each wake.
    while (populated()) {
        double left = timeout_ms - (now_ms() - start);
        if (left <= 0) {
            ::close(events);
            return -1;
        }
        pollfd p{events, POLLPRI, 0};
        ::poll(&p, 1, static_cast<int>(left));
    }
    double elapsed = now_ms() - start;
    ::close(events);
    return elapsed;
}

void remove_cgroup_tree(const std::string& dir) {
    struct stat st;
    if (dir.empty() || ::stat(dir.c_str(), &st) != 0) return;
    if (count_procs_recursive(dir) > 0) kill_and_wait_empty(dir, 10000);
    rmdir_bottom_up(dir);
}

void remove_instance(const std::string& name) {
    if (name.empty() || name.find('/') != std::string::npos) return;
    std::string v2 = own_v2_cgroup();
    if (!v2.empty()) remove_cgroup_tree(v2 + "/" + name);
    auto mounts = cgroup_mounts();
    for (const auto& [controllers, path] : own_paths()) {
        if (controllers.empty()) continue;
        std::string first = controllers.substr(0, controllers.find(','));
        if (!mounts.count(first)) continue;
        std::string base = mounts[first] + (path == "/" ? "" : path);
        for (const auto& sub : subdirs(base))
            if (sub.rfind("corral-" + name + "-", 0) == 0) rmdir_bottom_up(base + "/" + sub);
    }
}

}  // namespace corral::bench
