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

}  // namespace
}  // namespace corral::daemon
