#pragma once
// Deleting a directory tree off corrald's event loop (issue 12: nothing on the loop may block on
// a file). A session's workspace may hold hundreds of thousands of files; deleting them took the
// loop for seconds when the session ended. Instead the directory is first *discarded*: renamed,
// in the same parent and so in O(1), to a name carrying corral's mark (`.corral-discarded-…`,
// which no session id can be), so its old name is free at once; a TreeRemover thread then deletes
// it. A daemon that stops or crashes meanwhile leaves the discarded directory behind, and the next
// start finds it by its mark and hands it to its own TreeRemover.
//
// The deletion never follows a symbolic link and never leaves the tree's file system: a session
// may have planted anything in its workspace (links to /etc, deep nests, a mount point's name).

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "base/error.hpp"

namespace corral {

/// The name prefix that marks a directory as one corral discarded and will delete.
inline constexpr const char* kDiscardedPrefix = ".corral-discarded-";

/// Whether `name` (a file name, not a path) is one discard_directory() gives.
bool is_discarded_name(const std::string& name);

/// Renames the directory `dir` to `<parent>/.corral-discarded-<name>-<n>` (never replacing
/// anything) and returns the new path. Does not follow `dir` if it is a symlink (rename never
/// does).
Result<std::string> discard_directory(const std::string& dir);

/// Deletes `name` in the directory `parent_fd` and everything beneath it: a symlink is removed,
/// never followed; a mount point beneath (another file system, or a bind mount: openat2's
/// RESOLVE_NO_XDEV) is an error, and it is left with everything above it.
/// Descriptors stay bounded however deep the tree: a directory nested deeper than a fixed depth
/// is moved up to the top of the tree (a rename) and deleted from there. `keep_going` is asked
/// before each entry; when it says no, ECANCELED comes back and the rest stays.
Status remove_tree_at(int parent_fd, const std::string& name,
                      const std::function<bool()>& keep_going = {});

/// Removes the tree at `path` here when that takes at most `max_entries` entries (bounded work:
/// the count stops the walk); else discards what is left of it (discard_directory) and returns
/// the discarded path, for a TreeRemover. nullopt: nothing is left.
Result<std::optional<std::string>> remove_or_discard(const std::string& path, size_t max_entries);

/// A thread that deletes discarded directories one after another, in the order given.
class TreeRemover {
  public:
    /// `shutdown_grace`: how long destruction lets the thread go on with what is queued before
    /// it stops where it is (what is left is found again by the next start).
    explicit TreeRemover(std::chrono::milliseconds shutdown_grace = std::chrono::seconds(2));
    ~TreeRemover();
    TreeRemover(const TreeRemover&) = delete;
    TreeRemover& operator=(const TreeRemover&) = delete;

    /// Queues the absolute path `dir` for deletion; returns at once.
    void remove(std::string dir);
    /// Directories queued or being deleted.
    size_t pending() const;

  private:
    void run();
    bool keep_going() const;

    const std::chrono::milliseconds shutdown_grace_;
    mutable std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<std::string> queue_;
    size_t busy_ = 0;
    bool stopping_ = false;
    std::chrono::steady_clock::time_point stop_at_;
    std::thread thread_;
};

}  // namespace corral
