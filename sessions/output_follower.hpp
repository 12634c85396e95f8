#pragma once
// Backpressure from a live reader of a process's output (an NDJSON stream). Part of the
// SessionManager API (follow_output); Process implements it.

#include <cstdint>
#include <memory>

namespace corral {

class Process;

/// A live reader of a process's output (an NDJSON stream), from Process::follow(). While it
/// exists, the process's pipes are read only as far as the buffer can hold without dropping bytes
/// this reader has not had: a fast writer then waits on its pipe, as it would on a terminal,
/// instead of losing output. Unfollowed output keeps the bounded-ring rule (latest bytes win).
/// Destroying the follower (the stream ended or its client went away) lets reading go on.
class OutputFollower {
  public:
    ~OutputFollower();
    OutputFollower(const OutputFollower&) = delete;
    OutputFollower& operator=(const OutputFollower&) = delete;
    /// The reader has had everything before these offsets.
    void advance(uint64_t stdout_offset, uint64_t stderr_offset);

  private:
    friend class Process;
    OutputFollower() = default;
    std::weak_ptr<Process> process_;
    bool wants_[2] = {false, false};
    uint64_t offsets_[2] = {0, 0};
};

}  // namespace corral
