// Where the kernel counts a fork refused by a pids limit, on every kernel version.
//
//  - Up to 6.11 (and on later kernels mounted with `pids_localevents`), `pids.events` "max"
//    counts in the cgroup of the *forking task*, wherever the limit sits: a fork bomb in a
//    session's `main` leaf is counted in the leaf, never in the session that has pids.max.
//  - Since 6.12 `pids.events` is hierarchical: "max" counts in the cgroup whose limit was hit
//    and in each of its ancestors, and the new `pids.events.local` "max" counts only in the
//    cgroup whose limit was hit. A refused fork of a task below that cgroup is not shown in the
//    task's own cgroup any more.
//
// So: sum `pids.events.local` over the subtree (each hit counted once, in the cgroup whose limit
// it hit); when that is zero, either no limit in the subtree was hit on a new kernel (then every
// `pids.events` below is zero as well) or the counters are the per-task ones (old kernel or
// pids_localevents), which the sum of `pids.events` over the subtree gives.
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include "base/file_io.hpp"
#include "isolation/cgroup.hpp"

namespace corral {
namespace {

/// Appends the pids event files of the subtree at `dir_fd`; vanishing children are skipped.
void collect_pids_events(int dir_fd, std::vector<PidsEventsFiles>& out, int depth) {
    PidsEventsFiles files;
    if (auto text = read_file(dir_fd, "pids.events")) files.events = *text;
    if (auto text = read_file(dir_fd, "pids.events.local")) files.events_local = *text;
    out.push_back(std::move(files));
    if (depth > 64) return;  // cgroup depth is bounded far below this; never loop on a bad fs
    int fd = ::openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;
    DIR* dir = ::fdopendir(fd);
    if (!dir) {
        ::close(fd);
        return;
    }
    while (dirent* entry = ::readdir(dir)) {
        std::string name = entry->d_name;
        if (entry->d_type != DT_DIR || name == "." || name == "..") continue;
        UniqueFd child(::openat(dir_fd, name.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
        if (child) collect_pids_events(child.get(), out, depth + 1);
    }
    ::closedir(dir);
}

}  // namespace

uint64_t count_pids_limit_hits(const std::vector<PidsEventsFiles>& subtree) {
    uint64_t local_hits = 0;
    uint64_t per_task_hits = 0;
    for (const auto& files : subtree) {
        per_task_hits += parse_keyed_values(files.events)["max"];
        if (files.events_local) local_hits += parse_keyed_values(*files.events_local)["max"];
    }
    return local_hits > 0 ? local_hits : per_task_hits;
}

Result<uint64_t> pids_limit_hits_in_subtree(const std::string& dir) {
    UniqueFd fd(::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!fd) return sys_error("open `" + dir + "`");
    return pids_limit_hits_in_subtree(fd.get());
}

Result<uint64_t> pids_limit_hits_in_subtree(int dir_fd) {
    std::vector<PidsEventsFiles> subtree;
    collect_pids_events(dir_fd, subtree, 0);
    return count_pids_limit_hits(subtree);
}

}  // namespace corral
