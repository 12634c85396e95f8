#include "policies/units.hpp"

#include <gtest/gtest.h>

namespace corral {
namespace {

using std::chrono::hours;
using std::chrono::minutes;
using std::chrono::seconds;

TEST(ParseSize, ReadsBinaryAndDecimalUnits) {
    EXPECT_EQ(parse_size("512Mi"), 512ull << 20);
    EXPECT_EQ(parse_size("2G"), 2'000'000'000ull);
    EXPECT_EQ(parse_size("2Gi"), 2ull << 30);
    EXPECT_EQ(parse_size("64k"), 64'000ull);
    EXPECT_EQ(parse_size("64K"), 64'000ull);
    EXPECT_EQ(parse_size("64Ki"), 64ull << 10);
    EXPECT_EQ(parse_size("1Ti"), 1ull << 40);
    EXPECT_EQ(parse_size("3T"), 3'000'000'000'000ull);
    EXPECT_EQ(parse_size("1mi"), 1ull << 20);  // the prefix letter's case is ignored
}

TEST(ParseSize, PlainNumberIsBytes) {
    EXPECT_EQ(parse_size("1024"), 1024u);
    EXPECT_EQ(parse_size("0"), 0u);
    EXPECT_EQ(parse_size("17B"), 17u);
}

TEST(ParseSize, AcceptsTrailingByteSuffix) {
    EXPECT_EQ(parse_size("512MiB"), 512ull << 20);
    EXPECT_EQ(parse_size("2GB"), 2'000'000'000ull);
}

TEST(ParseSize, AcceptsFractionsOnlyWhenWhole) {
    EXPECT_EQ(parse_size("1.5Gi"), 3ull << 29);
    EXPECT_EQ(parse_size("0.5k"), 500u);
    EXPECT_EQ(parse_size("1.0001k"), std::nullopt);  // 1000.1 bytes: not rounded silently
    EXPECT_EQ(parse_size("1.5"), std::nullopt);
}

TEST(ParseSize, RejectsMalformedText) {
    for (const char* bad : {"", "Mi", "-1", "+1", "12XB", "1.", ".5k", "1 Mi", "1MiMi", "1e6",
                            "1Bi", "0x10", "1..5k", " 1"}) {
        EXPECT_EQ(parse_size(bad), std::nullopt) << bad;
    }
}

TEST(ParseSize, RejectsOverflow) {
    EXPECT_EQ(parse_size("18446744073709551615"), UINT64_MAX);
    EXPECT_EQ(parse_size("18446744073709551616"), std::nullopt);
    EXPECT_EQ(parse_size("16Ei"), std::nullopt);
    EXPECT_EQ(parse_size("20000000Ti"), std::nullopt);
}

TEST(ParseDuration, ReadsEachUnitAndCombinations) {
    EXPECT_EQ(parse_duration("30s"), seconds(30));
    EXPECT_EQ(parse_duration("10m"), minutes(10));
    EXPECT_EQ(parse_duration("1h30m"), minutes(90));
    EXPECT_EQ(parse_duration("250ms"), Millis(250));
    EXPECT_EQ(parse_duration("1d"), hours(24));
    EXPECT_EQ(parse_duration("1h2m3s4ms"), hours(1) + minutes(2) + seconds(3) + Millis(4));
    EXPECT_EQ(parse_duration("1.5s"), Millis(1500));
    EXPECT_EQ(parse_duration("0"), Millis(0));
    EXPECT_EQ(parse_duration("0s"), Millis(0));
}

TEST(ParseDuration, RejectsPlainNumbersAndDisorder) {
    for (const char* bad : {"", "30", "s", "-5s", "30m1h", "1m1m", "1ms5s", "5 s", "5sec", "1w",
                            "0.0001s", "1h30", "ms"}) {
        EXPECT_EQ(parse_duration(bad), std::nullopt) << bad;
    }
}

TEST(ParseDuration, RejectsOverflow) {
    EXPECT_EQ(parse_duration("99999999999999999999d"), std::nullopt);
    EXPECT_EQ(parse_duration("200000000000000d"), std::nullopt);
}

TEST(FormatSize, UsesLargestExactUnit) {
    EXPECT_EQ(format_size(0), "0");
    EXPECT_EQ(format_size(512ull << 20), "512Mi");
    EXPECT_EQ(format_size(3ull << 29), "1536Mi");
    EXPECT_EQ(format_size(2'000'000'000ull), "2G");
    EXPECT_EQ(format_size(64'000), "64k");
    EXPECT_EQ(format_size(1'024'000), "1000Ki");  // binary wins at the same scale
    EXPECT_EQ(format_size(1023), "1023");
    EXPECT_EQ(format_size(1ull << 40), "1Ti");
}

TEST(FormatDuration, ComposesUnitsLargestFirst) {
    EXPECT_EQ(format_duration(Millis(0)), "0");
    EXPECT_EQ(format_duration(minutes(90)), "1h30m");
    EXPECT_EQ(format_duration(Millis(250)), "250ms");
    EXPECT_EQ(format_duration(hours(49)), "2d1h");
    EXPECT_EQ(format_duration(Millis(61'001)), "1m1s1ms");
}

TEST(Units, FormattedValuesParseBack) {
    const uint64_t sizes[] = {0, 1, 1023, 1024, 1536, 64'000, 5ull << 30, 123'456'789, UINT64_MAX};
    for (uint64_t bytes : sizes) {
        EXPECT_EQ(parse_size(format_size(bytes)), bytes) << bytes;
    }
    for (long ms : {0L, 1L, 999L, 1000L, 61'001L, 5'400'000L, 90'061'001L}) {
        EXPECT_EQ(parse_duration(format_duration(Millis(ms))), Millis(ms)) << ms;
    }
}

}  // namespace
}  // namespace corral
