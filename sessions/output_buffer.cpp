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
    LargeBuffer bigger(next);  // exact: its size is what tests and metrics see
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

OutputBuffer::Room OutputBuffer::room(std::size_t max) {
    Room room;
    const std::size_t n = storage_.size();
    if (cap_ == 0 || n != cap_) return room;           // keeps nothing, or still growing: append()
    if (!truncated()) max = std::min(max, n - size_);  // the first drop saves the head: append()
    max = std::min(max, n);
    if (max == 0) return room;
    const std::size_t tail = (head_ + size_) % n;
    const std::size_t first = std::min(max, n - tail);
    room.parts[0] = {storage_.data() + tail, first};
    room.parts[1] = {storage_.data(), max - first};
    room.count = max > first ? 2 : 1;
    return room;
}

void OutputBuffer::commit(std::size_t count) {
    const std::size_t n = storage_.size();
    if (count == 0 || n == 0) return;
    const std::size_t overflow = size_ + count > n ? size_ + count - n : 0;
    head_ = (head_ + overflow) % n;  // the oldest `overflow` bytes were written over
    size_ += count - overflow;
    total_ += count;
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

OutputBuffer::View OutputBuffer::view(uint64_t offset, std::size_t max) const {
    View view;
    if (offset >= end_offset()) {
        view.offset = end_offset();
        return view;
    }
    if (offset < start_offset()) {
        view.skipped = start_offset() - offset;
        offset = start_offset();
    }
    view.offset = offset;
    const std::size_t pos = static_cast<std::size_t>(offset - start_offset());
    const std::size_t count = std::min(max, size_ - pos);
    if (count == 0) return view;
    const std::size_t n = storage_.size();
    const std::size_t begin = (head_ + pos) % n;
    const std::size_t first = std::min(count, n - begin);
    view.parts[0] = std::string_view(storage_.data() + begin, first);
    view.parts[1] = std::string_view(storage_.data(), count - first);
    return view;
}

OutputBuffer::Slice OutputBuffer::read(uint64_t offset, std::size_t max) const {
    const View view = this->view(offset, max);
    Slice slice;
    slice.offset = view.offset;
    slice.skipped = view.skipped;
    slice.bytes.reserve(view.size());
    slice.bytes.append(view.parts[0]).append(view.parts[1]);
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
