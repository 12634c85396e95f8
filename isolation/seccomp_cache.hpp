#pragma once
// A file cache of compiled seccomp programs, so a one-shot `corral run` does not pay libseccomp's
// compile (about a tenth of a `default` launch's CPU, docs/BENCHMARKS.md) on every run.
//
// The program is a pure function of the SeccompSpec and of the code that compiles it, so an entry
// is keyed by the whole spec written out canonically (name lists sorted, without repeats), the
// running binary's GNU build id (a rebuilt corral never reads an older build's program), the
// libseccomp version (a shared library can change under the same binary) and the kernel release
// and machine. Nothing in an
// entry is trusted blindly: the file must be a regular file owned by the caller in a directory
// only the caller can write, its full key must equal the one asked for (the hash in the file name
// only picks the file), its checksum must match and its length be a valid BPF program. Anything
// else is a miss: the program is compiled and the entry rewritten (write + rename), and a cache
// that cannot be written is simply not used. A cache never changes what a filter does.

#include <linux/filter.h>

#include <optional>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "policies/policy.hpp"

namespace corral {

/// Where this caller's cache lives: /run/corral/cache for root, $XDG_RUNTIME_DIR/corral-cache
/// for other users when that directory is theirs; nullopt (no cache) otherwise.
std::optional<std::string> default_seccomp_cache_dir();

/// The exact key of `spec`'s entry: format version, build id, kernel release, machine and the
/// canonical spec. Empty when the binary has no build id (then nothing is cached).
std::string seccomp_cache_key(const SeccompSpec& spec);

/// The marked program for `spec` (compile_marked_seccomp, seccomp_refusals.hpp): from
/// `cache_dir` when a valid entry for its key is there, else compiled and stored. Compile errors
/// are returned as compile_marked_seccomp's; cache errors never are.
Result<std::vector<sock_filter>> compile_seccomp_cached(
    const SeccompSpec& spec, const std::optional<std::string>& cache_dir);

}  // namespace corral
