#include "base/large_buffer.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <new>
#include <utility>

#include "base/file_io.hpp"

namespace corral {

std::size_t LargeBuffer::huge_page_size() {
    static const std::size_t size = [] {
        constexpr std::size_t kDefault = std::size_t{2} << 20;
        auto text = read_file("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size");
        if (!text) return kDefault;
        std::size_t value = 0;
        for (char c : *text) {
            if (c < '0' || c > '9') break;
            value = value * 10 + static_cast<std::size_t>(c - '0');
        }
        // A power of two of at least a page, or the default (a file we do not understand).
        return value >= 4096 && (value & (value - 1)) == 0 ? value : kDefault;
    }();
    return size;
}

LargeBuffer::LargeBuffer(std::size_t size) : size_(size) {
    if (size == 0) return;
    const std::size_t huge = huge_page_size();
    if (size < huge) {
        data_ = new char[size]();
        return;
    }
    // One huge page of slack so that an aligned start fits; the slack is unmapped again.
    const std::size_t whole = size + huge;
    void* mapped =
        ::mmap(nullptr, whole, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mapped == MAP_FAILED) throw std::bad_alloc();
    const auto start = reinterpret_cast<std::uintptr_t>(mapped);
    const std::uintptr_t aligned = (start + huge - 1) & ~(huge - 1);
    const std::size_t before = aligned - start;
    const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    const std::size_t kept = (size + page - 1) & ~(page - 1);
    if (before > 0) ::munmap(mapped, before);
    if (whole - before > kept)
        ::munmap(reinterpret_cast<void*>(aligned + kept), whole - before - kept);
    data_ = reinterpret_cast<char*>(aligned);
    mapped_size_ = kept;
    // Best effort: a kernel without THP (or with it "never") says EINVAL and the pages are small.
    advised_ = ::madvise(data_, mapped_size_, MADV_HUGEPAGE) == 0;
}

LargeBuffer::~LargeBuffer() {
    release();
}

LargeBuffer::LargeBuffer(LargeBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      mapped_size_(std::exchange(other.mapped_size_, 0)),
      advised_(std::exchange(other.advised_, false)) {}

LargeBuffer& LargeBuffer::operator=(LargeBuffer&& other) noexcept {
    if (this != &other) {
        release();
        data_ = std::exchange(other.data_, nullptr);
        size_ = std::exchange(other.size_, 0);
        mapped_size_ = std::exchange(other.mapped_size_, 0);
        advised_ = std::exchange(other.advised_, false);
    }
    return *this;
}

void LargeBuffer::release() noexcept {
    if (mapped_size_ != 0)
        ::munmap(data_, mapped_size_);
    else
        delete[] data_;
    data_ = nullptr;
    size_ = mapped_size_ = 0;
    advised_ = false;
}

}  // namespace corral
