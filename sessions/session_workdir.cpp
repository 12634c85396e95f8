#include "sessions/session_workdir.hpp"
#include "base/openat2.hpp"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <optional>

namespace corral {
namespace {

std::string without_trailing_slashes(std::string path) {
    while (path.size() > 1 && path.back() == '/') path.pop_back();
    return path;
}

/// The part of `path` below `root` ("" for the root itself), or nullopt when `path` is not
/// lexically beneath it.
std::optional<std::string> below(const std::string& root, const std::string& path) {
    if (root == "/") return path.substr(1);
    if (path.compare(0, root.size(), root) != 0) return std::nullopt;
    if (path.size() == root.size()) return std::string();
    if (path[root.size()] != '/') return std::nullopt;
    return path.substr(root.size() + 1);
}

std::string list(const std::vector<std::string>& roots) {
    std::string out;
    for (const auto& root : roots) out += (out.empty() ? "`" : ", `") + root + "`";
    return out;
}

}  // namespace

Result<std::shared_ptr<const BoundWorkdir>> resolve_workdir(const std::vector<std::string>& roots,
                                                            const std::string& requested) {
    const std::string what = "workdir `" + requested + "`";
    if (requested.find('\0') != std::string::npos)
        return sys_error(EINVAL, "workdir holds a NUL byte");
    if (requested.empty() || requested.front() != '/')
        return sys_error(EINVAL, what + ": must be an absolute host path");
    if (roots.empty())
        return sys_error(EPERM, what +
                                    ": this corrald allows no workdir (start it with "
                                    "--allow-workdir ROOT)");
    const std::string path = without_trailing_slashes(requested);
    std::string root;
    std::string rest;
    for (const auto& candidate : roots) {
        const std::string normal = without_trailing_slashes(candidate);
        auto remainder = below(normal, path);
        if (remainder && (root.empty() || normal.size() > root.size())) {
            root = normal;
            rest = *remainder;
        }
    }
    if (root.empty())
        return sys_error(EPERM,
                         what + ": not beneath an --allow-workdir root (" + list(roots) + ")");
    UniqueFd root_fd(::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!root_fd.valid()) return sys_error("open --allow-workdir root `" + root + "`");
    open_how how{};
    how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
    const std::string relative = rest.empty() ? "." : rest;
    const int fd = openat2_retrying(root_fd.get(), relative.c_str(), how);
    if (fd < 0) {
        const int code = errno;
        if (code == EXDEV)
            return sys_error(EXDEV, what +
                                        ": refused: `..` or a symlink leads out of the "
                                        "--allow-workdir root `" +
                                        root + "`");
        if (code == ELOOP)
            return sys_error(ELOOP, what +
                                        ": refused: goes through a /proc magic link or too "
                                        "many symbolic links");
        return sys_error(code, "open " + what);
    }
    auto bound = std::make_shared<BoundWorkdir>();
    bound->fd = UniqueFd(fd);
    struct stat st;
    if (::fstat(bound->fd.get(), &st) != 0) return sys_error("stat " + what);
    bound->owner_uid = st.st_uid;
    bound->owner_gid = st.st_gid;
    bound->root = root;
    // What the kernel resolved, not what was asked: a symlink inside the root is followed once,
    // here, and the session records (and, without a mount namespace, runs in) the real place.
    char target[4096];
    const std::string link = "/proc/self/fd/" + std::to_string(bound->fd.get());
    const ssize_t n = ::readlink(link.c_str(), target, sizeof target - 1);
    if (n <= 0) return sys_error("readlink " + link);
    bound->host_path.assign(target, static_cast<size_t>(n));
    return std::shared_ptr<const BoundWorkdir>(std::move(bound));
}

}  // namespace corral
