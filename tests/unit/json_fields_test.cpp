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

TEST(Utf8WithReplacements, EachBadByteBecomesOneReplacementCharacter) {
    EXPECT_EQ(utf8_with_replacements("plain é ✓ \xF0\x9F\x90\x8E"), "plain é ✓ \xF0\x9F\x90\x8E");
    EXPECT_EQ(utf8_with_replacements("a\xff\xfe" "b"), "a\xEF\xBF\xBD\xEF\xBF\xBD" "b");
    // A truncated sequence, an overlong form and a surrogate are not UTF-8 either.
    EXPECT_EQ(utf8_with_replacements("\xC3"), "\xEF\xBF\xBD");
    EXPECT_EQ(utf8_with_replacements("\xC0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD");
    EXPECT_EQ(utf8_with_replacements("\xED\xA0\x80x"),
              "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBDx");
    EXPECT_TRUE(is_valid_utf8(utf8_with_replacements(std::string("\x80\x00\xff", 3))));
}

TEST(PutTextAndBytes, TextAloneOrReplacedTextBesideTheExactBytes) {
    nlohmann::json out = nlohmann::json::object();
    put_text_and_bytes(out, "stdout", "fine\n");
    EXPECT_EQ(out, (nlohmann::json{{"stdout", "fine\n"}}));
    out = nlohmann::json::object();
    put_text_and_bytes(out, "stdout", "ok\xff");
    EXPECT_EQ(out, (nlohmann::json{{"stdout", "ok\xEF\xBF\xBD"}, {"stdoutBase64", "b2v/"}}));
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

// ---- fields that reach a process or a path (issue 12 item 5) ----

namespace corral::daemon {
namespace {

/// The message of the ApiFailure `read` throws ("" when it throws none).
template <class F>
std::string refusal(F read) {
    try {
        read();
    } catch (const ApiFailure& failure) {
        EXPECT_EQ(failure.error.status, 400u);
        return failure.error.message;
    }
    return "";
}

TEST(ObjectReader, NulBytesAreRefusedNamingTheField) {
    const std::string nul("\0", 1);
    const nlohmann::json body = {{"command", "echo safe" + nul + "; echo INJECTED"},
                                 {"argv", {"a", "b" + nul}},
                                 {"env", {{"K", "v" + nul}}},
                                 {"keys", {{"K" + nul, "v"}}},
                                 {"stdin", "a" + nul + "b"}};
    EXPECT_NE(refusal([&] { ObjectReader(body).string("command"); }).find("field `command`"),
              std::string::npos);
    EXPECT_NE(refusal([&] { ObjectReader(body).string_list("argv"); }).find("`argv[1]`"),
              std::string::npos);
    EXPECT_NE(refusal([&] { ObjectReader(body).env_map("env"); }).find("`env.K`"),
              std::string::npos);
    EXPECT_NE(refusal([&] { ObjectReader(body).env_map("keys"); }).find("`keys` has a variable "
                                                                         "name with a NUL byte"),
              std::string::npos);
    ObjectReader r(body);
    EXPECT_EQ(r.bytes("stdin")->size(), 3u);  // data, not a name
}

// execve's environment is "NAME=value": {"A=B": "c"} would set A to "B=c" while the record said
// otherwise, and "" would give "=c" (issue 12 item 5's class: what runs is what the record says).
TEST(ObjectReader, EnvironmentNamesWithEqualsOrEmptyAreRefused) {
    const nlohmann::json equals = {{"env", {{"A=B", "c"}}}};
    EXPECT_NE(refusal([&] { ObjectReader(equals).env_map("env"); }).find("`A=B`, which holds `=`"),
              std::string::npos);
    const nlohmann::json empty = {{"env", {{"", "c"}}}};
    EXPECT_NE(refusal([&] { ObjectReader(empty).env_map("env"); }).find("empty variable name"),
              std::string::npos);
    const nlohmann::json fine = {{"env", {{"CFLAGS", "-O2 -g=x"}, {"lower.dots-ok", ""}}}};
    EXPECT_EQ(ObjectReader(fine).env_map("env")->size(), 2u);
}

TEST(ObjectReader, MillisecondsAreWholeAndBounded) {
    const nlohmann::json body = nlohmann::json::parse(
        R"({"ok": 86400000, "max": 2592000000, "over": 2592000001, "huge": 9223372036854775807,
            "negative": -1, "fraction": 1.5, "float": 1e300, "text": "10"})");
    EXPECT_EQ(ObjectReader(body).milliseconds("ok")->count(), 86400000);
    EXPECT_EQ(ObjectReader(body).milliseconds("max")->count(), 2592000000);
    EXPECT_FALSE(ObjectReader(body).milliseconds("absent"));
    for (const char* name : {"over", "huge", "negative", "fraction", "float", "text"}) {
        const std::string message = refusal([&] { ObjectReader(body).milliseconds(name); });
        EXPECT_NE(message.find(std::string("field `") + name + "`"), std::string::npos) << message;
        EXPECT_NE(message.find("2592000000"), std::string::npos) << message;
    }
}

}  // namespace
}  // namespace corral::daemon
