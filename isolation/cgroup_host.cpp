// Discovery of the host's cgroup layout from /proc/self/mountinfo and /proc/self/cgroup.
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <optional>
#include <sstream>
#include <string_view>

#include "base/file_io.hpp"
#include "isolation/cgroup.hpp"

namespace corral {
namespace {

/// One line of mountinfo, the fields discovery needs.
struct MountEntry {
    std::string root;         ///< the mounted subtree of the filesystem (4th field)
    std::string mount_point;  ///< 5th field, unescaped
    std::string fstype;       ///< first field after " - "
    std::string super_options;  ///< comma-separated, as mountinfo has them

    bool has_super_option(std::string_view name) const {
        std::string_view rest = super_options;
        for (;;) {
            const size_t comma = rest.find(',');
            if (rest.substr(0, comma) == name) return true;
            if (comma == std::string_view::npos) return false;
            rest.remove_prefix(comma + 1);
        }
    }
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
            const int code = (in[i + 1] - '0') * 64 + (in[i + 2] - '0') * 8 + (in[i + 3] - '0');
            out += static_cast<char>(code);
            i += 3;
        } else {
            out += in[i];
        }
    }
    return out;
}

/// Takes the next space-separated field off the front of `text` (runs of spaces are one
/// separator); empty when none is left.
std::string_view next_field(std::string_view& text) {
    const size_t start = text.find_first_not_of(' ');
    if (start == std::string_view::npos) {
        text = {};
        return {};
    }
    text.remove_prefix(start);
    const size_t end = text.find(' ');
    std::string_view field = text.substr(0, end);
    text.remove_prefix(end == std::string_view::npos ? text.size() : end);
    return field;
}

bool is_cgroup_fstype(std::string_view fstype) { return fstype == "cgroup" || fstype == "cgroup2"; }

