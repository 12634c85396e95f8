#pragma once
// A fixed-size, zero-filled array of bytes for buffers that can grow large (an output ring: 16 MiB
// by default). From the size of a transparent huge page on (2 MiB on x86-64) it is a mapping of
// its own, aligned to that size and advised MADV_HUGEPAGE, so it is backed by huge pages where
// the host allows them ("madvise", Debian's default, or "always"). Why: every byte of a process's
// output is copied from its pipe into the ring; on our VMs that copy ran ~1.6x faster into
// huge pages than into 4 KiB ones (nested paging makes each TLB miss a two-level walk; issue 18,
// docs/BENCHMARKS.md). Smaller sizes come from the heap, as a std::vector's would.
//
// Memory: the mapping is only reserved; pages (huge or not) are allocated as they are first
// written, so a large ring that is never filled costs what it holds, rounded up to 2 MiB.
//
// Zeroed on the heap too, though the ring writes every byte before it reads it: heap bytes may
// hold what an earlier allocation left (another session's output, a token), and a reader of a
// byte not yet written, a bug some day, must find zeroes and not those.

#include <cstddef>

namespace corral {

class LargeBuffer {
  public:
    LargeBuffer() = default;
    /// `size` zero bytes; throws std::bad_alloc when neither a mapping nor the heap has them.
    explicit LargeBuffer(std::size_t size);
    ~LargeBuffer();
    LargeBuffer(LargeBuffer&& other) noexcept;
    LargeBuffer& operator=(LargeBuffer&& other) noexcept;
    LargeBuffer(const LargeBuffer&) = delete;
    LargeBuffer& operator=(const LargeBuffer&) = delete;

    char* data() { return data_; }
    const char* data() const { return data_; }
    std::size_t size() const { return size_; }
    bool empty() const { return size_ == 0; }
    /// Whether the bytes are a mapping advised to use huge pages (for tests).
    bool huge_page_advised() const { return mapped_size_ != 0 && advised_; }

    /// The size from which a buffer is mapped on its own: the host's transparent huge page size
    /// (/sys/kernel/mm/transparent_hugepage/hpage_pmd_size), 2 MiB when it cannot be read.
    static std::size_t huge_page_size();

  private:
    void release() noexcept;

    char* data_ = nullptr;
    std::size_t size_ = 0;
    std::size_t mapped_size_ = 0;  // the mapping's length, from data_; 0: the bytes are the heap's
    bool advised_ = false;
};

}  // namespace corral
