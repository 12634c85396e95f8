#include "isolation/landlock.hpp"

#include <fcntl.h>
#include <linux/landlock.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
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

/// `path` as seen from `root_fd`, or from our own root (-1).
///
/// In the sandbox's root no symbolic link is followed: one the sandbox made (in its workspace or
/// its /tmp, before a restart re-adopts it, or in a bound host directory) could turn a rule on
/// `/workspace/out` into one on `/`, granting more than the policy says. A path with a link on the
/// way (merged-/usr's `/bin`, `/lib64`) is resolved as the host sees it instead: the sandbox's
/// system directories are the host's own bound read-only, so the host's resolution reaches the
/// same inodes, and a link only the sandbox has (made by it) leads nowhere on the host.
int open_rule_path(const std::string& path, int root_fd) {
    if (root_fd < 0) return open(path.c_str(), O_PATH | O_CLOEXEC);
    open_how how{};
    how.flags = O_PATH | O_CLOEXEC;
    how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS;
    const int fd = openat2_retrying(root_fd, path.c_str(), how);
    if (fd >= 0 || errno != ELOOP) return fd;
    return open(path.c_str(), O_PATH | O_CLOEXEC);
}

Status add_path_rule(int ruleset, const std::string& path, uint64_t rights, uint64_t handled,
                     const std::string& key, int root_fd) {
    UniqueFd fd(open_rule_path(path, root_fd));
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
