// The session resolver's DNS parser and answer builder (no privileges): what a query may hold,
// the compression rules that keep hostile names from looping or reading out of bounds
// (dnsmasq CVE-2017-14491, DNSpooq CVE-2020-25681..25687, Avahi CVE-2006-6870's self-pointing
// label), truncation, and a fuzz-like sweep over many malformed packets.
#include "sessions/network/dns_message.hpp"

#include <gtest/gtest.h>

#include <cctype>
#include <random>

namespace corral::dns {
namespace {

using Bytes = std::vector<uint8_t>;

void put16(Bytes& b, uint16_t v) {
    b.push_back(static_cast<uint8_t>(v >> 8));
    b.push_back(static_cast<uint8_t>(v));
}

Bytes header(uint16_t id, uint16_t flags, uint16_t qd, uint16_t an = 0, uint16_t ns = 0,
             uint16_t ar = 0) {
    Bytes b;
    for (uint16_t v : {id, flags, qd, an, ns, ar}) put16(b, v);
    return b;
}

void put_name(Bytes& b, const std::string& dotted) {
    size_t start = 0;
    while (start < dotted.size()) {
        size_t dot = dotted.find('.', start);
        if (dot == std::string::npos) dot = dotted.size();
        b.push_back(static_cast<uint8_t>(dot - start));
        b.insert(b.end(), dotted.begin() + static_cast<ptrdiff_t>(start),
                 dotted.begin() + static_cast<ptrdiff_t>(dot));
        start = dot + 1;
    }
    b.push_back(0);
}

Bytes query(const std::string& name, uint16_t type = kTypeA, uint16_t id = 0x1234) {
    Bytes b = header(id, 0x0100, 1);
    put_name(b, name);
    put16(b, type);
    put16(b, kClassIn);
    return b;
}

void add_opt(Bytes& b, uint16_t size) {
    b[11] = 1;  // ARCOUNT
    b.push_back(0);
    put16(b, kTypeOpt);
    put16(b, size);
    put16(b, 0);
    put16(b, 0);
    put16(b, 0);
}

std::string failure_of(const Bytes& b) {
    auto r = parse_query(b);
    EXPECT_FALSE(r.query) << "parsed: " << r.query->name;
    return r.failure.reason;
}

TEST(DnsMessage, ParsesAQueryAndLowersTheName) {
    auto r = parse_query(query("Registry.Example.TEST", kTypeAAAA));
    ASSERT_TRUE(r.query) << r.failure.reason;
    EXPECT_EQ(r.query->id, 0x1234);
    EXPECT_EQ(r.query->name, "registry.example.test");
    EXPECT_EQ(r.query->type, kTypeAAAA);
    EXPECT_TRUE(r.query->recursion_desired);
    EXPECT_FALSE(r.query->edns_udp_size);
    // The question is echoed as sent, case and all (clients that randomise case check it).
    auto answer = build_answer(*r.query, Rcode::nxdomain, {}, 30, 512);
    const Bytes sent = query("Registry.Example.TEST", kTypeAAAA);
    ASSERT_EQ(answer.size(), sent.size());
    EXPECT_TRUE(std::equal(sent.begin() + 12, sent.end(), answer.begin() + 12));
    EXPECT_EQ(answer[3] & 0x0F, 3);  // NXDOMAIN
    EXPECT_TRUE(answer[2] & 0x80);   // QR
}

TEST(DnsMessage, AnswersAddressesOfTheAskedFamilyOnly) {
    auto r = parse_query(query("a.test"));
    ASSERT_TRUE(r.query);
    const auto v4 = *IpAddress::parse("127.0.0.9");
    const auto v6 = *IpAddress::parse("2001:db8::1");
    auto answer = build_answer(*r.query, Rcode::noerror, {v6, v4}, 60, 512);
    ASSERT_EQ(answer.size(), query("a.test").size() + 16);
    EXPECT_EQ(answer[7], 1);  // ANCOUNT
    EXPECT_EQ(answer[answer.size() - 4], 127);
    EXPECT_EQ(answer[answer.size() - 1], 9);
    // The record's name is a pointer to the question, its TTL the one given.
    const size_t record = query("a.test").size();
    EXPECT_EQ(answer[record], 0xC0);
    EXPECT_EQ(answer[record + 1], 12);
    EXPECT_EQ(answer[record + 9], 60);
}

TEST(DnsMessage, TruncatesOverUdpAndSetsTc) {
    auto r = parse_query(query("many.test"));
    ASSERT_TRUE(r.query);
    std::vector<IpAddress> addresses;
    for (int i = 0; i < 40; ++i)
        addresses.push_back(*IpAddress::parse("10.0.0." + std::to_string(i)));
    auto udp = build_answer(*r.query, Rcode::noerror, addresses, 60, 100);
    EXPECT_LE(udp.size(), 100u);
    EXPECT_TRUE(udp[2] & 0x02) << "TC";
    EXPECT_LT(udp[7], 40);
    auto tcp = build_answer(*r.query, Rcode::noerror, addresses, 60, kMaxMessage);
    EXPECT_FALSE(tcp[2] & 0x02);
    EXPECT_EQ(tcp[7], kMaxAnswers);  // never more than kMaxAnswers, over any transport
}

TEST(DnsMessage, EdnsSizeIsClampedAndEchoed) {
    Bytes b = query("a.test");
    add_opt(b, 4096);
    auto r = parse_query(b);
    ASSERT_TRUE(r.query) << r.failure.reason;
    EXPECT_EQ(udp_answer_limit(*r.query), kMaxUdpAnswer);
    Bytes small = query("a.test");
    add_opt(small, 100);
    auto s = parse_query(small);
    ASSERT_TRUE(s.query);
    EXPECT_EQ(udp_answer_limit(*s.query), kClassicUdpAnswer);
    auto answer = build_answer(*r.query, Rcode::noerror, {}, 60, 512);
    EXPECT_EQ(answer[11], 1);  // the OPT record
    EXPECT_EQ(parse_query(query("a.test")).query.has_value(), true);
    EXPECT_EQ(udp_answer_limit(*parse_query(query("a.test")).query), kClassicUdpAnswer);
}

TEST(DnsMessage, ResponsesAndShortPacketsAreDropped) {
    EXPECT_TRUE(parse_query(Bytes{1, 2, 3}).failure.drop);
    Bytes response = query("a.test");
    response[2] |= 0x80;
    EXPECT_TRUE(parse_query(response).failure.drop) << "QR set: never answer a response";
}

TEST(DnsMessage, RefusesWhatAQueryMayNotHold) {
    Bytes two = header(1, 0, 2);
    put_name(two, "a.test");
    put16(two, 1), put16(two, 1);
    put_name(two, "b.test");
    put16(two, 1), put16(two, 1);
    EXPECT_EQ(failure_of(two), "2 questions");
    EXPECT_EQ(failure_of(header(1, 0, 0)), "0 questions");
    Bytes answers = query("a.test");
    answers[7] = 1;
    EXPECT_EQ(failure_of(answers), "records other than one EDNS OPT");
    Bytes trailing = query("a.test");
    trailing.push_back(0);
    EXPECT_EQ(failure_of(trailing), "bytes after the last record");
    Bytes cut = query("a.test");
    cut.resize(cut.size() - 2);
    EXPECT_EQ(failure_of(cut), "question without type and class");
    Bytes notify = query("a.test");
    notify[2] |= 4 << 3;  // opcode NOTIFY
    auto r = parse_query(notify);
    ASSERT_FALSE(r.query);
    EXPECT_EQ(r.failure.rcode, Rcode::notimp);
    EXPECT_FALSE(r.failure.drop);
    auto answer = build_failure(r.failure);
    EXPECT_EQ(answer.size(), kHeaderBytes);
    EXPECT_EQ(answer[3] & 0x0F, 4);
    EXPECT_EQ(answer[0], notify[0]);
}

TEST(DnsMessage, RefusesLabelsThatCouldHideANameFromTheRules) {
    // "allowed.example.test" as ONE label: read as text it is the allowed name, on the wire it is
    // a one-label name nobody allowed.
    Bytes dotted = header(1, 0, 1);
    const std::string label = "allowed.example.test";
    dotted.push_back(static_cast<uint8_t>(label.size()));
    dotted.insert(dotted.end(), label.begin(), label.end());
    dotted.push_back(0);
    put16(dotted, 1), put16(dotted, 1);
    EXPECT_EQ(failure_of(dotted),
              "question name: label holds a byte that is not a letter, digit, - or _");
    Bytes nul = query("ab.test");
    nul[14] = 0;  // 'b' -> NUL
    EXPECT_NE(failure_of(nul).find("not a letter"), std::string::npos);
}

TEST(DnsMessage, BoundsLabelAndNameLengths) {
    EXPECT_TRUE(parse_query(query(std::string(63, 'a') + ".test")).query);
    EXPECT_EQ(failure_of(query(std::string(64, 'a') + ".test")),
              "question name: reserved label type");  // 64 = 0x40: the reserved type
    std::string longest;
    while (longest.size() + 2 <= 253) longest += (longest.empty() ? "" : ".") + std::string("a");
    // 127 labels of one byte: 254 bytes on the wire with the root; one more is too many.
    EXPECT_TRUE(parse_query(query(longest)).query) << longest.size();
    EXPECT_NE(failure_of(query(longest + ".b")).find("longer than 255"), std::string::npos);
    std::string four = std::string(63, 'a') + "." + std::string(63, 'b') + "." +
                       std::string(63, 'c') + "." + std::string(63, 'd');
    EXPECT_NE(failure_of(query(four)).find("longer than 255"), std::string::npos);
}

// Compression: a pointer may only go backwards, below everything the name visited, and never
// into the header. These are the shapes that loop or read out of bounds in naive readers.
TEST(DnsMessage, CompressionPointersCannotLoopOrPointForward) {
    std::string why;
    // Message: header, then at 12 "a" + pointer to 12 (loops on itself through a label).
    Bytes loop = header(1, 0, 0);
    loop.insert(loop.end(), {1, 'a', 0xC0, 12});
    size_t at = 12;
    EXPECT_FALSE(read_name(loop, at, why));
    EXPECT_EQ(why, "compression pointer does not point backwards");
    // A pointer to itself.
    Bytes self = header(1, 0, 0);
    self.insert(self.end(), {0xC0, 12});
    at = 12;
    EXPECT_FALSE(read_name(self, at, why));
    EXPECT_EQ(why, "compression pointer does not point backwards");
    // Forward pointer.
    Bytes forward = header(1, 0, 0);
    forward.insert(forward.end(), {0xC0, 14, 1, 'a', 0});
    at = 12;
    EXPECT_FALSE(read_name(forward, at, why));
    EXPECT_EQ(why, "compression pointer does not point backwards");
    // Two names pointing at each other: 12: "x" -> 16; 16: "y" -> 12. Read from 16: it goes to
    // 12 (backwards: fine), then 12 points to 16, which is not below 12.
    Bytes pair = header(1, 0, 0);
    pair.insert(pair.end(), {1, 'x', 0xC0, 16, 1, 'y', 0xC0, 12});
    at = 16;
    EXPECT_FALSE(read_name(pair, at, why));
    EXPECT_EQ(why, "compression pointer does not point backwards");
    // Into the header, and out of range (beyond the message).
    Bytes header_ptr = header(1, 0, 0);
    header_ptr.insert(header_ptr.end(), {1, 'a', 0, 0xC0, 2});
    at = 15;
    EXPECT_FALSE(read_name(header_ptr, at, why));
    EXPECT_EQ(why, "compression pointer points into the header");
    Bytes far = header(1, 0, 0);
    far.insert(far.end(), {0xFF, 0xFF});
    at = 12;
    EXPECT_FALSE(read_name(far, at, why));
    // A good backwards pointer: 12: "a.test", 20: "www" -> 12.
    Bytes good = header(1, 0, 0);
    put_name(good, "a.test");
    const size_t second = good.size();
    good.insert(good.end(), {3, 'w', 'w', 'w', 0xC0, 12});
    at = second;
    auto name = read_name(good, at, why);
    ASSERT_TRUE(name) << why;
    EXPECT_EQ(*name, "www.a.test");
    EXPECT_EQ(at, good.size());
    // A chain of backwards pointers longer than kMaxPointers.
    Bytes chain = header(1, 0, 0);
    chain.push_back(0);  // 12: root
    for (size_t i = 0; i <= kMaxPointers; ++i) {
        const size_t target = chain.size() == 13 ? 12 : chain.size() - 2;
        chain.push_back(static_cast<uint8_t>(0xC0 | target >> 8));
        chain.push_back(static_cast<uint8_t>(target));
    }
    at = chain.size() - 2;
    EXPECT_FALSE(read_name(chain, at, why));
    EXPECT_EQ(why, "too many compression pointers");
    // In a query the question is the first name: no pointer in it can be valid.
    Bytes compressed = header(1, 0, 1);
    compressed.insert(compressed.end(), {0xC0, 12});
    put16(compressed, 1), put16(compressed, 1);
    EXPECT_FALSE(parse_query(compressed).query);
}

// Many malformed packets: random bytes, and valid queries with bytes flipped, cut, or grown.
// Whatever arrives, the parser returns (no crash, no endless loop: the test would time out),
// and whatever it accepts obeys the bounds; answers stay within the size asked for.
TEST(DnsMessage, SurvivesManyMalformedPackets) {
    std::mt19937 random(20261202);
    const std::vector<Bytes> seeds = {query("registry.example.test"),
                                      query("a.b.c.d.e.f.test", kTypeAAAA), [] {
                                          Bytes b = query("x.test");
                                          add_opt(b, 1232);
                                          return b;
                                      }()};
    size_t parsed = 0;
    auto check = [&](const Bytes& packet) {
        auto r = parse_query(packet);
        if (!r.query) {
            if (!r.failure.drop) {
                EXPECT_EQ(build_failure(r.failure).size(), kHeaderBytes);
            }
            return;
        }
        ++parsed;
        const Query& q = *r.query;
        ASSERT_LE(q.name.size(), 253u);
        size_t label = 0;
        for (char c : q.name) {
            if (c == '.') {
                ASSERT_GT(label, 0u);
                label = 0;
                continue;
            }
            ASSERT_TRUE(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_');
            ASSERT_FALSE(c >= 'A' && c <= 'Z');
            ASSERT_LE(++label, kMaxLabel);
        }
        const std::vector<IpAddress> addresses(50, *IpAddress::parse("10.1.2.3"));
        const size_t limit = udp_answer_limit(q);
        ASSERT_LE(build_answer(q, Rcode::noerror, addresses, 1, limit).size(), limit);
    };
    for (int i = 0; i < 20000; ++i) {
        Bytes noise(random() % 80);
        for (auto& byte : noise) byte = static_cast<uint8_t>(random());
        if (noise.size() >= 12) noise[2] &= 0x07, noise[4] = 0, noise[5] = 1;  // mostly queries
        check(noise);
    }
    for (int i = 0; i < 100000; ++i) {
        Bytes packet = seeds[random() % seeds.size()];
        const int edits = 1 + static_cast<int>(random() % 4);
        for (int e = 0; e < edits; ++e) {
            switch (random() % 4) {
                case 0:
                    packet[random() % packet.size()] = static_cast<uint8_t>(random());
                    break;
                case 1:
                    packet[12 + random() % (packet.size() - 12)] =
                        static_cast<uint8_t>(0xC0 | random() % 4);
                    break;
                case 2:
                    packet.resize(std::max<size_t>(1, random() % packet.size()));
                    break;
                case 3:
                    packet.insert(packet.begin() + static_cast<ptrdiff_t>(random() % packet.size()),
                                  static_cast<uint8_t>(random()));
                    break;
            }
            if (packet.size() < 13) break;
        }
        check(packet);
    }
    EXPECT_GT(parsed, 0u) << "the sweep should also reach the accepting paths";
}

}  // namespace
}  // namespace corral::dns
