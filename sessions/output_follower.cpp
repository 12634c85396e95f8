// Backpressure from live output readers (OutputFollower, output_follower.hpp): the pipes are read
// only as far as the bounded buffer can take without dropping bytes a follower has not had.
#include <algorithm>
#include <cstdint>

#include "sessions/process.hpp"

namespace corral {

// Posted, not called: a follower dies with its stream, and reading on may finish the record,
// whose callbacks should not run inside that teardown.
OutputFollower::~OutputFollower() {
    if (auto process = process_.lock()) {
        boost::asio::post(process->io_, [weak = process->weak_from_this()] {
            if (auto alive = weak.lock()) alive->resume_reading();
        });
    }
}

void OutputFollower::advance(uint64_t stdout_offset, uint64_t stderr_offset) {
    offsets_[0] = std::max(offsets_[0], stdout_offset);
    offsets_[1] = std::max(offsets_[1], stderr_offset);
    if (auto process = process_.lock()) process->resume_reading();
}

std::shared_ptr<OutputFollower> Process::follow(bool want_stdout, uint64_t stdout_offset,
                                                bool want_stderr, uint64_t stderr_offset) {
    std::shared_ptr<OutputFollower> follower(new OutputFollower());
    follower->process_ = weak_from_this();
    follower->wants_[0] = want_stdout;
    follower->wants_[1] = want_stderr;
    follower->offsets_[0] = stdout_offset;
    follower->offsets_[1] = stderr_offset;
    followers_.push_back(follower);
    return follower;
}

size_t Process::room_to_read(OutputStream stream) {
    const int index = stream == OutputStream::out ? 0 : 1;
    const OutputBuffer& buffer = reader(stream).buffer;
    std::erase_if(followers_, [](const auto& weak) { return weak.expired(); });
    // A cap of 0 keeps nothing: there is nothing a reader could miss by reading on.
    if (buffer.cap() == 0) return SIZE_MAX;
    uint64_t lowest = UINT64_MAX;
    for (const auto& weak : followers_) {
        auto follower = weak.lock();
        if (follower && follower->wants_[index])
            lowest = std::min(lowest, follower->offsets_[index]);
    }
    if (lowest == UINT64_MAX) return SIZE_MAX;
    // Appending n bytes keeps [end + n - cap, end + n): the follower's next byte must stay in.
    const uint64_t limit = lowest + buffer.cap();
    const uint64_t end = buffer.end_offset();
    return end >= limit ? 0 : static_cast<size_t>(std::min<uint64_t>(limit - end, SIZE_MAX));
}

void Process::resume_reading() {
    for (OutputStream stream : {OutputStream::out, OutputStream::err}) {
        StreamReader& source = reader(stream);
        if (source.paused && room_to_read(stream) > 0) {
            source.paused = false;
            read_more(stream);
        }
    }
}

}  // namespace corral
