// LargeBuffer: zeroed bytes of a fixed size; from the huge page size on, a mapping of its own
// advised to use transparent huge pages (the output ring's storage, issue 18).
#include "base/large_buffer.hpp"

#include <gtest/gtest.h>

#include <sys/mman.h>

#include <cerrno>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

namespace corral {
namespace {

/// The host's THP mode, the bracketed word of /sys/kernel/mm/transparent_hugepage/enabled
/// ("" when the kernel has no THP).
std::string thp_mode() {
    std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto open = text.find('['), close = text.find(']');
    if (open == std::string::npos || close == std::string::npos) return "";
    return text.substr(open + 1, close - open - 1);
}

/// The kernel's own word on the mapping that holds `address`: its smaps "THPeligible" field
/// (-1 when the mapping or the field is not found).
int thp_eligible(const void* address) {
    std::ifstream smaps("/proc/self/smaps");
    const auto at = reinterpret_cast<std::uintptr_t>(address);
    std::string line;
    bool inside = false;
    while (std::getline(smaps, line)) {
        std::uintptr_t start = 0, end = 0;
        char dash = 0;
        std::istringstream range(line);
        if (range >> std::hex >> start >> dash >> end && dash == '-' &&
            line.find(':') > line.find(' ')) {
            inside = start <= at && at < end;
            continue;
        }
        if (inside && line.rfind("THPeligible:", 0) == 0) return std::stoi(line.substr(12));
    }
    return -1;
}

TEST(LargeBuffer, SmallSizesComeFromTheHeapZeroed) {
    LargeBuffer buffer(1000);
    ASSERT_NE(buffer.data(), nullptr);
    EXPECT_EQ(buffer.size(), 1000u);
    EXPECT_FALSE(buffer.huge_page_advised());
    for (std::size_t i = 0; i < buffer.size(); ++i) ASSERT_EQ(buffer.data()[i], 0) << i;
    EXPECT_TRUE(LargeBuffer().empty());
    EXPECT_EQ(LargeBuffer(0).data(), nullptr);
}

TEST(LargeBuffer, FromTheHugePageSizeOnItIsAnAlignedMappingTheKernelMayBackWithHugePages) {
    const std::size_t huge = LargeBuffer::huge_page_size();
    ASSERT_GE(huge, 4096u);
    ASSERT_EQ(huge & (huge - 1), 0u) << "a power of two";
    LargeBuffer buffer(2 * huge + 12345);  // not a multiple of anything
    ASSERT_NE(buffer.data(), nullptr);
    EXPECT_EQ(buffer.size(), 2 * huge + 12345);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(buffer.data()) % huge, 0u)
        << "aligned, so whole huge pages fit from its first byte";
    // Zeroed, and every byte (to the last) is ours to write.
    EXPECT_EQ(buffer.data()[0], 0);
    EXPECT_EQ(buffer.data()[buffer.size() - 1], 0);
    buffer.data()[buffer.size() - 1] = 'x';
    const std::string mode = thp_mode();
    if (mode.empty() || mode == "never") {
        EXPECT_EQ(thp_eligible(buffer.data()), 0) << "THP is " << (mode.empty() ? "absent" : mode);
        GTEST_SKIP() << "no transparent huge pages on this host (" << mode << ")";
    }
    EXPECT_TRUE(buffer.huge_page_advised());
    EXPECT_EQ(thp_eligible(buffer.data()), 1) << "the kernel's smaps says the mapping may use them";
}

TEST(LargeBuffer, MovesOwnershipAndUnmapsOnce) {
    const std::size_t huge = LargeBuffer::huge_page_size();
    LargeBuffer first(huge);
    first.data()[7] = 'a';
    char* const bytes = first.data();
    LargeBuffer second(std::move(first));
    EXPECT_EQ(first.data(), nullptr);
    EXPECT_EQ(first.size(), 0u);
    EXPECT_EQ(second.data(), bytes);
    EXPECT_EQ(second.data()[7], 'a');
    LargeBuffer third(10);
    third = std::move(second);  // frees third's heap bytes, takes the mapping
    EXPECT_EQ(third.data(), bytes);
    EXPECT_EQ(third.size(), huge);
    third = LargeBuffer();  // unmaps it
    EXPECT_EQ(third.data(), nullptr);
    // mincore() says ENOMEM for an address nothing maps; nothing between the unmapping and it
    // allocates, so the range cannot have been mapped again meanwhile.
    unsigned char resident = 0;
    errno = 0;
    EXPECT_EQ(::mincore(bytes, 1, &resident), -1);
    EXPECT_EQ(errno, ENOMEM) << "the mapping is gone";
}

}  // namespace
}  // namespace corral
