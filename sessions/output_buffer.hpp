#pragma once
// The bounded record of one output stream (stdout or stderr) of one process.
//
// Retention rule: a ring of the LATEST `cap` bytes, addressed by absolute byte offsets. Offset 0 is
// the first byte the process ever wrote to the stream; offsets never restart. When more than `cap`
// bytes have been written, the oldest ones are dropped and the retained window is
// [start_offset(), end_offset()). A reader that resumes from an offset that was dropped gets the
// bytes from start_offset() on and learns how many it skipped, so a resumed stream can say so
// instead of silently splicing.
//
// Why the latest bytes rather than "first half + last half" for the offset window: streams are
// resumable from an offset (the API's `offset`), which only works for one contiguous window; and
// for a failing job the end of the output (the error) is what matters most.
//
// The head as well (issue 13.9): a `run` result should show both the start of a long log (what the
// job was doing) and its end (the error). So at the moment the ring first drops a byte, the first
// cap/2 bytes of the stream are copied aside; excerpt() then gives that head plus the last
// cap - cap/2 bytes of the ring (cap bytes in all, `omitted` = total - cap in between). Offsets and
// read() are not affected: the head is not part of the offset window.
//
// Memory: storage grows on demand (geometrically) and never beyond `cap`, so thousands of quiet
// processes with a 16 MiB cap cost almost nothing, and a process that writes gigabytes costs `cap`
// plus the cap/2 head (which exists only once the stream has passed the cap). Storage of 2 MiB and
// more is a mapping of its own on transparent huge pages where the host allows them
// (base/large_buffer.hpp): every output byte is copied into it, and that copy is faster there.
//
// Thread-compatible: no internal locking (the daemon touches it from its one event-loop thread).

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/large_buffer.hpp"

namespace corral {

/// Bounded ring of the latest `cap` bytes of one output stream, with absolute offsets.
class OutputBuffer {
  public:
    /// Result of read(): bytes starting at absolute offset `offset`.
    struct Slice {
        std::string bytes;    ///< the bytes read (at most `max`)
        uint64_t offset = 0;  ///< absolute offset of bytes[0] (>= the requested offset)
        uint64_t skipped =
            0;  ///< bytes between the requested offset and `offset` that were dropped
    };

    /// Result of excerpt(): the first and the last part of the stream. When nothing was dropped,
    /// `head` is everything and `tail` is empty.
    struct Excerpt {
        std::string head;      ///< bytes from offset 0
        std::string tail;      ///< bytes up to end_offset()
        uint64_t omitted = 0;  ///< bytes between head and tail that are kept by neither
    };

    /// Result of view(): like a Slice, but the bytes stay where the ring keeps them (one span, or
    /// two where they wrap around), valid until the next append or commit.
    struct View {
        uint64_t offset = 0;   ///< absolute offset of the first byte
        uint64_t skipped = 0;  ///< as Slice::skipped
        std::string_view parts[2];
        std::size_t size() const { return parts[0].size() + parts[1].size(); }
    };

    /// Where the next write of up to `max` bytes may go in place (issue 18: a pipe is read
    /// straight into the ring, not through a scratch buffer and a copy): up to two spans of the
    /// storage, at most `max` bytes, to be followed by commit(n) with the bytes really written.
    /// The oldest retained bytes the spans cover are dropped by that commit. None (count 0) while
    /// the storage is still growing, or when this write would be the first drop (which saves the
    /// head first): append() then.
    struct Room {
        iovec parts[2] = {};
        int count = 0;
    };

    /// A buffer that retains at most `cap` bytes (cap 0 retains nothing, but still counts).
    explicit OutputBuffer(std::size_t cap);

    /// Appends bytes written by the process; drops the oldest retained bytes beyond the cap.
    void append(std::string_view bytes);

    /// See Room. The bytes there are not part of the buffer until commit().
    Room room(std::size_t max);
    /// Takes `count` (<= what room() offered) bytes written into the room as appended.
    void commit(std::size_t count);

    /// Bytes ever appended (== end_offset()).
    uint64_t total_written() const { return total_; }
    /// Bytes no longer retained (== start_offset()).
    uint64_t dropped() const { return total_ - size_; }
    /// True once any byte has been dropped.
    bool truncated() const { return dropped() > 0; }
    /// Absolute offset of the oldest retained byte.
    uint64_t start_offset() const { return dropped(); }
    /// Absolute offset one past the newest byte.
    uint64_t end_offset() const { return total_; }
    /// Number of bytes retained now (<= cap()).
    std::size_t size() const { return size_; }
    /// The configured cap (policy limits.output).
    std::size_t cap() const { return cap_; }
    /// Bytes of storage currently allocated; never exceeds cap(). For tests and metrics.
    std::size_t memory_capacity() const { return storage_.size(); }
    /// Whether the bytes are a mapping advised to use huge pages (base/large_buffer.hpp).
    bool memory_on_huge_pages() const { return storage_.huge_page_advised(); }

    /// Up to `max` bytes from absolute `offset`. An offset before start_offset() reads from
    /// start_offset() and reports `skipped`; an offset at or beyond end_offset() returns no bytes
    /// with `offset` = the requested offset clamped to end_offset() (the caller waits for more).
    Slice read(uint64_t offset, std::size_t max) const;
    /// read() without copying the bytes (View).
    View view(uint64_t offset, std::size_t max) const;
    /// All retained bytes, oldest first (what a `run` result's stdout/stderr carries).
    std::string contents() const;
    /// The stream's first cap/2 bytes and its last cap - cap/2 bytes once it passed the cap (what
    /// a `run` result carries); the whole stream while it did not.
    Excerpt excerpt() const;
    /// Bytes of storage currently allocated (ring plus head): at most cap() + cap()/2.
    std::size_t memory_used() const {
        return storage_.size() + (first_.empty() ? 0 : first_.capacity());
    }

  private:
    void grow_for(std::size_t incoming);
    void copy_out(std::size_t logical_pos, std::size_t count, char* out) const;
    void save_head(std::string_view incoming);

    std::size_t cap_;
    LargeBuffer storage_;   // ring once size_ == storage_.size() == cap_
    std::size_t head_ = 0;  // index in storage_ of the oldest retained byte
    std::size_t size_ = 0;  // retained bytes
    uint64_t total_ = 0;    // bytes ever appended
    std::string first_;     // the first cap_/2 bytes, saved when the ring first drops
};

}  // namespace corral
