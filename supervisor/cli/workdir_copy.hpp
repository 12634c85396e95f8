#pragma once
// `workdir.from: copy` for `corral run`: the job directory copied into a tmpfs of the policy's
// size, and the declared outputs copied back when the job has ended.
//
// The tmpfs is mounted in a private mount namespace of corral's own (so the host never sees it,
// not even if corral is killed), at a fresh 0700 directory that the sandbox's holder binds at
// workdir.mount. Once the sandbox holds it, corral keeps only a descriptor of its root and
// removes the directory: nothing of it remains on the host's file system.
//
// Copying back reads what an untrusted job wrote, as root, into the caller's checkout. So it
// walks descriptors, never path strings: nothing is followed out of the tmpfs (symlinks are
// copied as symlinks, never dereferenced, and only when their target resolves beneath the copy
// by openat2(RESOLVE_BENEATH), not by reading the text),
// FIFOs, sockets and devices are skipped, setuid/setgid bits are dropped, and what lands in the
// checkout belongs to the checkout's owner.

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "base/unique_fd.hpp"

namespace corral::cli {

/// Who owns what a copy creates; uid -1 keeps the creator's (ours).
struct CopyOwner {
    uid_t uid = static_cast<uid_t>(-1);
    gid_t gid = static_cast<gid_t>(-1);
};

/// What copying the outputs back did, for the report and the warnings.
struct OutputsCopied {
    std::vector<std::string> copied;   ///< outputs copied (as declared)
    std::vector<std::string> missing;  ///< outputs the job did not create
    std::vector<std::string> skipped;  ///< entries not copied (special files, escaping links)
    std::string error;                 ///< first failure, if the copy stopped
};

/// The tmpfs holding the job's copy.
class CopiedWorkdir {
  public:
    CopiedWorkdir() = default;
    /// Moves leave the source empty (its destructor must not detach the tmpfs).
    CopiedWorkdir(CopiedWorkdir&& other) noexcept;
    CopiedWorkdir& operator=(CopiedWorkdir&& other) noexcept;
    /// Detaches the tmpfs (if still attached) and removes its directory.
    ~CopiedWorkdir();

    /// Enters a private mount namespace (once per process), mounts a tmpfs of `size` bytes
    /// (kernel default when nullopt) owned by `owner`, and copies the directory `job_dir_fd`
    /// (any descriptor of it, O_PATH will do; `job_dir` names it in messages) into it with every
    /// copy owned by `owner`. ENOSPC says the job directory does not fit in workdir.size.
    static Result<CopiedWorkdir> create(int job_dir_fd, const std::string& job_dir,
                                        std::optional<uint64_t> size, CopyOwner owner);

    /// Host path of the tmpfs while it is attached (for the sandbox's bind).
    const std::string& mount_point() const { return mount_point_; }
    /// Gives the whole copy to `owner`: for a sandbox whose host uid is known only once it has
    /// started (a leased user-namespace range).
    Status give_to(CopyOwner owner) const;
    /// Once the sandbox has bound it: detaches corral's own mount and removes the directory.
    void detach();
    /// Copies `outputs` (relative paths) from the tmpfs into the directory `job_dir_fd` (the
    /// descriptor resolved before the job ran, never its path again: the job may have swapped
    /// the path for a symlink), owned by `owner`; `job_dir` names it in messages.
    OutputsCopied copy_back(const std::vector<std::string>& outputs, int job_dir_fd,
                            const std::string& job_dir, CopyOwner owner) const;

  private:
    std::string mount_point_;
    UniqueFd root_;  ///< O_DIRECTORY of the tmpfs root; outlives the mount point
};

}  // namespace corral::cli
