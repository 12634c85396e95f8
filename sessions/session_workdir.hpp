#pragma once
// A host directory a session works in (DESIGN.md "Working in an existing directory"):
// POST /v1/sessions {workdir} makes it the session's /workspace instead of a scratch directory.
//
// Only beneath the daemon's --allow-workdir roots, and resolved so that nothing can lead out of
// them: the root is opened first and the rest of the path is resolved from that descriptor with
// openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS), so `..` and symlinks (absolute, or relative
// ones that climb) that would leave the root are refused by the kernel (EXDEV), atomically
// against renames (the CVE-2018-15664 class: a path checked and then used again). The session
// keeps the descriptor and binds the directory from it (WorkdirBinding::host_fd), never from the
// path. The directory is the user's: the session never deletes it, and what the sandbox writes
// there belongs to the directory's owner (idmapped bind, isolation/sandbox.cpp).

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "base/unique_fd.hpp"

namespace corral {

/// A resolved workdir: the directory's descriptor and what it is.
struct BoundWorkdir {
    UniqueFd fd;            ///< O_PATH | O_DIRECTORY of the directory itself
    std::string host_path;  ///< its path on the host, as the kernel names the resolved directory
    std::string root;       ///< the --allow-workdir root it lies beneath
    uid_t owner_uid = 0;    ///< the directory's owner: uploads and sandbox writes belong to it
    gid_t owner_gid = 0;
};

/// Resolves `requested` (an absolute host path) beneath the longest of `roots` that contains it
/// lexically. EPERM when there are no roots or none contains it; EXDEV when `..` or a symlink
/// would leave the root; EINVAL for a relative path or a NUL byte; ENOENT / ENOTDIR as the
/// kernel says. Messages name the path and the roots.
Result<std::shared_ptr<const BoundWorkdir>> resolve_workdir(const std::vector<std::string>& roots,
                                                            const std::string& requested);

}  // namespace corral
