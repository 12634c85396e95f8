#include "base/loop_scratch.hpp"

#include <memory>

namespace corral {

// On the heap, made at first use: a thread_local array lives in the static TLS block that glibc
// gives, zeroed and so resident, to EVERY thread of the process at its creation. It was 256 KiB
// in each session's two network threads of the time, threads that never read a pipe: 51 MB of
// corrald's 140 MB with 100 isolated sessions (DaemonMemory.CorraldsThreadsCarryNoLargeStaticTls).
std::span<std::byte> loop_scratch() {
    thread_local std::unique_ptr<std::byte[]> buffer;
    if (!buffer) buffer = std::make_unique_for_overwrite<std::byte[]>(kLoopScratchBytes);
    return {buffer.get(), kLoopScratchBytes};
}

}  // namespace corral
