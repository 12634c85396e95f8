#pragma once
// One scratch buffer for the event loop: bytes read from the kernel are parsed or copied from it
// before the handler that read them returns (a process's pipe output into its OutputBuffer, a
// session resolver's datagram into a dns::Query). The loop runs one handler at a time, so one
// buffer serves every pipe and every session instead of an idle buffer per reader: one per
// session resolver was 64 KiB of corrald's heap each, 64 MB with 1,000 sessions, which every fork
// of corrald (a launch) copied page by page (issue 18).
//
// Only for code running on corrald's event loop thread (each thread that calls it gets a buffer
// of its own, as the tests' loops do). Its contents last until the caller returns to the loop:
// nothing may be kept in it across an async wait or a suspension, where another handler reuses
// it, and a caller holding contents must not call anything that uses it meanwhile.

#include <cstddef>
#include <span>

namespace corral {

/// The size of loop_scratch(): the largest pipe read the loop makes in one call (a DNS message,
/// at most 64 KiB, fits too).
inline constexpr size_t kLoopScratchBytes = 256 * 1024;

/// The calling thread's scratch buffer, kLoopScratchBytes long (see above for who may use it).
std::span<std::byte> loop_scratch();

}  // namespace corral
