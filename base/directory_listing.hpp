#pragma once
// Listing the subdirectories of a directory: cgroup trees (a cgroup's children are its
// subdirectories) and the daemon's state directory (one directory per session) are walked this
// way by recovery, adoption and the tests' leftover checks alike.

#include <string>
#include <vector>

namespace corral {

/// Names of the directories directly below `dir`, sorted (none when `dir` does not exist or
/// cannot be read). Symlinks to directories are not directories here: a walk never follows one.
std::vector<std::string> subdirectory_names(const std::string& dir);

}  // namespace corral
