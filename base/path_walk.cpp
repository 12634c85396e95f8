#include "base/path_walk.hpp"

#include <fcntl.h>
#include <sys/stat.h>

namespace corral {

std::vector<std::string> path_components(const std::string& path) {
    std::vector<std::string> parts;
    size_t pos = 0;
    while (pos <= path.size()) {
        size_t next = path.find('/', pos);
        if (next == std::string::npos) next = path.size();
        std::string part = path.substr(pos, next - pos);
        if (!part.empty() && part != ".") parts.push_back(std::move(part));
        pos = next + 1;
    }
    return parts;
}

std::string drop_last_component(const std::string& walked) {
    const size_t slash = walked.rfind('/');
    return slash == std::string::npos ? std::string() : walked.substr(0, slash);
}

Result<UniqueFd> open_directory_no_symlinks(const std::string& path, const std::string& what,
                                            const std::string& why) {
    UniqueFd dir(::open(path.starts_with("/") ? "/" : ".", O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!dir) return sys_error(what);
    for (const auto& part : path_components(path)) {
        int fd = ::openat(dir.get(), part.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
            const int error = errno;
            struct stat st {};
            if (::fstatat(dir.get(), part.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                S_ISLNK(st.st_mode))
                return plain_error(what + ": `" + part + "` is a symbolic link" + why);
            return sys_error(error, what + ": `" + part + "`");
        }
        dir.reset(fd);
    }
    return dir;
}

}  // namespace corral
