#include "sessions/output_buffer.hpp"

#include <algorithm>
#include <cstring>

namespace corral {

OutputBuffer::OutputBuffer(std::size_t cap) : cap_(cap) {}

// Grows storage (while still linear: head_ == 0 until the ring is full) so `incoming` more bytes
// fit, doubling to amortise, never past cap_. Once storage_ is cap_ bytes it never grows again.
void OutputBuffer::grow_for(std::size_t incoming) {
    std::size_t wanted = std::min(cap_, size_ + incoming);
    if (wanted <= storage_.size()) return;
    std::size_t next = std::max<std::size_t>(storage_.size() * 2, 4096);
    next = std::min(cap_, std::max(next, wanted));
    std::vector<char> bigger;
    bigger.reserve(next);  // exact: capacity() is what tests and metrics see
    bigger.resize(next);
    copy_out(0, size_, bigger.data());
    storage_ = std::move(bigger);
    head_ = 0;
}

// Called before an append that drops bytes for the first time: until then the ring holds the
// stream from offset 0, so its first cap_/2 bytes (topped up from `incoming` if the ring holds
// fewer) are the stream's head.
void OutputBuffer::save_head(std::string_view incoming) {
    const std::size_t want = cap_ / 2;
    const std::size_t from_ring = std::min(want, size_);
    first_.reserve(want);
    first_.resize(from_ring);
    copy_out(0, from_ring, first_.data());
    first_.append(incoming.substr(0, want - from_ring));
}

void OutputBuffer::append(std::string_view bytes) {
    if (cap_ == 0) {
        total_ += bytes.size();
        return;
    }
    if (total_ == size_ && size_ + bytes.size() > cap_) save_head(bytes);
    total_ += bytes.size();
    if (bytes.size() >= cap_) {
        // Only the last cap_ bytes of this write survive; everything retained before is dropped.
        bytes.remove_prefix(bytes.size() - cap_);
        grow_for(cap_);
        std::memcpy(storage_.data(), bytes.data(), cap_);
        head_ = 0;
        size_ = cap_;
        return;
    }
    grow_for(bytes.size());
    const std::size_t n = storage_.size();
    std::size_t overflow = size_ + bytes.size() > n ? size_ + bytes.size() - n : 0;
    head_ = (head_ + overflow) % n;  // drop the oldest `overflow` bytes
    size_ -= overflow;
    std::size_t tail = (head_ + size_) % n;
    std::size_t first = std::min(bytes.size(), n - tail);
    std::memcpy(storage_.data() + tail, bytes.data(), first);
    std::memcpy(storage_.data(), bytes.data() + first, bytes.size() - first);
    size_ += bytes.size();
}

// Copies `count` retained bytes starting `logical_pos` bytes after the oldest one.
void OutputBuffer::copy_out(std::size_t logical_pos, std::size_t count, char* out) const {
    if (count == 0) return;
    const std::size_t n = storage_.size();
    std::size_t begin = (head_ + logical_pos) % n;
    std::size_t first = std::min(count, n - begin);
    std::memcpy(out, storage_.data() + begin, first);
    std::memcpy(out + first, storage_.data(), count - first);
}

OutputBuffer::Slice OutputBuffer::read(uint64_t offset, std::size_t max) const {
    Slice slice;
    if (offset >= end_offset()) {
        slice.offset = end_offset();
        return slice;
    }
    if (offset < start_offset()) {
        slice.skipped = start_offset() - offset;
        offset = start_offset();
    }
    slice.offset = offset;
    std::size_t pos = static_cast<std::size_t>(offset - start_offset());
    std::size_t count = std::min(max, size_ - pos);
    slice.bytes.resize(count);
    copy_out(pos, count, slice.bytes.data());
    return slice;
}

std::string OutputBuffer::contents() const {
    std::string out(size_, '\0');
    copy_out(0, size_, out.data());
    return out;
}

OutputBuffer::Excerpt OutputBuffer::excerpt() const {
    Excerpt excerpt;
    if (!truncated()) {
        excerpt.head = contents();
        return excerpt;
    }
    excerpt.head = first_;
    const std::size_t tail = std::min(size_, cap_ - first_.size());
    excerpt.tail.resize(tail);
    copy_out(size_ - tail, tail, excerpt.tail.data());
    excerpt.omitted = total_ - excerpt.head.size() - excerpt.tail.size();
    return excerpt;
}

}  // namespace corral
