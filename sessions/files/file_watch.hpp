#pragma once
// A watch on one directory of a session (GET .../files/watch): inotify in the daemon, confined
// like the rest of the file API.
//
// Confinement: every directory is resolved by the session's FileService (openat2 RESOLVE_IN_ROOT
// | RESOLVE_NO_MAGICLINKS, as the service's identity) and only the resolved fd is given to the
// kernel, as /proc/self/fd/N (FileService::add_watch). The watched directory may be reached
// through a symlink (inside the root, as list() does); subdirectories of a recursive watch are
// added only when they are real directories, never through a symlink, so a link to /etc in the
// workspace cannot widen the watch (the class of CVE-2018-15664: a path that is checked and then
// used again can be swapped; here there is no second lookup).
//
// Bounded: at most `max_directories` watches per FileWatch, and what its InotifyBudget lease
// (the session's and corrald's shares of the host's inotify limits) still allows. A recursive
// watch that would need more fails (failure() then says so) instead of silently missing events.
// Events name paths in the session's path space (`base` + "/" + the relative name).
//
// Non-blocking: fd() is an O_NONBLOCK inotify descriptor for the event loop to wait on;
// read_events() never blocks. Event-loop thread only.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/error.hpp"
#include "base/unique_fd.hpp"
#include "sessions/files/file_service.hpp"
#include "sessions/files/inotify_budget.hpp"

namespace corral {

/// One change below a watched directory.
struct WatchEvent {
    enum class Type { create, modify, remove, move, overflow };
    Type type = Type::create;
    std::string path;  ///< the entry (for a move: where it is now), in the session's path space
    std::string from;  ///< for a move: where it was
    bool is_dir = false;
};

/// "create", "modify", "delete", "move", "overflow".
const char* watch_event_name(WatchEvent::Type type);

/// Knobs of a FileWatch.
struct FileWatchOptions {
    bool recursive = false;
    size_t max_directories = 4096;  ///< watches (directories) one FileWatch may hold
};

/// inotify watches on one directory (and, recursive, its subdirectories).
class FileWatch {
  public:
    /// Watches `path` (absolute, normalized, in the session's path space) through `files`,
    /// within `lease` (the watch's share of the session's and corrald's inotify budget).
    /// E2BIG when a recursive watch would need more than max_directories or than the lease
    /// allows; the file service's errors (ENOENT, ENOTDIR, EXDEV, EACCES) for the path; ENOSPC
    /// or EMFILE at the host's inotify limits.
    static Result<std::unique_ptr<FileWatch>> start(std::shared_ptr<FileService> files,
                                                    std::string path, FileWatchOptions options,
                                                    std::unique_ptr<InotifyBudget::Lease> lease);

    /// The inotify descriptor (non-blocking) to wait on for readability.
    int fd() const { return inotify_.get(); }
    /// Reads everything the kernel has queued and turns it into events. Never blocks.
    std::vector<WatchEvent> read_events();
    /// True once the watched directory itself was deleted, moved away or unmounted.
    bool gone() const { return gone_; }
    /// Set when a new subdirectory could not be watched (cap or host limit): the watch can no
    /// longer promise every event and should end with this error.
    const std::optional<Error>& failure() const { return failure_; }
    /// Directories watched now.
    size_t directories() const { return dirs_.size(); }

  private:
    FileWatch(std::shared_ptr<FileService> files, std::string path, FileWatchOptions options,
              std::unique_ptr<InotifyBudget::Lease> lease, UniqueFd inotify);
    /// Forgets the watch `it` names (the kernel dropped it, or it was removed): its directory
    /// goes back to the lease.
    std::unordered_map<int, std::string>::iterator forget(
        std::unordered_map<int, std::string>::iterator it);
    /// Watches `relative` ("" = the watched directory) and, recursive, what is below it;
    /// `found` gets a create event for each entry found below it (a directory that appeared
    /// with content already in it, as `mkdir -p a/b` or a move makes).
    Status add_tree(const std::string& relative, std::vector<WatchEvent>* found);
    /// Drops the watches of `relative` and everything below it (a directory moved away).
    void drop_tree(const std::string& relative);
    std::string session_path(const std::string& relative) const;
    std::shared_ptr<FileService> files_;
    std::string path_;
    FileWatchOptions options_;
    std::unique_ptr<InotifyBudget::Lease> lease_;  // given back after inotify_ has closed
    UniqueFd inotify_;
    std::unordered_map<int, std::string> dirs_;  // watch descriptor -> path relative to path_
    int root_wd_ = -1;
    bool gone_ = false;
    std::optional<Error> failure_;
};

}  // namespace corral
