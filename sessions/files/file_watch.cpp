#include "sessions/files/file_watch.hpp"

#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>

namespace corral {
namespace {

constexpr uint32_t kMask = IN_CREATE | IN_DELETE | IN_MODIFY | IN_MOVED_FROM | IN_MOVED_TO |
                           IN_DELETE_SELF | IN_MOVE_SELF | IN_EXCL_UNLINK;

std::string join_relative(const std::string& dir, std::string_view name) {
    if (dir.empty()) return std::string(name);
    if (name.empty()) return dir;
    return dir + "/" + std::string(name);
}

bool is_below(const std::string& path, const std::string& dir) {
    return path == dir || (path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 &&
                           path[dir.size()] == '/');
}

}  // namespace

const char* watch_event_name(WatchEvent::Type type) {
    switch (type) {
        case WatchEvent::Type::create:
            return "create";
        case WatchEvent::Type::modify:
            return "modify";
        case WatchEvent::Type::remove:
            return "delete";
        case WatchEvent::Type::move:
            return "move";
        case WatchEvent::Type::overflow:
            return "overflow";
    }
    return "unknown";
}

FileWatch::FileWatch(std::shared_ptr<FileService> files, std::string path, FileWatchOptions options,
                     std::unique_ptr<InotifyBudget::Lease> lease, UniqueFd inotify)
    : files_(std::move(files)),
      path_(std::move(path)),
      options_(options),
      lease_(std::move(lease)),
      inotify_(std::move(inotify)) {}

Result<std::unique_ptr<FileWatch>> FileWatch::start(std::shared_ptr<FileService> files,
                                                    std::string path, FileWatchOptions options,
                                                    std::unique_ptr<InotifyBudget::Lease> lease) {
    const int fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd < 0) {
        const int code = errno;
        return sys_error(code, code == EMFILE ? "inotify_init1: the host's inotify instances "
                                                "are used up (fs.inotify.max_user_instances)"
                                              : "inotify_init1");
    }
    std::unique_ptr<FileWatch> watch(new FileWatch(std::move(files), std::move(path), options,
                                                   std::move(lease), UniqueFd(fd)));
    CORRAL_TRY(watch->add_tree("", nullptr), "watch");
    return watch;
}

std::string FileWatch::session_path(const std::string& relative) const {
    if (relative.empty()) return path_;
    return (path_ == "/" ? "" : path_) + "/" + relative;
}

Status FileWatch::add_tree(const std::string& relative, std::vector<WatchEvent>* found) {
    std::deque<std::string> queue{relative};
    bool first = true;
    while (!queue.empty()) {
        const std::string dir = std::move(queue.front());
        queue.pop_front();
        if (dirs_.size() >= options_.max_directories)
            return sys_error(E2BIG, "watching " + session_path("") + " needs more than " +
                                        std::to_string(options_.max_directories) +
                                        " directories (one watch's cap); watch a narrower path");
        CORRAL_TRY(lease_->add_directory(), "watching " + session_path(dir));
        // Only the watched directory itself may be reached through a symlink (inside the root).
        const bool follow = first && relative.empty();
        auto wd = files_->add_watch(inotify_.get(), session_path(dir), kMask, follow);
        const bool top = first;
        first = false;
        // Charged ahead; given back when no new watch came of it (a failure, or an inode that
        // is watched already: the kernel answers its existing descriptor).
        if (!wd || dirs_.count(*wd)) lease_->remove_directories(1);
        if (!wd) {
            const int code = wd.error().code;
            if (code == ENOSPC)
                return sys_error(ENOSPC, "inotify_add_watch " + session_path(dir) +
                                             ": the host's inotify watches are used up "
                                             "(fs.inotify.max_user_watches)");
            // The watched directory must be there; a subdirectory that vanished, turned out to
            // be a symlink or cannot be read is not watched (as a listing skips it).
            if (top && relative.empty()) return std::move(wd.error());
            if (code == ENOENT || code == ENOTDIR || code == EACCES || code == ELOOP) continue;
            return std::move(wd.error());
        }
        if (relative.empty() && top) root_wd_ = *wd;
        dirs_[*wd] = dir;
        if (!options_.recursive) break;
        auto entries = files_->list(session_path(dir));
        if (!entries) continue;  // vanished meanwhile: its parent's event says so
        for (const auto& entry : *entries) {
            const std::string child = join_relative(dir, entry.name);
            if (found)
                found->push_back({WatchEvent::Type::create, session_path(child), "",
                                  entry.type == FileType::dir});
            if (entry.type == FileType::dir) queue.push_back(child);
        }
    }
    return {};
}

std::unordered_map<int, std::string>::iterator FileWatch::forget(
    std::unordered_map<int, std::string>::iterator it) {
    lease_->remove_directories(1);
    return dirs_.erase(it);
}

