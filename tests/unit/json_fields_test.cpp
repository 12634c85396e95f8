// put_bytes: text when it stays readable, base64 when it is not UTF-8 or escaping would bloat it.
#include "supervisor/daemon/json_fields.hpp"

#include <gtest/gtest.h>

#include <string>

namespace corral::daemon {
namespace {

nlohmann::json put(std::string_view bytes) {
    nlohmann::json out = nlohmann::json::object();
    put_bytes(out, "data", bytes);
    return out;
}

TEST(PutBytes, PlainAndColouredTextStaysText) {
    EXPECT_EQ(put("hello\n"), (nlohmann::json{{"data", "hello\n"}}));
    const std::string coloured = "\x1b[31merror:\x1b[0m file not found\n";
    EXPECT_EQ(put(coloured), (nlohmann::json{{"data", coloured}}));
    EXPECT_EQ(put("caf\xc3\xa9"), (nlohmann::json{{"data", "caf\xc3\xa9"}}));
}

TEST(PutBytes, InvalidUtf8IsBase64) {
    EXPECT_EQ(put(std::string_view("\xff\x00", 2)), (nlohmann::json{{"dataBase64", "/wA="}}));
}

TEST(PutBytes, ControlHeavyBytesAreBase64) {
    EXPECT_EQ(put(std::string(6, '\0')), (nlohmann::json{{"dataBase64", "AAAAAAAA"}}));
    EXPECT_EQ(put(std::string("\x01\x02 ab", 5)), (nlohmann::json{{"dataBase64", "AQIgYWI="}}));
}

TEST(AppendJsonString, MatchesNlohmannForEveryEscape) {
    const std::string samples[] = {"",
                                   "plain",
                                   "quote\" back\\slash",
                                   "\b\f\n\r\t",
                                   std::string("nul\0x01\x1f end", 13),
                                   "caf\xc3\xa9 \xe2\x82\xac",
                                   "\x7f del stays"};
    for (const auto& text : samples) {
        std::string mine;
        append_json_string(mine, text);
        EXPECT_EQ(mine, nlohmann::json(text).dump()) << "for " << nlohmann::json(text).dump();
    }
}

TEST(AppendBase64, EveryPaddingCase) {
    const std::pair<std::string, std::string> cases[] = {{"", ""},
                                                         {"f", "Zg=="},
                                                         {"fo", "Zm8="},
                                                         {"foo", "Zm9v"},
                                                         {"foob", "Zm9vYg=="},
                                                         {"fooba", "Zm9vYmE="},
                                                         {"foobar", "Zm9vYmFy"},
                                                         {std::string("\xff\xfe\x00", 3), "//4A"}};
    for (const auto& [in, out] : cases) {
        std::string encoded = "x";
        append_base64(encoded, in);
        EXPECT_EQ(encoded, "x" + out);
        EXPECT_EQ(base64_encode(in), out);
    }
}

}  // namespace
}  // namespace corral::daemon
