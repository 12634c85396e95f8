// The static `corral` is linked with the functions a launch executes side by side
// (supervisor/corral_text_order.txt, lld's --symbol-ordering-file; issue 18): one page fault per
// 64 KiB window of text a run touches was ~0.5 ms of a `corral run --policy none` on our VMs.
// This checks the built binary, with binutils' nm: the list still names the functions the build
// has (a list gone stale says to run scripts/corral-text-order.sh), and the link applied it (the
// listed functions sit together instead of across the whole text).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace {

const std::string kCorral = std::string(CORRAL_BINARY_DIR) + "/supervisor/corral";
const std::string kOrder = std::string(CORRAL_SOURCE_DIR) + "/supervisor/corral_text_order.txt";

struct Function {
    uint64_t address = 0;
    uint64_t size = 0;
};

/// The function symbols of `binary` (nm's T, t, W, i), the first of each name.
std::map<std::string, Function> functions_of(const std::string& binary) {
    std::map<std::string, Function> out;
    FILE* nm = ::popen(("nm -S --defined-only '" + binary + "' 2>/dev/null").c_str(), "r");
    if (nm == nullptr) return out;
    char line[4096];
    while (std::fgets(line, sizeof line, nm) != nullptr) {
        std::istringstream words(line);
        std::string address, size, type, name;
        if (!(words >> address >> size >> type >> name) || type.size() != 1 ||
            std::string("TtWi").find(type[0]) == std::string::npos)
            continue;
        out.emplace(name, Function{std::stoull(address, nullptr, 16), std::stoull(size, nullptr, 16)});
    }
    ::pclose(nm);
    return out;
}

TEST(CorralTextOrder, TheListNamesThisBuildsFunctionsAndTheLinkPlacedThemTogether) {
#if !defined(CORRAL_TEXT_ORDER_APPLIED)
    GTEST_SKIP() << "corral is not linked with its text order here (a dynamic corral, or no ld.lld)";
#else
    std::ifstream in(kOrder);
    ASSERT_TRUE(in) << kOrder;
    std::vector<std::string> listed;
    for (std::string line; std::getline(in, line);)
        if (!line.empty()) listed.push_back(line);
    ASSERT_GT(listed.size(), 100u) << "an empty list orders nothing";

    const auto functions = functions_of(kCorral);
    ASSERT_FALSE(functions.empty()) << "nm read no symbols of " << kCorral;
    std::vector<Function> present;
    for (const auto& name : listed)
        if (auto found = functions.find(name); found != functions.end())
            present.push_back(found->second);
    // A Release list read against other builds (RelWithDebInfo inlines a little differently)
    // names most of their functions still; far fewer means the code moved on without it.
    EXPECT_GE(present.size() * 4, listed.size() * 3)
        << present.size() << " of " << listed.size()
        << " listed functions are in this corral: run scripts/corral-text-order.sh";

    // Placed together: the middle 80 % of them (glibc's exit-time freeres functions live in a
    // section of their own, far away) within twice their own size. Linked without the list,
    // they spread over the whole 5 MB text.
    uint64_t total = 0;
    for (const auto& f : present) total += f.size;
    std::vector<uint64_t> addresses;
    for (const auto& f : present) addresses.push_back(f.address);
    std::sort(addresses.begin(), addresses.end());
    const uint64_t low = addresses[addresses.size() / 10];
    const uint64_t high = addresses[addresses.size() * 9 / 10];
    EXPECT_LE(high - low, 2 * total) << "the listed functions span " << (high - low)
                                     << " bytes of text for " << total << " bytes of code";
#endif
}

}  // namespace
