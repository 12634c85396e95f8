// Streamed JSON bodies (issue 12 item 3) are byte for byte what dump_json writes for the same
// value, whatever the pieces: clients that read normally see no change.
#include "supervisor/daemon/json_stream.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string>

#include "supervisor/daemon/json_fields.hpp"

namespace corral::daemon {
namespace {

std::string drain(const PieceSource& source, size_t* pieces = nullptr) {
    std::string out;
    size_t n = 0;
    for (bool more = true; more; ++n) more = source(out);
    if (pieces) *pieces = n;
    return out;
}

/// Raw bytes in pieces of `size` (odd sizes cut characters and base64 groups).
ByteSource in_pieces(std::string bytes, size_t size) {
    return [bytes = std::move(bytes), size, at = size_t{0}](std::string& out) mutable {
        const size_t n = std::min(size, bytes.size() - at);
        out.append(bytes, at, n);
        at += n;
        return at < bytes.size();
    };
}

std::string random_bytes(std::mt19937& rng, size_t size, bool text_like) {
    // Mostly ASCII with UTF-8 characters, control bytes and (when not text_like) stray bytes.
    static const std::vector<std::string> parts = {
        "a",  "Z",    " ",        "\n",       "\t",           "\"",
        "\\", "\x01", "\x1b[31m", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80"};
    static const std::vector<std::string> broken = {"\xff", "\xc3", "\xe2\x82", "\x80",
                                                    "\xed\xa0\x80"};
    std::string out;
    while (out.size() < size) {
        if (!text_like && rng() % 7 == 0)
            out += broken[rng() % broken.size()];
        else
            out += parts[rng() % parts.size()];
    }
    return out;
}

TEST(JsonStream, PlaceholdersAreReplacedByTheirSourcesInDumpOrder) {
    std::vector<PieceSource> sources;
    sources.push_back([](std::string& out) {
        out += "\"first\"";
        return false;
    });
    sources.push_back([](std::string& out) {
        out += "2";
        return false;
    });
    const nlohmann::json value = {{"b", streamed(1)}, {"a", streamed(0)}, {"c", {1, "x", nullptr}}};
    EXPECT_EQ(drain(streamed_json(value, std::move(sources))),
              dump_json({{"b", 2}, {"a", "first"}, {"c", {1, "x", nullptr}}}) + "\n");
}

TEST(JsonStream, ValuesWithoutPlaceholdersAreDumpJsonsBytes) {
    const nlohmann::json value = {{"empty", nlohmann::json::object()},
                                  {"list", nlohmann::json::array()},
                                  {"nested", {{"k\"ey", {1.5, -3, true, "caf\xc3\xa9\n"}}}},
                                  {"bad", std::string("\xff")}};
    EXPECT_EQ(drain(streamed_json(value, {})), dump_json(value) + "\n");
}

TEST(JsonStream, ArraysAreMadeElementByElementAsDumpWouldWriteThem) {
    size_t made = 0;
    const auto element = [&made](size_t i) {
        ++made;
        return nlohmann::json{{"i", i}, {"pad", std::string(1000, 'x')}};
    };
    nlohmann::json whole = nlohmann::json::array();
    for (size_t i = 0; i < 500; ++i)
        whole.push_back(nlohmann::json{{"i", i}, {"pad", std::string(1000, 'x')}});
    const PieceSource source = json_array_source(500, element);
    std::string first;
    ASSERT_TRUE(source(first));
    // One piece is about kResponsePiece: not the 500 KB array.
    EXPECT_LT(made, 500u);
    EXPECT_LE(first.size(), kResponsePiece + 2000);
    std::string rest = drain(source);
    EXPECT_EQ(first + rest, dump_json(whole));
    EXPECT_EQ(drain(json_array_source(0, element)), "[]");
}

TEST(JsonStream, TextReplacedTextAndBase64MatchDumpForAnyCuts) {
    std::mt19937 rng(12);
    for (int round = 0; round < 300; ++round) {
        const bool text_like = round % 2 == 0;
        const std::string bytes = random_bytes(rng, rng() % 3000, text_like);
        const size_t piece = 1 + rng() % 97;
        if (is_valid_utf8(bytes)) {
            EXPECT_EQ(drain(json_text_source(in_pieces(bytes, piece))), dump_json(bytes))
                << "round " << round;
        }
        EXPECT_EQ(drain(json_replaced_text_source(in_pieces(bytes, piece))),
                  dump_json(utf8_with_replacements(bytes)))
            << "round " << round;
        EXPECT_EQ(drain(json_base64_source(in_pieces(bytes, piece))),
                  dump_json(base64_encode(bytes)))
            << "round " << round;
        // The text-or-base64 choice over pieces is send_as_text's over the whole.
        TextCheck check;
        auto pieces = in_pieces(bytes, piece);
        std::string one;
        for (bool more = true; more;) {
            one.clear();
            more = pieces(one);
            check.feed(one);
        }
        EXPECT_EQ(check.as_text(), send_as_text(bytes)) << "round " << round;
    }
}

TEST(JsonStream, EmptyBytesAreAnEmptyString) {
    EXPECT_EQ(drain(json_text_source(in_pieces("", 4))), "\"\"");
    EXPECT_EQ(drain(json_base64_source(in_pieces("", 4))), "\"\"");
    EXPECT_EQ(drain(json_replaced_text_source(in_pieces("", 4))), "\"\"");
}

}  // namespace
}  // namespace corral::daemon
