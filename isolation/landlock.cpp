#include "isolation/landlock.hpp"

#include <fcntl.h>
#include <linux/landlock.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "base/openat2.hpp"

namespace corral {
namespace {

// Rights newer than Debian 12's <linux/landlock.h>; values are kernel ABI.
constexpr uint64_t kTruncate = 1ULL << 14;  // ABI 3
constexpr uint64_t kIoctlDev = 1ULL << 15;  // ABI 5

constexpr uint64_t kReadRights =
    LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR;
// The only rights a rule on a non-directory may carry (the kernel refuses others with EINVAL).
constexpr uint64_t kFileRights = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |
                                 LANDLOCK_ACCESS_FS_READ_FILE | kTruncate | kIoctlDev;

// The filesystem rights an ABI version handles.
uint64_t handled_rights(int abi) {
    uint64_t rights = (LANDLOCK_ACCESS_FS_MAKE_SYM << 1) - 1;  // ABI 1: bits 0..12
    if (abi >= 2) rights |= LANDLOCK_ACCESS_FS_REFER;
    if (abi >= 3) rights |= kTruncate;
    if (abi >= 5) rights |= kIoctlDev;
    return rights;
}

// Only the first member of landlock_ruleset_attr: newer kernels accept a shorter struct, and
// network rules and scopes are not part of corral's Landlock policy.
struct RulesetAttr {
    uint64_t handled_access_fs;
};

constexpr int kMaxRuleLinks = 40;  // as the kernel's MAXSYMLINKS

/// `path` (absolute) beneath `root_fd`, one component at a time, following a symbolic link only
/// where it lies on a read-only mount. The sandbox can make links only where it can write (its
/// workspace, its /tmp, a bound job directory an untrusted checkout filled), and one of those
/// could turn a rule on `/workspace/out` into one on `/` (stop 44's review). Links on read-only
/// mounts are the image's (merged-/usr's /bin, /lib64) and are followed, resolved inside the root.
/// -1 with errno (ELOOP: a link on a writable mount, or too many).
int open_in_root_following_image_links(int root_fd, std::string path) {
    for (int links = 0;;) {
        UniqueFd dir(fcntl(root_fd, F_DUPFD_CLOEXEC, 0));
        if (!dir) return -1;
        std::string walked;  // the components resolved so far, from the root
        bool restarted = false;
        size_t at = 0;
        while (at < path.size()) {
            const size_t slash = path.find('/', at);
            const size_t end = slash == std::string::npos ? path.size() : slash;
            const std::string name = path.substr(at, end - at);
            at = end + 1;
            if (name.empty() || name == ".") continue;
            if (name == "..") {  // policy paths are normal; a link's target may hold `..`
                walked = std::filesystem::path(walked).parent_path().string();
                if (walked == "/") walked.clear();
                path = walked + "/" + (at < path.size() ? path.substr(at) : "");
                restarted = true;
                break;
            }
            open_how how{};
            how.flags = O_PATH | O_NOFOLLOW | O_CLOEXEC;
            how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
            UniqueFd next(openat2_retrying(dir.get(), name.c_str(), how));
            if (!next) return -1;
            struct stat st {};
            if (fstat(next.get(), &st) != 0) return -1;
            if (S_ISLNK(st.st_mode)) {
                struct statvfs fs {};
                if (fstatvfs(dir.get(), &fs) != 0) return -1;
                if (!(fs.f_flag & ST_RDONLY) || ++links > kMaxRuleLinks) {
                    errno = ELOOP;
                    return -1;
                }
                char target[4096];
                const ssize_t n = readlinkat(next.get(), "", target, sizeof target - 1);
                if (n <= 0) return -1;
                const std::string link(target, static_cast<size_t>(n));
                const std::string rest = at < path.size() ? path.substr(at) : "";
                path = (link.front() == '/' ? link : walked + "/" + link) + "/" + rest;
                restarted = true;
                break;
            }
            walked += "/" + name;
            dir = std::move(next);
        }
        if (!restarted) return dir.release();
    }
}

/// `path` as the sandbox rooted at `root_fd` sees it (see above), or from our own root (-1).
int open_rule_path(const std::string& path, int root_fd) {
    if (root_fd < 0) return open(path.c_str(), O_PATH | O_CLOEXEC);
    return open_in_root_following_image_links(root_fd, path);
}

Status add_path_rule(int ruleset, const std::string& path, uint64_t rights, uint64_t handled,
                     const std::string& key, int root_fd) {
    UniqueFd fd(open_rule_path(path, root_fd));
    if (!fd && errno == ELOOP && root_fd >= 0)
        return sys_error(ELOOP, key + ": `" + path +
                                    "`: a symbolic link on the way lies where the sandbox can "
                                    "write, and such links are not followed");
    if (!fd) return sys_error(key + ": `" + path + "`");
    struct stat st {};
    if (fstat(fd.get(), &st) != 0) return sys_error(key + ": stat `" + path + "`");
    if (!S_ISDIR(st.st_mode)) rights &= kFileRights;
    landlock_path_beneath_attr rule{};
    rule.allowed_access = rights & handled;
    rule.parent_fd = fd.get();
    if (syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &rule, 0) != 0) {
        return sys_error(key + ": landlock_add_rule `" + path + "`");
    }
    return {};
}

}  // namespace

int landlock_abi_version() {
    long abi = syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
    return abi > 0 ? static_cast<int>(abi) : 0;
}

Result<UniqueFd> build_landlock_ruleset(const LandlockSpec& spec, int root_fd) {
    int abi = landlock_abi_version();
    if (abi == 0) return plain_error("landlock: not supported or disabled on this kernel");
    const uint64_t handled = handled_rights(abi);
    RulesetAttr attr{handled};
    UniqueFd ruleset(static_cast<int>(
        syscall(SYS_landlock_create_ruleset, &attr, sizeof(attr), 0)));  // fd is O_CLOEXEC
    if (!ruleset) return sys_error("landlock_create_ruleset");
    for (const std::string& path : spec.read) {
        auto added =
            add_path_rule(ruleset.get(), path, kReadRights, handled, "landlock.read", root_fd);
        if (!added) return std::move(added.error());
    }
    for (const std::string& path : spec.write) {
        auto added =
            add_path_rule(ruleset.get(), path, handled, handled, "landlock.write", root_fd);
        if (!added) return std::move(added.error());
    }
    return ruleset;
}

int landlock_restrict(int ruleset_fd) {
    return static_cast<int>(syscall(SYS_landlock_restrict_self, ruleset_fd, 0));
}

}  // namespace corral
