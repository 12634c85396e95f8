// OutputBuffer: the bounded, offset-addressed record of one output stream.
#include "sessions/output_buffer.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace corral {
namespace {

// The byte at absolute offset `i` of the test streams: a fixed, non-periodic-looking pattern so an
// off-by-one in offsets shows up as a mismatch.
char pattern_byte(uint64_t i) {
    return static_cast<char>((i * 2654435761u) >> 13);
}

std::string pattern(uint64_t from, std::size_t count) {
    std::string out(count, '\0');
    for (std::size_t k = 0; k < count; ++k) out[k] = pattern_byte(from + k);
    return out;
}

TEST(OutputBuffer, KeepsEverythingUnderTheCap) {
    OutputBuffer buffer(64);
    buffer.append("hello ");
    buffer.append("world");
    EXPECT_EQ(buffer.total_written(), 11u);
    EXPECT_EQ(buffer.dropped(), 0u);
    EXPECT_FALSE(buffer.truncated());
    EXPECT_EQ(buffer.contents(), "hello world");
    auto slice = buffer.read(6, 100);
    EXPECT_EQ(slice.bytes, "world");
    EXPECT_EQ(slice.offset, 6u);
    EXPECT_EQ(slice.skipped, 0u);
}

TEST(OutputBuffer, KeepsTheLatestCapBytesAndCountsTheDropped) {
    OutputBuffer buffer(10);
    buffer.append("0123456789");
    buffer.append("abc");
    EXPECT_EQ(buffer.contents(), "3456789abc");
    EXPECT_EQ(buffer.total_written(), 13u);
    EXPECT_EQ(buffer.dropped(), 3u);
    EXPECT_TRUE(buffer.truncated());
    EXPECT_EQ(buffer.start_offset(), 3u);
    EXPECT_EQ(buffer.end_offset(), 13u);
    EXPECT_EQ(buffer.size(), 10u);
}

TEST(OutputBuffer, ReadFromADroppedOffsetResumesAtTheWindowAndSaysWhatWasSkipped) {
    OutputBuffer buffer(10);
    buffer.append("0123456789abcdef");  // retains "6789abcdef" at offsets 6..15
    auto slice = buffer.read(2, 3);
    EXPECT_EQ(slice.skipped, 4u);
    EXPECT_EQ(slice.offset, 6u);
    EXPECT_EQ(slice.bytes, "678");
}

TEST(OutputBuffer, ReadAtOrPastTheEndReturnsNothingAtTheEnd) {
    OutputBuffer buffer(10);
    buffer.append("abc");
    auto at_end = buffer.read(3, 10);
    EXPECT_TRUE(at_end.bytes.empty());
    EXPECT_EQ(at_end.offset, 3u);
    auto past = buffer.read(100, 10);
    EXPECT_TRUE(past.bytes.empty());
    EXPECT_EQ(past.offset, 3u);
    EXPECT_EQ(past.skipped, 0u);
}

TEST(OutputBuffer, ASingleWriteLargerThanTheCapKeepsItsTail) {
    OutputBuffer buffer(8);
    buffer.append("xy");
    buffer.append("ABCDEFGHIJKL");
    EXPECT_EQ(buffer.contents(), "EFGHIJKL");
    EXPECT_EQ(buffer.start_offset(), 6u);
    EXPECT_EQ(buffer.read(6, 2).bytes, "EF");
}

TEST(OutputBuffer, ZeroCapRetainsNothingButCounts) {
    OutputBuffer buffer(0);
    buffer.append("abcdef");
    EXPECT_EQ(buffer.total_written(), 6u);
    EXPECT_EQ(buffer.dropped(), 6u);
    EXPECT_TRUE(buffer.truncated());
    EXPECT_EQ(buffer.contents(), "");
    auto slice = buffer.read(0, 10);
    EXPECT_TRUE(slice.bytes.empty());
    EXPECT_EQ(slice.offset, 6u);
}

TEST(OutputBuffer, QuietStreamsAllocateLittle) {
    OutputBuffer buffer(16u << 20);
    buffer.append("one line\n");
    EXPECT_LE(buffer.memory_capacity(), 8192u);
}

TEST(OutputBuffer, Writing100MiBThroughA1MiBCapStaysBoundedWithExactOffsets) {
    const std::size_t cap = 1u << 20;
    const uint64_t total = 100ull << 20;
    OutputBuffer buffer(cap);
    uint64_t written = 0;
    // Odd chunk sizes so writes straddle the ring's wrap point at ever-different places.
    const std::size_t chunks[] = {1, 4093, 65537, 333, 1u << 20, 7, 200003};
    for (std::size_t i = 0; written < total; ++i) {
        std::size_t n = std::min<uint64_t>(chunks[i % std::size(chunks)], total - written);
        buffer.append(pattern(written, n));
        written += n;
        ASSERT_LE(buffer.memory_capacity(), cap);
        ASSERT_LE(buffer.memory_used(), cap + cap / 2);
        ASSERT_LE(buffer.size(), cap);
        if (i % 97 == 0) {
            // The window always holds exactly the latest min(cap, written) bytes.
            auto tail = buffer.read(buffer.start_offset(), 4096);
            ASSERT_EQ(tail.bytes, pattern(buffer.start_offset(), tail.bytes.size()));
        }
    }
    EXPECT_EQ(buffer.total_written(), total);
    EXPECT_EQ(buffer.dropped(), total - cap);
    EXPECT_EQ(buffer.start_offset(), total - cap);
    EXPECT_EQ(buffer.contents(), pattern(total - cap, cap));

    // The run result's excerpt: the stream's first half-cap and its last half-cap (issue 13.9).
    auto excerpt = buffer.excerpt();
    EXPECT_EQ(excerpt.head, pattern(0, cap / 2));
    EXPECT_EQ(excerpt.tail, pattern(total - (cap - cap / 2), cap - cap / 2));
    EXPECT_EQ(excerpt.omitted, total - cap);

    auto resumed = buffer.read(12345, 1000);
    EXPECT_EQ(resumed.offset, total - cap);
    EXPECT_EQ(resumed.skipped, total - cap - 12345);
    EXPECT_EQ(resumed.bytes, pattern(total - cap, 1000));

    auto last = buffer.read(total - 10, 100);
    EXPECT_EQ(last.offset, total - 10);
    EXPECT_EQ(last.bytes, pattern(total - 10, 10));
}

TEST(OutputBuffer, ExcerptIsTheWholeStreamUnderTheCap) {
    OutputBuffer buffer(16);
    buffer.append(pattern(0, 10));
    buffer.append(pattern(10, 6));  // exactly the cap: nothing dropped, no head saved
    auto excerpt = buffer.excerpt();
    EXPECT_EQ(excerpt.head, pattern(0, 16));
    EXPECT_TRUE(excerpt.tail.empty());
    EXPECT_EQ(excerpt.omitted, 0u);
    EXPECT_EQ(buffer.memory_used(), buffer.memory_capacity());
}

TEST(OutputBuffer, ExcerptKeepsHeadAndTailWhateverTheChunking) {
    // One write far beyond the cap, small writes that cross it, and a write that fills it exactly
    // and then one byte more: each must save the stream's own first bytes as the head.
    for (std::vector<std::size_t> chunks :
         {std::vector<std::size_t>{100}, {3, 3, 3, 3, 3, 3, 3, 3, 3, 3}, {16, 1}, {5, 40, 2}}) {
        OutputBuffer buffer(16);
        uint64_t written = 0;
        for (std::size_t n : chunks) {
            buffer.append(pattern(written, n));
            written += n;
        }
        auto excerpt = buffer.excerpt();
        EXPECT_EQ(excerpt.head, pattern(0, 8)) << chunks.size();
        EXPECT_EQ(excerpt.tail, pattern(written - 8, 8)) << chunks.size();
        EXPECT_EQ(excerpt.omitted, written - 16) << chunks.size();
        EXPECT_EQ(buffer.contents(), pattern(written - 16, 16)) << "ring unaffected";
    }
}

TEST(OutputBuffer, ReadsAcrossTheWrapPoint) {
    OutputBuffer buffer(16);
    for (int i = 0; i < 5; ++i) buffer.append(pattern(i * 7, 7));  // 35 bytes, wraps twice
    EXPECT_EQ(buffer.contents(), pattern(35 - 16, 16));
    for (uint64_t off = 19; off < 35; ++off) {
        auto slice = buffer.read(off, 5);
        EXPECT_EQ(slice.offset, off);
        EXPECT_EQ(slice.bytes, pattern(off, std::min<uint64_t>(5, 35 - off)));
    }
}

/// Writes `bytes` the way the daemon reads a pipe: into the ring's room where it offers one,
/// else through append(). Returns whether the room was used.
bool write_in_place(OutputBuffer& buffer, std::string_view bytes) {
    OutputBuffer::Room room = buffer.room(bytes.size());
    if (room.count == 0) {
        buffer.append(bytes);
        return false;
    }
    std::size_t copied = 0;
    for (int i = 0; i < room.count; ++i) {
        std::memcpy(room.parts[i].iov_base, bytes.data() + copied, room.parts[i].iov_len);
        copied += room.parts[i].iov_len;
    }
    buffer.commit(copied);
    if (copied < bytes.size()) buffer.append(bytes.substr(copied));
    return true;
}

TEST(OutputBuffer, WritesInPlaceOnlyOnceGrownAndAfterTheHeadWasSaved) {
    OutputBuffer buffer(16);
    EXPECT_EQ(buffer.room(4).count, 0) << "still growing: append()";
    buffer.append(pattern(0, 12));
    buffer.append(pattern(12, 4));  // storage now 16 bytes, full, nothing dropped yet
    EXPECT_EQ(buffer.room(4).count, 0) << "the first drop saves the head: append()";
    buffer.append(pattern(16, 1));
    OutputBuffer::Room room = buffer.room(100);
    EXPECT_EQ(room.parts[0].iov_len + room.parts[1].iov_len, 16u) << "at most the cap";
    EXPECT_EQ(OutputBuffer(0).room(4).count, 0) << "a cap of 0 keeps nothing";
}

TEST(OutputBuffer, InPlaceWritesKeepOffsetsContentsAndTheHead) {
    // Chunk sizes that wrap the ring at every position, against the same stream appended.
    for (std::size_t chunk : {1u, 3u, 5u, 7u, 16u, 17u}) {
        OutputBuffer in_place(16), appended(16);
        uint64_t written = 0;
        bool used_room = false;
        while (written < 200) {
            used_room = write_in_place(in_place, pattern(written, chunk)) || used_room;
            appended.append(pattern(written, chunk));
            written += chunk;
        }
        EXPECT_TRUE(used_room) << chunk;
        EXPECT_EQ(in_place.total_written(), written) << chunk;
        EXPECT_EQ(in_place.start_offset(), appended.start_offset()) << chunk;
        EXPECT_EQ(in_place.contents(), appended.contents()) << chunk;
        EXPECT_EQ(in_place.excerpt().head, pattern(0, 8)) << chunk;
        EXPECT_EQ(in_place.excerpt().tail, appended.excerpt().tail) << chunk;
    }
}

TEST(OutputBuffer, ARingOnHugePagesKeepsTheSameBytes) {
    // A cap past the huge page size: the storage grows from the heap into a mapping of its own
    // (base/large_buffer.hpp) and wraps there; in place and appended agree byte for byte.
    const std::size_t cap = LargeBuffer::huge_page_size() + 4096 * 3 + 5;
    OutputBuffer in_place(cap), appended(cap);
    const std::size_t chunk = 65536 + 17;  // wraps at a different position each round
    uint64_t written = 0;
    while (written < 3 * cap) {
        const std::string bytes = pattern(written, chunk);
        write_in_place(in_place, bytes);
        appended.append(bytes);
        written += chunk;
    }
    EXPECT_EQ(in_place.memory_capacity(), cap) << "exactly the cap, not the mapping's rounding";
    // On the huge-page mapping wherever the host gives one to a buffer of that size (false on
    // both sides where THP is absent or "never").
    EXPECT_EQ(in_place.memory_on_huge_pages(),
              LargeBuffer(LargeBuffer::huge_page_size()).huge_page_advised());
    EXPECT_EQ(in_place.start_offset(), written - cap);
    EXPECT_EQ(in_place.contents(), pattern(written - cap, cap));
    EXPECT_EQ(in_place.contents(), appended.contents());
    EXPECT_EQ(in_place.excerpt().head, pattern(0, cap / 2));
    const auto view = in_place.view(written - 100, 1000);
    EXPECT_EQ(std::string(view.parts[0]) + std::string(view.parts[1]), pattern(written - 100, 100));
}

TEST(OutputBuffer, ViewsAreTheBytesReadWouldCopy) {
    OutputBuffer buffer(16);
    for (int i = 0; i < 5; ++i) buffer.append(pattern(i * 7, 7));  // 35 bytes, wraps twice
    for (uint64_t off = 10; off < 36; ++off) {
        auto view = buffer.view(off, 9);
        auto slice = buffer.read(off, 9);
        EXPECT_EQ(view.offset, slice.offset) << off;
        EXPECT_EQ(view.skipped, slice.skipped) << off;
        EXPECT_EQ(std::string(view.parts[0]) + std::string(view.parts[1]), slice.bytes) << off;
    }
}

}  // namespace
}  // namespace corral
