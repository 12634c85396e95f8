// The stock of spare session directories (session_directory_stock.hpp).
#include "sessions/session_directory_stock.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>

#include "base/thread_without_signals.hpp"
#include "base/tree_removal.hpp"
#include "base/unique_fd.hpp"

namespace corral {
namespace {

constexpr std::chrono::seconds kRetryAfterFailure{2};

/// Removes `dir` and what it holds (corrald's own spare directory, from this run or a crashed one).
void remove_directory(const std::string& dir) {
    const auto slash = dir.find_last_of('/');
    const std::string parent =
        slash == std::string::npos ? "." : slash == 0 ? "/" : dir.substr(0, slash);
    const std::string name = slash == std::string::npos ? dir : dir.substr(slash + 1);
    UniqueFd parent_fd(::open(parent.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (parent_fd) (void)remove_tree_at(parent_fd.get(), name);
}

}  // namespace

SessionDirectoryStock::SessionDirectoryStock(std::string spare_dir, std::string sessions_dir,
                                             size_t depth, std::string marker)
    : spare_dir_(std::move(spare_dir)),
      sessions_dir_(std::move(sessions_dir)),
      depth_(depth),
      marker_(std::move(marker)) {
    remove_directory(spare_dir_);
    if (::mkdir(spare_dir_.c_str(), 0700) != 0) return;  // no stock: each creation makes its own
    thread_ = start_thread_without_signals([this] { run(); });
}

SessionDirectoryStock::~SessionDirectoryStock() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) {
        thread_.join();
        remove_directory(spare_dir_);
    }
}

bool SessionDirectoryStock::take(const std::string& sid) {
    std::string spare;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (spares_.empty() || given_up_) return false;
        spare = std::move(spares_.front());
        spares_.pop_front();
    }
    wake_.notify_one();
    const std::string dir = sessions_dir_ + "/" + sid;
    if (::renameat2(AT_FDCWD, spare.c_str(), AT_FDCWD, dir.c_str(), RENAME_NOREPLACE) == 0)
        return true;
    const int error = errno;
    remove_one(spare);  // the caller's mkdir says what is wrong with `dir`
    if (error == EXDEV) {
        std::lock_guard<std::mutex> lock(mutex_);
        given_up_ = true;
    }
    return false;
}

size_t SessionDirectoryStock::ready() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return spares_.size();
}

void SessionDirectoryStock::run() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
        wake_.wait(lock, [this] { return stopping_ || given_up_ || spares_.size() < depth_; });
        if (stopping_ || given_up_) return;
        lock.unlock();
        const bool made = make_one();
        lock.lock();
        // A file system that refuses (full, read-only, out of inodes) refuses the creations'
        // own mkdir too, which says why: the stock tries again a while later, not in a loop.
        if (!made) wake_.wait_for(lock, kRetryAfterFailure, [this] { return stopping_; });
    }
}

bool SessionDirectoryStock::make_one() {
    std::string path;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        path = spare_dir_ + "/" + std::to_string(++made_);
    }
    // The modes a creation gives its directory (SessionDirectory::create), set outright: the
    // umask is the process's, and the loop may hold a stricter one for an instant (the API
    // socket's bind, unix_listener.cpp) while this thread makes a spare.
    const std::string root = path + "/root";
    const std::string marker = path + "/" + marker_;
    bool made = ::mkdir(path.c_str(), 0700) == 0;
    if (!made) return false;
    made = ::chmod(path.c_str(), 0700) == 0 && ::mkdir(root.c_str(), 0755) == 0 &&
           ::chmod(root.c_str(), 0755) == 0;
    if (made) {
        const int fd =
            ::open(marker.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        made = fd >= 0 && ::fchmod(fd, 0600) == 0;
        if (fd >= 0) ::close(fd);
    }
    if (!made) {
        remove_one(path);
        return false;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) {
        remove_one(path);
        return true;
    }
    spares_.push_back(std::move(path));
    return true;
}

void SessionDirectoryStock::remove_one(const std::string& path) {
    (void)remove_tree_at(AT_FDCWD, path);
}

}  // namespace corral
