#pragma once
// One path space (DESIGN.md): a path given to the file API means what it means to the session's
// processes. Absolute paths are paths inside the sandbox (/workspace/a.txt, /usr/share/doc);
// relative ones resolve against the session's (or a shell context's) working directory.
//
// A path is first normalized lexically (`.`, empty components and `..` go, and `..` at "/" stays
// at "/", as the kernel does), then served by one of two file services:
//   - beneath the workspace: the service rooted at the workspace directory itself, with the
//     daemon's rights over the session's own files (uploads are chowned to the session's user);
//   - anywhere else, only for a session with a mount namespace: the service rooted at the root
//     the session's processes see (/proc/<holder>/root), acting with an unprivileged identity, so
//     it reads and writes what a process of the session could and no more; a read-only part
//     refuses writes (EROFS).
// A session without a mount namespace sees the host's file system; its file API still reaches
// only its workspace (anything else is EXDEV, naming the path), since the daemon must not become
// a door to the host.
// Both services resolve with openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS): symlinks resolve
// inside their root, /proc magic links are refused, and a rename race cannot leave the root.

#include <memory>
#include <string>
#include <string_view>

#include "base/error.hpp"
#include "sessions/files/file_service.hpp"

namespace corral {

/// `path` made absolute against `cwd` (an absolute path) and normalized lexically. EINVAL for an
/// empty path or one with a NUL byte.
Result<std::string> normalize_sandbox_path(std::string_view path, std::string_view cwd);

/// Which service serves a path, and the normalized path to give it.
struct FileTarget {
    std::shared_ptr<FileService> service;
    std::string path;  ///< absolute, normalized (what the processes would open)
};

/// The session's path space (see the file comment).
class PathSpace {
  public:
    PathSpace() = default;
    /// `workspace`: the workspace's path inside the sandbox; `sandbox` may be null (no mount
    /// namespace). `host_view` names, for messages, what a session without one is confined to.
    PathSpace(std::string workspace, std::shared_ptr<FileService> workspace_files,
              std::shared_ptr<FileService> sandbox_files);

    /// Maps a client path (relative ones against `cwd`) onto its service.
    Result<FileTarget> resolve(std::string_view path, std::string_view cwd) const;
    /// The workspace's service.
    const std::shared_ptr<FileService>& workspace_files() const { return workspace_files_; }

  private:
    std::string workspace_;
    std::shared_ptr<FileService> workspace_files_;
    std::shared_ptr<FileService> sandbox_files_;
};

}  // namespace corral
