#pragma once
// Walking a path that someone else may have rearranged: one component at a time from a
// directory descriptor, following no symbolic link (what openat2's RESOLVE_NO_SYMLINKS does,
// with an error that names the link). For paths corral uses as root where a sandboxed job may
// have planted links: `corral run --cwd`, `--report`, the outputs copied back.

#include <string>
#include <vector>

#include "base/error.hpp"
#include "base/unique_fd.hpp"

namespace corral {

/// The components of `path`, without empty ones and `.`; `..` stays (a walk applies it to the
/// directory it has reached, which is never a link).
std::vector<std::string> path_components(const std::string& path);

/// What a `..` leaves of `walked`, a path built as "/a/b" from the components walked so far
/// ("" is the root): its last component dropped, the root staying the root.
std::string drop_last_component(const std::string& walked);

/// Opens the directory `path` (absolute, or relative to the current directory) O_PATH, walking
/// it without following any symlink. A link on the way fails as "`what`: `PART` is a symbolic
/// link" followed by `why`; any other failure names `what` and the component.
Result<UniqueFd> open_directory_no_symlinks(const std::string& path, const std::string& what,
                                            const std::string& why);

}  // namespace corral
