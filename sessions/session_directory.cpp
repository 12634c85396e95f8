// A session's directory under the state dir: <state>/sessions/<sid>/root is its working directory
// (the file API's root). With workdir.size the root is a tmpfs of that size, so one session cannot
// fill the host's disk.
#include <sys/mount.h>
#include <sys/stat.h>

#include <filesystem>
#include <system_error>
#include <utility>

#include "sessions/session.hpp"

namespace corral {

SessionDirectory::SessionDirectory(SessionDirectory&& other) noexcept
    : dir_(std::move(other.dir_)), root_(std::move(other.root_)), mounted_(other.mounted_) {
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
    }
    return *this;
}

SessionDirectory::~SessionDirectory() {
    (void)remove();
}

Result<SessionDirectory> SessionDirectory::create(const std::string& sessions_dir,
                                                  const std::string& sid,
                                                  std::optional<uint64_t> size) {
    SessionDirectory directory;
    const std::string dir = sessions_dir + "/" + sid;
    // 0711: a session running as another uid without a mount namespace must traverse to its root.
    if (::mkdir(dir.c_str(), 0711) != 0) return sys_error("mkdir `" + dir + "`");
    directory.dir_ = dir;
    directory.root_ = dir + "/root";
    if (::mkdir(directory.root_.c_str(), 0755) != 0) {
        return sys_error("mkdir `" + directory.root_ + "`");
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

// Unmounting first matters: remove_all on a still-mounted tmpfs would only empty it and then fail.
// remove_all never follows symlinks, so a link a session planted cannot redirect the deletion.
Status SessionDirectory::remove() {
    if (dir_.empty()) return {};
    if (mounted_) {
        if (::umount2(root_.c_str(), MNT_DETACH) != 0) return sys_error("umount `" + root_ + "`");
        mounted_ = false;
    }
    std::error_code error;
    std::filesystem::remove_all(dir_, error);
    if (error) return sys_error(error.value(), "remove `" + dir_ + "`");
    dir_.clear();
    return {};
}

}  // namespace corral
