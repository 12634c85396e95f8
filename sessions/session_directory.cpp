// A session's directory under the state dir: <state>/sessions/<sid>/root is its working directory
// (the file API's root). With workdir.size the root is a tmpfs of that size, so one session cannot
// fill the host's disk.
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <utility>

#include "base/tree_removal.hpp"
#include "sessions/recovery/recovery.hpp"
#include "sessions/session.hpp"
#include "sessions/session_directory_stock.hpp"

namespace corral {

SessionDirectory::SessionDirectory(SessionDirectory&& other) noexcept
    : dir_(std::move(other.dir_)),
      root_(std::move(other.root_)),
      mounted_(other.mounted_),
      remover_(other.remover_) {
    other.dir_.clear();
    other.root_.clear();
    other.mounted_ = false;
}

SessionDirectory& SessionDirectory::operator=(SessionDirectory&& other) noexcept {
    if (this != &other) {
        (void)remove();
        dir_ = std::exchange(other.dir_, {});
        root_ = std::exchange(other.root_, {});
        mounted_ = std::exchange(other.mounted_, false);
        remover_ = other.remover_;
    }
    return *this;
}

SessionDirectory::~SessionDirectory() {
    (void)remove();
}

Result<SessionDirectory> SessionDirectory::create(const std::string& sessions_dir,
                                                  const std::string& sid,
                                                  std::optional<uint64_t> size,
                                                  TreeRemover* remover,
                                                  SessionDirectoryStock* stock, bool prepared) {
    SessionDirectory directory;
    directory.remover_ = remover;
    const std::string dir = sessions_dir + "/" + sid;
    const std::string marker = dir + "/" + kPreparedMarker;
    if (stock != nullptr && stock->take(sid)) {
        // A spare: the same directory, root and marker made off the loop (its modes as below).
        directory.dir_ = dir;
        directory.root_ = dir + "/root";
        // A client's session is somebody's from the start.
        if (!prepared && ::unlink(marker.c_str()) != 0)
            return sys_error("remove `" + marker + "`");
    } else {
        // 0700: no other host user may reach the session's files (issue 10 item 4: a setuid
        // file planted in a workspace). A session running as another uid gets the dir (hand_to).
        // The modes set outright, as a spare's are: not whatever the daemon's umask leaves.
        if (::mkdir(dir.c_str(), 0700) != 0) return sys_error("mkdir `" + dir + "`");
        directory.dir_ = dir;
        directory.root_ = dir + "/root";
        if (::chmod(dir.c_str(), 0700) != 0 || ::mkdir(directory.root_.c_str(), 0755) != 0 ||
            ::chmod(directory.root_.c_str(), 0755) != 0) {
            return sys_error("mkdir `" + directory.root_ + "`");
        }
        if (prepared) {
            const int fd = ::open(marker.c_str(),
                                  O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
            if (fd < 0) return sys_error("create `" + marker + "`");
            ::close(fd);
        }
    }
    if (size) {
        const std::string options = "size=" + std::to_string(*size) + ",mode=0755";
        if (::mount("corral-workdir", directory.root_.c_str(), "tmpfs", MS_NOSUID | MS_NODEV,
                    options.c_str()) != 0) {
            return sys_error("mount tmpfs (workdir.size) on `" + directory.root_ + "`");
        }
        directory.mounted_ = true;
    }
    return directory;
}

Result<SessionDirectory> SessionDirectory::adopt(const std::string& sessions_dir,
                                                 const std::string& sid, TreeRemover* remover) {
    SessionDirectory directory;
    directory.remover_ = remover;
    const std::string dir = sessions_dir + "/" + sid;
    struct stat st {};
    // lstat: a link in our own state dir is not one of ours.
    if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
        return sys_error(ENOENT, "session directory `" + dir + "` is gone");
    const std::string root = dir + "/root";
    if (::lstat(root.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
        return sys_error(ENOENT, "session root `" + root + "` is gone");
    for (const auto& [point, kind] : mounts_below(dir)) {
        if (point == root && kind == "tmpfs corral-workdir") {
            directory.mounted_ = true;
        } else {
            return plain_error("`" + point + "` (" + kind + ") is mounted in `" + dir +
                               "` and is not corral's");
        }
    }
    directory.dir_ = dir;
    directory.root_ = root;
    return directory;
}

Status SessionDirectory::hand_to(uid_t uid, gid_t gid) {
    // Both were made by us (a moment ago, or as a spare in a directory only root can enter) and
    // nothing of the session runs yet: the paths cannot have been swapped for links.
    for (const std::string* path : {&root_, &dir_}) {
        if (::lchown(path->c_str(), uid, gid) != 0) return sys_error("chown `" + *path + "`");
    }
    return {};
}

// Unmounting first matters: the tmpfs's files go with it, and the deletion never leaves the
// directory's file system. With a remover, a small directory (the common case) is deleted here
// and a larger one is renamed to a discarded name (O(1), so the id's directory is free at once)
// and deleted on the remover's thread: issue 12, a session's 500k files held the event loop for
// seconds. Without one (no event loop to keep free) it is all deleted here. Neither follows a
// symlink, so a link a session planted cannot redirect the deletion.
Status SessionDirectory::remove() {
    // A few hundred unlinks are well under a millisecond; beyond, the thread takes over.
    constexpr size_t kEntriesRemovedHere = 256;
    if (dir_.empty()) return {};
    if (mounted_) {
        if (::umount2(root_.c_str(), MNT_DETACH) != 0) return sys_error("umount `" + root_ + "`");
        mounted_ = false;
    }
    if (remover_ != nullptr) {
        auto discarded = remove_or_discard(dir_, kEntriesRemovedHere);
        if (!discarded) return std::move(discarded.error());
        if (*discarded) remover_->remove(std::move(**discarded));
    } else {
        CORRAL_TRY(remove_tree_at(AT_FDCWD, dir_), "");
    }
    dir_.clear();
    return {};
}

}  // namespace corral
