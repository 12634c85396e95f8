#include "base/tree_removal.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <vector>

#include "base/openat2.hpp"
#include "base/thread_without_signals.hpp"
#include "base/unique_fd.hpp"

namespace corral {
namespace {

/// Directories held open at once while descending; deeper ones are moved up to the top.
constexpr size_t kMaxDepth = 64;

/// One directory being emptied: its descriptor and its name in the one above.
struct Level {
    UniqueFd fd;
    std::string name;
};

/// Opens `name` in `dir_fd` as a directory, never through a link. -1 (errno ENOTDIR or ELOOP)
/// when it is something else.
int open_directory(int dir_fd, const char* name) {
    return ::openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

/// open_directory() for an entry inside the tree, which must also not be a mount point: a bind
/// mount of the same file system has the same st_dev, so only the kernel can tell (EXDEV).
int open_subdirectory(int dir_fd, const char* name) {
    open_how how{};
    how.flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
    how.resolve = RESOLVE_NO_XDEV | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
    const int fd = openat2_retrying(dir_fd, name, how);
    if (fd < 0 && errno == ENOSYS) return open_directory(dir_fd, name);  // before 5.6: st_dev only
    return fd;
}

bool is_directory_entry(int dir_fd, const dirent& entry) {
    if (entry.d_type != DT_UNKNOWN) return entry.d_type == DT_DIR;
    struct stat st {};
    return ::fstatat(dir_fd, entry.d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
}

/// Moves the directory `name` of `from_fd` to the top of the tree (`top_fd`) under a new name.
Status move_to_top(int from_fd, const char* name, int top_fd, uint64_t& counter) {
    for (;;) {
        const std::string moved = "deep-" + std::to_string(++counter);
        if (::renameat2(from_fd, name, top_fd, moved.c_str(), RENAME_NOREPLACE) == 0) return {};
        if (errno != EEXIST) return sys_error("move a deep directory `" + std::string(name) + "`");
    }
}

/// What one pass over a directory found: a subdirectory to enter, or nothing left to do in it.
struct Pass {
    UniqueFd child;
    std::string child_name;
};

/// Removes every non-directory entry of `levels.back()`, stopping at the first subdirectory,
/// which it opens (or moves to the top when the stack is full).
Result<Pass> empty_one_pass(std::vector<Level>& levels, dev_t device, uint64_t& moved,
                            const std::function<bool()>& keep_going) {
    Level& level = levels.back();
    UniqueFd listing_fd(::openat(level.fd.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!listing_fd) return sys_error("open `" + level.name + "`");
    DIR* listing = ::fdopendir(listing_fd.get());
    if (listing == nullptr) return sys_error("list `" + level.name + "`");
    listing_fd.release();
    Result<Pass> result = Pass{};
    while (dirent* entry = ::readdir(listing)) {
        const std::string name = entry->d_name;
        if (name == "." || name == "..") continue;
        if (keep_going && !keep_going()) {
            result = sys_error(ECANCELED, "stopped");
            break;
        }
        if (!is_directory_entry(level.fd.get(), *entry)) {
            if (::unlinkat(level.fd.get(), entry->d_name, 0) != 0 && errno != ENOENT) {
                result = sys_error("unlink `" + name + "` in `" + level.name + "`");
                break;
            }
            continue;
        }
        if (levels.size() >= kMaxDepth) {
            if (auto status =
                    move_to_top(level.fd.get(), entry->d_name, levels.front().fd.get(), moved);
                !status) {
                result = std::move(status.error());
                break;
            }
            continue;
        }
        UniqueFd child(open_subdirectory(level.fd.get(), entry->d_name));
        if (!child && errno == EXDEV) {
            result = sys_error(EXDEV, "`" + name + "` in `" + level.name +
                                          "` is a mount point: left with what is beneath it");
            break;
        }
        if (!child && (errno == ENOTDIR || errno == ELOOP)) {
            // Replaced by something else since it was listed: removed as what it is now.
            if (::unlinkat(level.fd.get(), entry->d_name, 0) == 0 || errno == ENOENT) continue;
        }
        if (!child) {
            result = sys_error("open `" + name + "` in `" + level.name + "`");
            break;
        }
        struct stat st {};
        if (::fstat(child.get(), &st) != 0 || st.st_dev != device) {
            result = sys_error(EXDEV, "`" + name + "` in `" + level.name +
                                          "` is on another file system (a mount point): left");
            break;
        }
        result = Pass{std::move(child), name};
        break;
    }
    ::closedir(listing);
    return result;
}

}  // namespace

bool is_discarded_name(const std::string& name) {
    return name.rfind(kDiscardedPrefix, 0) == 0 &&
           name.size() > std::string(kDiscardedPrefix).size();
}

Result<std::string> discard_directory(const std::string& dir) {
    static std::atomic<uint64_t> counter{0};
    const auto slash = dir.find_last_of('/');
    const std::string parent = slash == std::string::npos ? "." : dir.substr(0, slash);
    const std::string name = slash == std::string::npos ? dir : dir.substr(slash + 1);
    for (;;) {
        const std::string discarded = parent + "/" + kDiscardedPrefix + name + "-" +
                                      std::to_string(::getpid()) + "-" + std::to_string(++counter);
        if (::renameat2(AT_FDCWD, dir.c_str(), AT_FDCWD, discarded.c_str(), RENAME_NOREPLACE) == 0)
            return discarded;
        if (errno != EEXIST) return sys_error("rename `" + dir + "` to `" + discarded + "`");
    }
}

// Depth-first with a stack of open directories: each pass over the deepest one deletes what is
// not a directory and enters the first subdirectory it meets; a directory found empty is removed
// from the one above, which is then listed again (what was deleted is no longer listed, so the
// passes add up to one walk). A second file system below is refused (st_dev), so no mount's
// contents are ever touched.
Status remove_tree_at(int parent_fd, const std::string& name,
                      const std::function<bool()>& keep_going) {
    UniqueFd top(open_directory(parent_fd, name.c_str()));
    if (!top) {
        if (errno == ENOENT) return {};
        if (errno != ENOTDIR && errno != ELOOP) return sys_error("open `" + name + "`");
        if (::unlinkat(parent_fd, name.c_str(), 0) != 0 && errno != ENOENT)
            return sys_error("unlink `" + name + "`");
        return {};
    }
    struct stat st {};
    if (::fstat(top.get(), &st) != 0) return sys_error("stat `" + name + "`");
    const dev_t device = st.st_dev;
    std::vector<Level> levels;
    levels.push_back(Level{std::move(top), name});
    uint64_t moved = 0;
    while (!levels.empty()) {
        auto pass = empty_one_pass(levels, device, moved, keep_going);
        if (!pass) return std::move(pass.error().context("remove `" + name + "`"));
        if (pass->child) {
            levels.push_back(Level{std::move(pass->child), std::move(pass->child_name)});
            continue;
        }
        const std::string done = std::move(levels.back().name);
        levels.pop_back();
        const int above = levels.empty() ? parent_fd : levels.back().fd.get();
        if (::unlinkat(above, done.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT)
            return sys_error("rmdir `" + done + "` (in `" + name + "`)");
    }
    return {};
}

Result<std::optional<std::string>> remove_or_discard(const std::string& path, size_t max_entries) {
    size_t budget = max_entries;
    auto removed = remove_tree_at(AT_FDCWD, path, [&budget] { return budget-- > 0; });
    if (removed) return std::optional<std::string>();
    auto discarded = discard_directory(path);
    if (!discarded) return std::move(discarded.error());
    return std::optional<std::string>(std::move(*discarded));
}

TreeRemover::TreeRemover(std::chrono::milliseconds shutdown_grace)
    : shutdown_grace_(shutdown_grace) {
    thread_ = start_thread_without_signals([this] { run(); });
}

TreeRemover::~TreeRemover() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
        stop_at_ = std::chrono::steady_clock::now() + shutdown_grace_;
    }
    wake_.notify_all();
    thread_.join();
}

void TreeRemover::remove(std::string dir) {
    {
        std::lock_guard lock(mutex_);
        queue_.push_back(std::move(dir));
    }
    wake_.notify_all();
}

size_t TreeRemover::pending() const {
    std::lock_guard lock(mutex_);
    return queue_.size() + busy_;
}

bool TreeRemover::keep_going() const {
    std::lock_guard lock(mutex_);
    return !stopping_ || std::chrono::steady_clock::now() < stop_at_;
}

void TreeRemover::run() {
    for (;;) {
        std::string dir;
        {
            std::unique_lock lock(mutex_);
            wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
            if (queue_.empty() || (stopping_ && std::chrono::steady_clock::now() >= stop_at_))
                return;
            dir = std::move(queue_.front());
            queue_.pop_front();
            busy_ = 1;
        }
        // A failure leaves the directory under its marked name: the next start tries again.
        const auto slash = dir.find_last_of('/');
        UniqueFd parent(::open(slash == 0 ? "/" : dir.substr(0, slash).c_str(),
                               O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        if (parent)
            (void)remove_tree_at(parent.get(), dir.substr(slash + 1),
                                 [this] { return keep_going(); });
        std::lock_guard lock(mutex_);
        busy_ = 0;
    }
}

}  // namespace corral
