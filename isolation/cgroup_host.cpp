// Discovery of the host's cgroup layout from /proc/self/mountinfo and /proc/self/cgroup.
#include <set>
#include <sstream>

#include "base/file_io.hpp"
#include "isolation/cgroup.hpp"

namespace corral {
namespace {

/// One line of mountinfo, the fields discovery needs.
struct MountEntry {
    std::string root;         ///< the mounted subtree of the filesystem (4th field)
    std::string mount_point;  ///< 5th field, unescaped
    std::string fstype;       ///< first field after " - "
    std::set<std::string> super_options;
};

/// One line of /proc/self/cgroup: "id:controllers:path".
struct CgroupLine {
    std::string hierarchy_id;
    std::vector<std::string> controllers;  ///< empty for the v2 "0::" line
    std::string path;
};

std::vector<std::string> split(std::string_view text, char sep) {
    std::vector<std::string> out;
    size_t start = 0;
    for (;;) {
        size_t end = text.find(sep, start);
        out.emplace_back(text.substr(start, end - start));
        if (end == std::string_view::npos) return out;
        start = end + 1;
    }
}

/// mountinfo escapes space, tab, newline and backslash as \ooo (octal).
std::string unescape_octal(std::string_view in) {
    std::string out;
    for (size_t i = 0; i < in.size(); ++i) {
        bool escape = in[i] == '\\' && i + 4 <= in.size() &&
                      in.substr(i + 1, 3).find_first_not_of("01234567") == std::string_view::npos;
        if (escape) {
            out += static_cast<char>(std::stoi(std::string(in.substr(i + 1, 3)), nullptr, 8));
            i += 3;
        } else {
            out += in[i];
        }
    }
    return out;
}

std::optional<MountEntry> parse_mount_line(std::string_view line) {
    size_t dash = line.find(" - ");
    if (dash == std::string_view::npos) return std::nullopt;
    std::istringstream head{std::string(line.substr(0, dash))};
    std::string id, parent, devno, root, mount_point;
    if (!(head >> id >> parent >> devno >> root >> mount_point)) return std::nullopt;
    std::istringstream tail{std::string(line.substr(dash + 3))};
    std::string fstype, source, options;
    if (!(tail >> fstype >> source)) return std::nullopt;
    tail >> options;  // may be absent on odd lines
    MountEntry entry{unescape_octal(root), unescape_octal(mount_point), fstype, {}};
    for (auto& option : split(options, ',')) entry.super_options.insert(option);
    return entry;
}

std::vector<CgroupLine> parse_cgroup_lines(std::string_view text) {
    std::vector<CgroupLine> out;
    for (auto& line : split(text, '\n')) {
        if (line.empty()) continue;
        size_t first = line.find(':');
        size_t second = first == std::string::npos ? first : line.find(':', first + 1);
        if (second == std::string::npos) continue;
        CgroupLine entry{line.substr(0, first), {}, line.substr(second + 1)};
        std::string controllers = line.substr(first + 1, second - first - 1);
        if (!controllers.empty()) entry.controllers = split(controllers, ',');
        out.push_back(std::move(entry));
    }
    return out;
}

/// Where cgroup `path` (as /proc/self/cgroup names it) is in the filesystem under a mount of
/// subtree `root`. In a cgroup namespace, or when only a subtree is bind-mounted, the mount's
/// root is not "/" and our path has to be made relative to it; a path outside the mounted
/// subtree is not reachable through that mount at all.
std::optional<std::string> path_under_mount(const MountEntry& mount, const std::string& path) {
    if (mount.root == "/") return path == "/" ? mount.mount_point : mount.mount_point + path;
    if (path == mount.root) return mount.mount_point;
    if (path.size() > mount.root.size() && path.compare(0, mount.root.size(), mount.root) == 0 &&
        path[mount.root.size()] == '/')
        return mount.mount_point + path.substr(mount.root.size());
    return std::nullopt;
}

bool is_resource_controller(const std::string& name) {
    return name.rfind("name=", 0) != 0;
}

}  // namespace

std::map<std::string, uint64_t> parse_keyed_values(std::string_view text) {
    std::map<std::string, uint64_t> out;
    for (auto& line : split(text, '\n')) {
        size_t space = line.find(' ');
        if (space == std::string::npos) continue;
        std::string value = line.substr(space + 1);
        if (value.empty() || value.find_first_not_of("0123456789") != std::string::npos) continue;
        out[line.substr(0, space)] = std::stoull(value);
    }
    return out;
}

Result<CgroupHost> parse_cgroup_host(std::string_view mountinfo,
                                     std::string_view proc_self_cgroup) {
    std::vector<MountEntry> v2_mounts, v1_mounts;
    for (auto& line : split(mountinfo, '\n')) {
        auto entry = parse_mount_line(line);
        if (!entry) continue;
        if (entry->fstype == "cgroup2") v2_mounts.push_back(std::move(*entry));
        if (entry->fstype == "cgroup") v1_mounts.push_back(std::move(*entry));
    }
    CgroupHost host;
    bool have_v2_line = false;
    bool have_v1_controllers = false;
    for (const auto& line : parse_cgroup_lines(proc_self_cgroup)) {
        if (line.hierarchy_id == "0" && line.controllers.empty()) {
            have_v2_line = true;
            for (const auto& mount : v2_mounts) {
                if (auto dir = path_under_mount(mount, line.path)) {
                    host.v2_mount = mount.mount_point;
                    host.v2_own = *dir;
                    break;
                }
            }
            continue;
        }
        // A v1 hierarchy: the mount whose super options carry all of this line's controllers.
        for (const auto& mount : v1_mounts) {
            bool matches = !line.controllers.empty();
            for (const auto& controller : line.controllers)
                matches = matches && mount.super_options.count(controller) > 0;
            if (!matches) continue;
            auto dir = path_under_mount(mount, line.path);
            if (!dir) continue;
            for (const auto& controller : line.controllers) {
                host.v1_own[controller] = *dir;
                if (is_resource_controller(controller)) have_v1_controllers = true;
            }
            break;
        }
    }
    if (!have_v2_line) return plain_error("no cgroup v2 (\"0::\") line in /proc/self/cgroup");
    if (host.v2_own.empty())
        return plain_error("no cgroup2 mount in mountinfo that contains our cgroup");
    host.layout = have_v1_controllers ? CgroupLayout::hybrid : CgroupLayout::unified;
    return host;
}

Result<CgroupHost> discover_cgroup_host() {
    auto mountinfo = read_file("/proc/self/mountinfo");
    if (!mountinfo) return std::move(mountinfo.error().context("discover cgroups"));
    auto cgroups = read_file("/proc/self/cgroup");
    if (!cgroups) return std::move(cgroups.error().context("discover cgroups"));
    auto host = parse_cgroup_host(*mountinfo, *cgroups);
    if (!host) return std::move(host.error().context("discover cgroups"));
    auto controllers = read_file(host->v2_own + "/cgroup.controllers");
    if (!controllers) return std::move(controllers.error().context("discover cgroups"));
    std::istringstream words(*controllers);
    for (std::string word; words >> word;) host->v2_controllers.push_back(word);
    return host;
}

}  // namespace corral
