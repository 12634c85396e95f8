// Start-up after a crash: claim the instance, then reap what the previous run left.
#include "sessions/recovery/recovery.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <system_error>
#include <thread>

#include "base/directory_listing.hpp"
#include "base/file_io.hpp"
#include "base/tree_removal.hpp"
#include "isolation/cgroup.hpp"
#include "sessions/recovery/journal_records.hpp"

namespace corral {
namespace {

// A killed task leaves its cgroup within milliseconds; reaching this means one is stuck in the
// kernel (D state), and what it holds is reported as left rather than waited for forever.
constexpr std::chrono::seconds kKillBound{10};
constexpr const char* kWorkdirMount = "tmpfs corral-workdir";

bool is_directory(const std::string& path) {
    struct stat st {};
    return ::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

/// The directory and every cgroup beneath it.
size_t count_cgroups(const std::string& dir) {
    size_t count = 1;
    for (const auto& child : subdirectory_names(dir)) count += count_cgroups(dir + "/" + child);
    return count;
}

/// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string unescape_mount_path(const std::string& text) {
    std::string out;
    for (size_t i = 0; i < text.size(); ++i) {
        if (text[i] == '\\' && i + 3 < text.size()) {
            const std::string digits = text.substr(i + 1, 3);
            if (digits.size() == 3 && std::all_of(digits.begin(), digits.end(), [](char c) {
                    return c >= '0' && c <= '7';
                })) {
                out += static_cast<char>(std::stoi(digits, nullptr, 8));
                i += 3;
                continue;
            }
        }
        out += text[i];
    }
    return out;
}

Status check_instance_mark(int instance_fd, const std::string& instance_dir,
                           const std::string& state_dir) {
    char value[4096];
    const ssize_t n = ::fgetxattr(instance_fd, kInstanceMarkXattr, value, sizeof value);
    if (n >= 0) {
        const std::string owner(value, static_cast<size_t>(n));
        if (owner == state_dir) return {};
        return sys_error(EEXIST, "instance cgroup `" + instance_dir +
                                     "` belongs to the corrald whose state dir is `" + owner +
                                     "` (choose another --instance)");
    }
    // No mark: accepted only when it holds nothing but the layout corral makes (a run of a
    // corrald that did not mark yet); anything else may be somebody else's.
    for (const auto& child : subdirectory_names(instance_dir)) {
        if (child != "supervisor" && child != "sessions") {
            return sys_error(EEXIST, "cgroup `" + instance_dir +
                                         "` exists and is not a corral instance (it holds `" +
                                         child + "`); choose another --instance");
        }
    }
    return {};
}

// A POSIX record lock, not flock(): record locks belong to the process and are not inherited by
// fork/clone, so a namespace holder or a child caught between clone and exec when the daemon died
// cannot keep the lock (and so the next start) hostage. The kernel drops it when we die.
Status lock_state_dir(UniqueFd& fd, const std::string& state_dir) {
    const std::string path = state_dir + "/corrald.lock";
    fd.reset(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!fd) return sys_error("open `" + path + "`");
    struct flock lock {};
    lock.l_type = F_WRLCK;
    lock.l_whence = SEEK_SET;
    if (::fcntl(fd.get(), F_SETLK, &lock) == 0) {
        const std::string pid = std::to_string(::getpid()) + "\n";
        if (::ftruncate(fd.get(), 0) == 0) (void)!::pwrite(fd.get(), pid.data(), pid.size(), 0);
        return {};
    }
    if (errno != EACCES && errno != EAGAIN) return sys_error("lock `" + path + "`");
    struct flock holder {};
    holder.l_type = F_WRLCK;
    holder.l_whence = SEEK_SET;
    std::string who;
    if (::fcntl(fd.get(), F_GETLK, &holder) == 0 && holder.l_type != F_UNLCK)
        who = " (pid " + std::to_string(holder.l_pid) + ")";
    return sys_error(EBUSY, "state dir `" + state_dir + "` is in use by another running corrald" +
                                who);
}

/// Kills and removes one v2 subtree of the old instance (its sessions, or its supervisor leaf).
void reap_cgroup_tree(const std::string& path, LeftoverReport& report) {
    if (!is_directory(path)) return;
    auto cgroup = Cgroup::adopt(path);
    if (!cgroup) {
        report.left.push_back(cgroup.error().describe());
        return;
    }
    if (auto pids = cgroup->pids()) report.processes_killed += pids->size();
    const size_t cgroups = count_cgroups(path);
    Status removed = cgroup->remove(kKillBound);
    if (!removed) {
        report.left.push_back(removed.error().describe());
        cgroup->leave();
        return;
    }
    report.cgroups_removed += cgroups;
}

/// A v1 cgroup has no populated notification: SIGKILL what is listed, retry rmdir briefly. Its
/// processes were in the v2 tree too, which is empty by now, so normally the first rmdir works.
void reap_v1_cgroup(const std::string& path, LeftoverReport& report) {
    for (int attempt = 0; attempt < 200; ++attempt) {
        if (auto procs = read_file(path + "/cgroup.procs")) {
            std::istringstream pids(*procs);
            for (pid_t pid; pids >> pid;)
                if (pid > 0) ::kill(pid, SIGKILL);
        }
        if (::rmdir(path.c_str()) == 0 || errno == ENOENT) {
            ++report.cgroups_removed;
            return;
        }
        if (errno != EBUSY) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    report.left.push_back(sys_error("rmdir `" + path + "`").describe());
}

void reap_v1_cgroups(const LeftoverScope& scope, const std::set<std::string>& sids,
                     LeftoverReport& report) {
    const std::string prefix = "corral-" + scope.instance_name + "-";
    std::set<std::string> hierarchies;
    for (const auto& [controller, dir] : scope.v1_own) hierarchies.insert(dir);
    for (const auto& dir : hierarchies) {
        for (const auto& name : subdirectory_names(dir)) {
            if (name.rfind(prefix, 0) == 0 && sids.count(name.substr(prefix.size())) != 0) {
                reap_v1_cgroup(dir + "/" + name, report);
            } else if (name.rfind("corral-probe-", 0) == 0) {
                // A probe cgroup is made and removed at once; one whose daemon is dead is empty.
                const std::string pid = name.substr(13);
                if (!pid.empty() && ::access(("/proc/" + pid).c_str(), F_OK) != 0)
                    (void)::rmdir((dir + "/" + name).c_str());
            }
        }
    }
}

// A directory of more than a few thousand entries is renamed out of the way (report.discarded)
// rather than deleted here: a session that made 500k files would hold the start for seconds; the
// daemon deletes it off its loop.
void reap_session_directory(const std::string& dir, LeftoverReport& report) {
    const auto mounts = mounts_below(dir);
    for (const auto& [point, kind] : mounts) {
        if (kind != kWorkdirMount) {
            report.left.push_back("`" + dir + "`: `" + point + "` (" + kind +
                                  ") is mounted beneath it and is not corral's");
            return;
        }
    }
    for (const auto& [point, kind] : mounts) {
        if (::umount2(point.c_str(), MNT_DETACH) != 0) {
            report.left.push_back(sys_error("umount `" + point + "`").describe());
            return;
        }
        ++report.mounts_removed;
    }
    constexpr size_t kEntriesRemovedHere = 4096;
    auto discarded = remove_or_discard(dir, kEntriesRemovedHere);
    if (!discarded) {
        report.left.push_back(discarded.error().describe());
        return;
    }
    if (*discarded) report.discarded.push_back(std::move(**discarded));
    ++report.directories_removed;
}

/// Session ids with a state directory: names that are not session ids (discarded directories,
/// anything not corral's) are not sessions.
std::vector<std::string> session_directory_names(const std::string& sessions_dir) {
    auto names = subdirectory_names(sessions_dir);
    std::erase_if(names, [](const std::string& name) { return !valid_journal_session_id(name); });
    return names;
}

}  // namespace

Result<InstanceClaim> InstanceClaim::acquire(const std::string& state_dir,
                                             const std::string& instance_dir) {
    InstanceClaim claim;
    CORRAL_TRY(lock_state_dir(claim.state_lock_, state_dir), "");
    if (::mkdir(instance_dir.c_str(), 0755) != 0) {
        if (errno != EEXIST) return sys_error("mkdir `" + instance_dir + "`");
        claim.instance_existed_ = true;
    }
    UniqueFd instance(::open(instance_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!instance) return sys_error("open instance cgroup `" + instance_dir + "`");
    // The instance's owner is the daemon of the state dir its mark names: that one is us (its
    // lock is ours now), or another daemon, live or not, whose sessions are not ours to reap.
    if (claim.instance_existed_)
        CORRAL_TRY(check_instance_mark(instance.get(), instance_dir, state_dir), "");
    // Best effort: without xattrs the layout check above still guards the next start.
    (void)::fsetxattr(instance.get(), kInstanceMarkXattr, state_dir.data(), state_dir.size(), 0);
    return claim;
}

std::vector<std::pair<std::string, std::string>> mounts_below(const std::string& dir) {
    std::vector<std::pair<std::string, std::string>> found;
    std::ifstream mountinfo("/proc/self/mountinfo");
    const std::string prefix = dir + "/";
    for (std::string line; std::getline(mountinfo, line);) {
        std::istringstream fields(line);
        std::string id, parent, device, root, point;
        fields >> id >> parent >> device >> root >> point;
        std::string word;
        while (fields >> word && word != "-") {
        }
        std::string type, source;
        fields >> type >> source;
        point = unescape_mount_path(point);
        if (point.rfind(prefix, 0) == 0) found.emplace_back(point, type + " " + source);
    }
    // Deepest first, so a mount on top of another goes before it.
    std::stable_sort(found.begin(), found.end(), [](const auto& a, const auto& b) {
        return a.first.size() > b.first.size();
    });
    return found;
}

LeftoverReport reap_leftovers(const LeftoverScope& scope, const std::set<std::string>& keep) {
    LeftoverReport report;
    const std::string sessions_cgroup = scope.instance_dir + "/sessions";
    const std::string sessions_dir = scope.state_dir + "/sessions";
    std::set<std::string> sids;
    for (const auto& sid : subdirectory_names(sessions_cgroup)) sids.insert(sid);
    for (const auto& sid : session_directory_names(sessions_dir)) sids.insert(sid);
    for (const auto& sid : keep) sids.erase(sid);
    report.sessions.assign(sids.begin(), sids.end());
    for (const auto& sid : sids) {
        if (auto cgroup = Cgroup::open_unowned(sessions_cgroup + "/" + sid); cgroup) {
            if (auto pids = cgroup->pids()) report.processes_by_session[sid] = pids->size();
        }
        struct stat st {};
        if (::stat((sessions_dir + "/" + sid).c_str(), &st) == 0) {
            report.created_at[sid] = std::chrono::system_clock::time_point(
                std::chrono::duration_cast<std::chrono::system_clock::duration>(
                    std::chrono::seconds(st.st_mtim.tv_sec) +
                    std::chrono::nanoseconds(st.st_mtim.tv_nsec)));
        }
    }
    // v2 first: cgroup.kill on the old sessions subtree ends every process and holder at once
    // (their namespaces go with the holders); then the v1 cgroups and mounts they used. With
    // sessions to keep, each other one goes on its own.
    if (keep.empty()) {
        reap_cgroup_tree(sessions_cgroup, report);
    } else {
        for (const auto& sid : subdirectory_names(sessions_cgroup))
            if (keep.count(sid) == 0) reap_cgroup_tree(sessions_cgroup + "/" + sid, report);
    }
    reap_cgroup_tree(scope.instance_dir + "/supervisor", report);
    reap_v1_cgroups(scope, sids, report);
    for (const auto& sid : session_directory_names(sessions_dir))
        if (keep.count(sid) == 0) reap_session_directory(sessions_dir + "/" + sid, report);
    // What a previous run had discarded but not yet deleted when it stopped (only names with
    // corral's mark: anything else in the state dir is left alone).
    for (const auto& name : subdirectory_names(sessions_dir))
        if (is_discarded_name(name) &&
            std::find(report.discarded.begin(), report.discarded.end(),
                      sessions_dir + "/" + name) == report.discarded.end())
            report.discarded.push_back(sessions_dir + "/" + name);
    return report;
}

void reap_session_leftovers(const LeftoverScope& scope, const std::string& sid,
                            LeftoverReport& report) {
    reap_cgroup_tree(scope.instance_dir + "/sessions/" + sid, report);
    reap_v1_cgroups(scope, {sid}, report);
    const std::string dir = scope.state_dir + "/sessions/" + sid;
    if (is_directory(dir)) reap_session_directory(dir, report);
}

}  // namespace corral
