// The daemon's side of the code-context driver protocol (sessions/contexts/driver_frames.hpp):
// framing, bounds and message checks, without a process.

#include "sessions/contexts/driver_frames.hpp"

#include <gtest/gtest.h>

namespace corral {
namespace {

std::string frame(const std::string& body) {
    std::string out;
    const auto n = static_cast<uint32_t>(body.size());
    out.push_back(static_cast<char>(n >> 24));
    out.push_back(static_cast<char>(n >> 16));
    out.push_back(static_cast<char>(n >> 8));
    out.push_back(static_cast<char>(n));
    return out + body;
}

TEST(FrameDecoder, SplitsFramesFedByteByByte) {
    FrameDecoder decoder;
    const std::string stream = frame("{\"a\":1}") + frame("") + frame("xyz");
    std::vector<std::string> got;
    for (char c : stream) {
        ASSERT_TRUE(decoder.feed(std::string_view(&c, 1)));
        while (auto payload = decoder.next()) got.push_back(*payload);
    }
    EXPECT_EQ(got, (std::vector<std::string>{"{\"a\":1}", "", "xyz"}));
    EXPECT_FALSE(decoder.next());
}

// Issue 10 item 2: a header that announces more than the limit is refused when it arrives.
TEST(FrameDecoder, RefusesAnOversizeHeaderBeforeItsBody) {
    FrameDecoder decoder;
    ASSERT_TRUE(decoder.feed(frame("{}")));
    const std::string huge = "\xff\xff\xff\xff";
    auto fed = decoder.feed(huge);
    ASSERT_FALSE(fed);
    EXPECT_EQ(fed.error().code, EMSGSIZE);
    EXPECT_NE(fed.error().message.find("4294967295"), std::string::npos);
    EXPECT_FALSE(decoder.feed("more"));
    EXPECT_FALSE(decoder.next()) << "a failed stream yields nothing more";
}

TEST(FrameDecoder, AcceptsAFrameOfExactlyTheLimit) {
    FrameDecoder decoder;
    const std::string body(kMaxDriverFrame, 'x');
    ASSERT_TRUE(decoder.feed(frame(body)));
    auto payload = decoder.next();
    ASSERT_TRUE(payload);
    EXPECT_EQ(payload->size(), kMaxDriverFrame);
}

TEST(DriverMessage, ParsesEachType) {
    auto ready = parse_driver_message(R"({"type":"ready","language":"python","version":"3.11"})");
    ASSERT_TRUE(ready) << ready.error().message;
    EXPECT_EQ(ready->type, DriverMessage::Type::ready);
    EXPECT_EQ(ready->version, "3.11");
    auto out = parse_driver_message(R"({"type":"stdout","run":3,"text":"hi\n"})");
    ASSERT_TRUE(out);
    EXPECT_EQ(out->type, DriverMessage::Type::stdout_text);
    EXPECT_EQ(out->run, 3u);
    EXPECT_EQ(out->text, "hi\n");
    auto result = parse_driver_message(
        R"({"type":"result","run":1,"data":{"text/plain":"42","image/svg+xml":"<svg/>"}})");
    ASSERT_TRUE(result);
    EXPECT_EQ(result->data.at("image/svg+xml"), "<svg/>");
    auto error = parse_driver_message(
        R"({"type":"error","run":1,"name":"KeyError","value":"'x'","traceback":["a","b"]})");
    ASSERT_TRUE(error);
    EXPECT_EQ(error->traceback.size(), 2u);
    auto done = parse_driver_message(R"({"type":"done","run":1})");
    ASSERT_TRUE(done);
    EXPECT_EQ(done->type, DriverMessage::Type::done);
}

TEST(DriverMessage, RefusesWhatIsNotExactlyAMessage) {
    const char* bad[] = {
        "not json",
        "[]",
        R"({"type":1})",
        R"({"type":"launch","run":1})",
        R"({"type":"stdout","text":"no run"})",
        R"({"type":"stdout","run":-1,"text":"x"})",
        R"({"type":"stdout","run":1,"text":5})",
        R"({"type":"result","run":1,"data":{}})",
        R"({"type":"result","run":1,"data":{"Text/Plain":"x"}})",
        R"({"type":"result","run":1,"data":{"text/plain":{"nested":1}}})",
        R"({"type":"error","run":1,"name":"E","value":"v","traceback":[1]})",
        R"({"type":"ready"})",
        "{\"type\":\"stdout\",\"run\":1,\"text\":\"\xff\"}",
    };
    for (const char* payload : bad) {
        auto parsed = parse_driver_message(payload);
        EXPECT_FALSE(parsed) << payload;
        if (!parsed) {
            EXPECT_EQ(parsed.error().code, EPROTO) << payload;
        }
    }
}

TEST(DriverMessage, RefusesDeepNestingWithoutRecursingIntoIt) {
    const std::string deep = std::string(1 << 20, '[') + std::string(1 << 20, ']');
    auto parsed = parse_driver_message(deep);
    ASSERT_FALSE(parsed);
    EXPECT_NE(parsed.error().message.find("nested deeper"), std::string::npos);
}

TEST(DriverFrames, EncodesARunFrame) {
    const std::string encoded = encode_run_frame(7, "print('é')");
    FrameDecoder decoder;
    ASSERT_TRUE(decoder.feed(encoded));
    auto payload = decoder.next();
    ASSERT_TRUE(payload);
    EXPECT_EQ(*payload, R"j({"code":"print('é')","id":7,"type":"run"})j");
}

}  // namespace
}  // namespace corral
