#pragma once
// A program held in memory, sealed, to be executed by descriptor (execveat AT_EMPTY_PATH): how
// corrald runs its launch zygote (launch_zygote.hpp) from the copy of corrald-launch it carries,
// with no second file on disk that an installation could miss or anyone with write access to its
// directory could replace.
//
// Sealed (F_SEAL_WRITE, SHRINK, GROW, and SEAL itself) before anyone executes it: nothing, not
// even root through /proc/<pid>/fd, can change the bytes afterwards, as runc's copy of itself in a
// sealed memfd guards against CVE-2019-5736 (a container overwriting the runtime's binary).
#include <span>

#include "base/error.hpp"
#include "base/unique_fd.hpp"

namespace corral {

/// A close-on-exec memfd named `name` holding `bytes`, sealed against every change. Errors name
/// the step (a kernel without memfd sealing, or with vm.memfd_noexec = 2, refuses one).
Result<UniqueFd> sealed_executable(std::span<const unsigned char> bytes, const char* name);

}  // namespace corral