/// A mountinfo line of a cgroup or cgroup2 mount; nullopt for every other line (most of them,
/// skipped without copying: `corral run` reads mountinfo on every launch, issue 18).
std::optional<MountEntry> parse_cgroup_mount_line(std::string_view line) {
    const size_t dash = line.find(" - ");
    if (dash == std::string_view::npos) return std::nullopt;
    std::string_view tail = line.substr(dash + 3);
    const std::string_view fstype = next_field(tail);
    if (!is_cgroup_fstype(fstype)) return std::nullopt;
    if (next_field(tail).empty()) return std::nullopt;  // the source
    const std::string_view options = next_field(tail);  // may be absent on odd lines
    std::string_view head = line.substr(0, dash);
    std::string_view fields[5];
    for (auto& field : fields)
        if ((field = next_field(head)).empty()) return std::nullopt;
    return MountEntry{unescape_octal(fields[3]), unescape_octal(fields[4]), std::string(fstype),
                      std::string(options)};
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

/// Where cgroup `path` (as /proc/self/cgroup names it) is under `mount_point`, a mount of its
/// hierarchy's root.
std::string below_root_mount(const std::string& mount_point, const std::string& path) {
    return path == "/" ? mount_point : mount_point + path;
}

/// Where cgroup `path` (as /proc/self/cgroup names it) is in the filesystem under a mount of
/// subtree `root`. In a cgroup namespace, or when only a subtree is bind-mounted, the mount's
/// root is not "/" and our path has to be made relative to it; a path outside the mounted
/// subtree is not reachable through that mount at all.
std::optional<std::string> path_under_mount(const MountEntry& mount, const std::string& path) {
    if (mount.root == "/") return below_root_mount(mount.mount_point, path);
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
    for (std::string_view rest = mountinfo; !rest.empty();) {
        const size_t end = rest.find('\n');
        auto entry = parse_cgroup_mount_line(rest.substr(0, end));
        rest.remove_prefix(end == std::string_view::npos ? rest.size() : end + 1);
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
                matches = matches && mount.has_super_option(controller);
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

namespace {

/// The initial cgroup namespace's inode number (include/linux/proc_ns.h, PROC_CGROUP_INIT_INO).
constexpr ino_t kInitialCgroupNamespace = 0xEFFFFFFBU;

bool on_filesystem(const std::string& dir, long magic) {
    struct statfs fs {};
    return ::statfs(dir.c_str(), &fs) == 0 && fs.f_type == magic;
}

bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

/// The directory systemd mounts a v1 hierarchy on: its controllers as /proc/self/cgroup lists
/// them ("cpu,cpuacct"), a named one by its name ("name=systemd" -> "systemd").
std::string usual_v1_mount(const std::vector<std::string>& controllers) {
    std::string dir = "/sys/fs/cgroup/";
    for (size_t i = 0; i < controllers.size(); ++i) {
        const std::string& c = controllers[i];
        dir += (i ? "," : "") + (c.rfind("name=", 0) == 0 ? c.substr(5) : c);
    }
    return dir;
}

}  // namespace

bool is_real_root_cgroup(const std::string& dir) {
    return ::access((dir + "/cgroup.procs").c_str(), F_OK) == 0 &&
           ::access((dir + "/cgroup.type").c_str(), F_OK) != 0 && errno == ENOENT;
}

Result<std::vector<std::string>> read_cgroup_controllers(const std::string& dir) {
    auto text = read_file(dir + "/cgroup.controllers");
    if (!text) return std::move(text.error());
    std::vector<std::string> out;
    std::istringstream words(*text);
    for (std::string word; words >> word;) out.push_back(word);
    return out;
}

// Where everything is where systemd (and most container runtimes) put it, each place checked:
// the initial cgroup namespace (so /proc/self/cgroup's paths start at the real root), cgroup2 at
// /sys/fs/cgroup (unified) or /sys/fs/cgroup/unified (hybrid) with the real root cgroup at its
// top (no cgroup.type: a bind mount of a subtree has one), each v1 hierarchy at its usual
// directory, a v1 filesystem with the root-only cgroup.sane_behavior at its top (unless the
// caller skips the v1 hierarchies: two checks each, see V1Hierarchies). Anything else, and the
// caller reads mountinfo. Why: mountinfo costs a fresh `corral run` ~45 us to generate
// and more to parse, on every launch (issue 18); these checks ~2 us each.
std::optional<CgroupHost> discover_cgroup_host_at_usual_mounts(std::string_view proc_self_cgroup,
                                                                V1Hierarchies v1) {
    struct stat ns {};
    if (::stat("/proc/self/ns/cgroup", &ns) != 0 || ns.st_ino != kInitialCgroupNamespace)
        return std::nullopt;
    CgroupHost host;
    const auto lines = parse_cgroup_lines(proc_self_cgroup);
    bool have_v1_controllers = false;
    for (const auto& line : lines)
        for (const auto& controller : line.controllers)
            have_v1_controllers = have_v1_controllers || is_resource_controller(controller);
    for (const auto& line : lines) {
        if (line.path.empty() || line.path[0] != '/') return std::nullopt;
        if (line.hierarchy_id == "0" && line.controllers.empty()) {
            const std::string mount =
                have_v1_controllers ? "/sys/fs/cgroup/unified" : "/sys/fs/cgroup";
            if (!on_filesystem(mount, CGROUP2_SUPER_MAGIC) || !is_real_root_cgroup(mount))
                return std::nullopt;
            host.v2_mount = mount;
            host.v2_own = below_root_mount(mount, line.path);
            continue;
        }
        if (line.controllers.empty()) return std::nullopt;
        if (v1 == V1Hierarchies::skip) continue;
        const std::string mount = usual_v1_mount(line.controllers);
        if (!on_filesystem(mount, CGROUP_SUPER_MAGIC) || !exists(mount + "/cgroup.sane_behavior"))
            return std::nullopt;
        for (const auto& controller : line.controllers)
            host.v1_own[controller] = below_root_mount(mount, line.path);
    }
    if (host.v2_own.empty()) return std::nullopt;
    host.layout = have_v1_controllers ? CgroupLayout::hybrid : CgroupLayout::unified;
    return host;
}

Result<CgroupHost> discover_cgroup_host_from_mountinfo(std::string_view proc_self_cgroup) {
    auto mountinfo = read_file("/proc/self/mountinfo");
    if (!mountinfo) return std::move(mountinfo.error().context("discover cgroups"));
    auto host = parse_cgroup_host(*mountinfo, proc_self_cgroup);
    if (!host) return std::move(host.error().context("discover cgroups"));
    return host;
}

Result<CgroupHost> discover_cgroup_host(V1Hierarchies v1) {
    auto cgroups = read_file("/proc/self/cgroup");
    if (!cgroups) return std::move(cgroups.error().context("discover cgroups"));
    std::optional<CgroupHost> usual = discover_cgroup_host_at_usual_mounts(*cgroups, v1);
    auto host = usual ? Result<CgroupHost>(std::move(*usual))
                      : discover_cgroup_host_from_mountinfo(*cgroups);
    if (!host) return host;
    if (v1 == V1Hierarchies::skip) host->v1_own.clear();  // the same answer either way
    auto controllers = read_cgroup_controllers(host->v2_own);
    if (!controllers) return std::move(controllers.error().context("discover cgroups"));
    host->v2_controllers = std::move(*controllers);
    return host;
}

}  // namespace corral
