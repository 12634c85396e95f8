// The static `corral` and corrald's launch zygote are linked with the functions a launch executes
// side by side (supervisor/corral_text_order.txt and corrald_launch_text_order.txt, lld's
// --symbol-ordering-file; issue 18): one page fault per 64 KiB window of text a run touches was
// ~0.5 ms of a `corral run --policy none` on our VMs, and 6-7 of a daemon launch's child's.
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
const std::string kZygote = std::string(CORRAL_BINARY_DIR) + "/supervisor/corrald-launch";
const std::string kZygoteOrder =
    std::string(CORRAL_SOURCE_DIR) + "/supervisor/corrald_launch_text_order.txt";

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
        out.emplace(name,
                    Function{std::stoull(address, nullptr, 16), std::stoull(size, nullptr, 16)});
    }
    ::pclose(nm);
    return out;
}

/// The list at `order` names the functions of `binary` (at least `min_listed` of them, 3/4 of the
/// list present in this build) and the link placed them together.
void expect_applied(const std::string& binary, const std::string& order, size_t min_listed) {
    std::ifstream in(order);
    ASSERT_TRUE(in) << order;
    std::vector<std::string> listed;
    for (std::string line; std::getline(in, line);)
        if (!line.empty()) listed.push_back(line);
    ASSERT_GT(listed.size(), min_listed) << "an empty list orders nothing";

    const auto functions = functions_of(binary);
    ASSERT_FALSE(functions.empty()) << "nm read no symbols of " << binary;
    std::vector<Function> present;
    for (const auto& name : listed)
        if (auto found = functions.find(name); found != functions.end())
            present.push_back(found->second);
    // A Release list read against other builds (RelWithDebInfo inlines a little differently)
    // names most of their functions still; far fewer means the code moved on without it.
    EXPECT_GE(present.size() * 4, listed.size() * 3)
        << present.size() << " of " << listed.size() << " listed functions are in " << binary
        << ": run scripts/corral-text-order.sh";
    ASSERT_FALSE(present.empty());

    // Placed together: 80 % of them within twice their own size, in the narrowest window of
    // text that holds that many (glibc's exit-time freeres functions live in a section of their
    // own, far away, and may be a tenth of a short list). Linked without the list, they spread
    // over the whole text (5 MB in corral, 2.6 MB in the zygote).
    uint64_t total = 0;
    for (const auto& f : present) total += f.size;
    std::vector<uint64_t> addresses;
    for (const auto& f : present) addresses.push_back(f.address);
    std::sort(addresses.begin(), addresses.end());
    const size_t together = std::max<size_t>(1, addresses.size() * 8 / 10);
    uint64_t narrowest = UINT64_MAX;
    for (size_t i = 0; i + together <= addresses.size(); ++i)
        narrowest = std::min(narrowest, addresses[i + together - 1] - addresses[i]);
    EXPECT_LE(narrowest, 2 * total) << together << " of the listed functions span " << narrowest
                                    << " bytes of text at least, for " << total << " bytes of code";
}

TEST(CorralTextOrder, TheListNamesThisBuildsFunctionsAndTheLinkPlacedThemTogether) {
#if !defined(CORRAL_TEXT_ORDER_APPLIED)
    GTEST_SKIP()
        << "corral is not linked with its text order here (a dynamic corral, or no ld.lld)";
#else
    expect_applied(kCorral, kOrder, 100);
#endif
}

// The launch zygote's list (scripts/corral-text-order.sh --zygote): the code its forks run
// before their execve, a few windows of text instead of one per function.
TEST(CorralTextOrder, TheZygotesListNamesItsFunctionsAndTheLinkPlacedThemTogether) {
#if !defined(CORRAL_ZYGOTE_TEXT_ORDER_APPLIED)
    GTEST_SKIP() << "the zygote is not linked with its text order here (no static zygote, or no "
                    "ld.lld)";
#else
    expect_applied(kZygote, kZygoteOrder, 50);
#endif
}

}  // namespace