void FileWatch::drop_tree(const std::string& relative) {
    for (auto it = dirs_.begin(); it != dirs_.end();) {
        if (it->second != "" && is_below(it->second, relative)) {
            (void)::inotify_rm_watch(inotify_.get(), it->first);
            it = forget(it);
        } else {
            ++it;
        }
    }
}

std::vector<WatchEvent> FileWatch::read_events() {
    std::vector<WatchEvent> out;
    // A rename arrives as IN_MOVED_FROM then IN_MOVED_TO with one cookie; a MOVED_FROM whose
    // partner does not follow moved out of the watched tree (a delete, for this watch).
    struct PendingMove {
        uint32_t cookie;
        std::string relative;
        std::string dir;  ///< the directory it left, relative to path_
        bool is_dir;
        bool settled = false;  ///< its rename is known to be over (see below)
    };
    std::optional<PendingMove> pending;
    auto flush_pending = [&] {
        if (!pending) return;
        out.push_back(
            {WatchEvent::Type::remove, session_path(pending->relative), "", pending->is_dir});
        if (pending->is_dir) drop_tree(pending->relative);
        pending.reset();
    };
    alignas(struct inotify_event) char buffer[64 * 1024];
    for (;;) {
        const ssize_t n = ::read(inotify_.get(), buffer, sizeof buffer);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0 && pending && !pending->settled) {
            // The queue ended right after a MOVED_FROM: its MOVED_TO may not be queued yet, as
            // the renaming task queues it a moment later in the same rename(2), and a reader
            // woken by the first event can get in between (it did, for every rename, on the
            // emulated pure-v2 kernel). That task holds the source directory's lock until both
            // are queued, and reading a directory takes that lock: once the listing returns the
            // rename is over, and a MOVED_TO it made is in the queue.
            pending->settled = true;
            (void)files_->list(session_path(pending->dir));
            continue;
        }
        if (n <= 0) break;  // EAGAIN: nothing more queued now
        for (ssize_t at = 0; at < n;) {
            const auto* raw = reinterpret_cast<const struct inotify_event*>(buffer + at);
            at += static_cast<ssize_t>(sizeof(struct inotify_event) + raw->len);
            if (pending && !((raw->mask & IN_MOVED_TO) && raw->cookie == pending->cookie))
                flush_pending();
            if (raw->mask & IN_Q_OVERFLOW) {
                out.push_back({WatchEvent::Type::overflow, path_, "", false});
                continue;
            }
            auto dir = dirs_.find(raw->wd);
            if (dir == dirs_.end()) continue;  // a watch dropped a moment ago
            if (raw->mask & IN_IGNORED) {
                if (raw->wd == root_wd_) gone_ = true;
                forget(dir);
                continue;
            }
            if (raw->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT)) {
                // A subdirectory's own end is reported by its parent's delete/move event.
                if (raw->wd == root_wd_) gone_ = true;
                continue;
            }
            const std::string relative =
                join_relative(dir->second, raw->len ? std::string_view(raw->name) : "");
            const bool is_dir = (raw->mask & IN_ISDIR) != 0;
            if (raw->mask & IN_MOVED_FROM) {
                pending = PendingMove{raw->cookie, relative, dir->second, is_dir};
            } else if ((raw->mask & IN_MOVED_TO) && pending) {
                out.push_back({WatchEvent::Type::move, session_path(relative),
                               session_path(pending->relative), is_dir});
                if (is_dir) {
                    // Same inode, same watches: only their names change.
                    bool watched = false;
                    for (auto& [wd, name] : dirs_)
                        if (!name.empty() && is_below(name, pending->relative)) {
                            name = relative + name.substr(pending->relative.size());
                            watched = true;
                        }
                    // None: it was created and moved before its creation's event was read (its
                    // add_tree found nothing there). Watched now, what it holds reported as
                    // created, or what is made in it later would never be seen.
                    if (!watched && options_.recursive && !failure_) {
                        if (auto added = add_tree(relative, &out); !added)
                            failure_ = std::move(added.error());
                    }
                }
                pending.reset();
            } else if (raw->mask & (IN_CREATE | IN_MOVED_TO)) {
                out.push_back({WatchEvent::Type::create, session_path(relative), "", is_dir});
                // A new directory may already hold entries (mkdir -p, a move): each gets a
                // create event, and its subdirectories their watches.
                if (is_dir && options_.recursive && !failure_) {
                    if (auto added = add_tree(relative, &out); !added)
                        failure_ = std::move(added.error());
                }
            } else if (raw->mask & IN_MODIFY) {
                const std::string path = session_path(relative);
                if (!out.empty() && out.back().type == WatchEvent::Type::modify &&
                    out.back().path == path)
                    continue;  // one event per burst of writes
                out.push_back({WatchEvent::Type::modify, path, "", is_dir});
            } else if (raw->mask & IN_DELETE) {
                out.push_back({WatchEvent::Type::remove, session_path(relative), "", is_dir});
            }
        }
    }
    flush_pending();
    return out;
}

}  // namespace corral
