#pragma once
// Session directories made ahead, off corrald's event loop (issue 18, "a session ready to run").
//
// A session's directory is two new inodes (<sid>/ and <sid>/root/) and, for a prepared session,
// a third (the .prepared marker). Making them on the loop held it for ~2 ms per creation on a
// file system that scans for recently freed inodes at every allocation (ext4 without a journal:
// `find_inode_bit` -> `recently_deleted`, after any churn of sessions), in every pool refill and
// every creation without a pool, while clients waited behind it (docs/BENCHMARKS.md, "What a
// refill holds the loop for"). Here a thread of its own keeps a few spare directories, each with
// its root and its marker, and a creation takes one by renaming it to the session's id: a rename
// in the same directory allocates nothing. With no spare ready, the creation makes its directory
// itself, as before.
//
// The spares live in a directory of their own beside the sessions' (`<state>/spare-sessions`),
// so the sessions directory holds sessions and nothing else; a rename between the two allocates
// nothing either. What a crash left there is deleted when the next stock starts, and the stock
// removes its spares and their directory when it is destroyed. A spare was never any session's:
// nothing in it but the empty root and the marker, both made by corrald.
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

namespace corral {

class SessionDirectoryStock {
  public:
    /// Keeps up to `depth` spares for `sessions_dir` (which exists) in `spare_dir` (on the same
    /// file system; corrald's own: whatever is there is deleted first), made on a thread of its
    /// own, each holding an empty file named `marker` besides its root.
    SessionDirectoryStock(std::string spare_dir, std::string sessions_dir, size_t depth,
                          std::string marker);
    /// Stops the thread and removes the spares not taken, and their directory.
    ~SessionDirectoryStock();
    SessionDirectoryStock(const SessionDirectoryStock&) = delete;
    SessionDirectoryStock& operator=(const SessionDirectoryStock&) = delete;

    /// Renames a spare to `<sessions_dir>/<sid>` (never replacing anything) and asks the thread
    /// for another. The directory is 0700 with its `root` (0755) and the marker (0600) in it. false: no spare was ready (or the rename failed): make it yourself.
    bool take(const std::string& sid);
    /// Spares ready now.
    size_t ready() const;

  private:
    void run();
    /// Makes one spare; false when the file system refuses (then the thread stops trying).
    bool make_one();
    void remove_one(const std::string& path);

    const std::string spare_dir_;
    const std::string sessions_dir_;
    const size_t depth_;
    const std::string marker_;
    mutable std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<std::string> spares_;  ///< made whole, oldest first
    uint64_t made_ = 0;
    bool stopping_ = false;
    /// A rename into the sessions dir failed for a reason a retry would meet again (EXDEV:
    /// another file system): no more spares.
    bool given_up_ = false;
    std::thread thread_;
};

}  // namespace corral
