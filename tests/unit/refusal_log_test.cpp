// What the daemon reads from nfnetlink_log (no privileges): the destination of each logged IPv4
// TCP SYN, and nothing from a datagram that is short, lies about its lengths or carries other
// packets. The bytes come from the sandbox's own packets, so they are parsed as hostile input.
#include "sessions/network/refusal_log.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_log.h>
#include <linux/netlink.h>

#include <cstring>
#include <string>
#include <vector>

namespace corral {
namespace {

/// An IPv4 header (20 bytes) and the first 4 bytes of TCP to `address`:`port`.
std::vector<uint8_t> tcp_packet(const char* address, uint16_t port, uint8_t protocol = 6) {
    std::vector<uint8_t> packet(24, 0);
    packet[0] = 0x45;
    packet[9] = protocol;
    ::inet_pton(AF_INET, "10.9.9.9", &packet[12]);
    ::inet_pton(AF_INET, address, &packet[16]);
    packet[20] = 0x9c;  // source port 40000
    packet[21] = 0x40;
    packet[22] = static_cast<uint8_t>(port >> 8);
    packet[23] = static_cast<uint8_t>(port & 0xff);
    return packet;
}

/// One NFULNL_MSG_PACKET message: a prefix attribute, then the payload attribute.
std::vector<uint8_t> nflog_message(const std::vector<uint8_t>& payload) {
    std::vector<uint8_t> out(NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(nfgenmsg)), 0);
    auto attribute = [&](uint16_t type, const void* data, size_t length) {
        nlattr header{static_cast<uint16_t>(NLA_HDRLEN + length), type};
        const size_t at = out.size();
        out.resize(at + NLA_ALIGN(NLA_HDRLEN + length), 0);
        std::memcpy(&out[at], &header, sizeof header);
        std::memcpy(&out[at + NLA_HDRLEN], data, length);
    };
    attribute(NFULA_PREFIX, "corral-egress", 14);
    attribute(NFULA_PAYLOAD, payload.data(), payload.size());
    nlmsghdr header{};
    header.nlmsg_len = static_cast<uint32_t>(out.size());
    header.nlmsg_type = (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_PACKET;
    std::memcpy(out.data(), &header, sizeof header);
    return out;
}

std::vector<std::string> parse(const std::vector<uint8_t>& datagram) {
    std::vector<std::string> seen;
    parse_nflog_datagram(datagram.data(), datagram.size(), [&](const IpAddress& a, uint16_t p) {
        seen.push_back(a.to_string() + ":" + std::to_string(p));
    });
    return seen;
}

TEST(RefusalLog, ReadsTheDestinationOfEachLoggedSyn) {
    auto datagram = nflog_message(tcp_packet("192.0.2.1", 443));
    const auto second = nflog_message(tcp_packet("10.20.99.7", 22));
    datagram.insert(datagram.end(), second.begin(), second.end());
    EXPECT_EQ(parse(datagram), (std::vector<std::string>{"192.0.2.1:443", "10.20.99.7:22"}));
}

TEST(RefusalLog, IgnoresWhatIsNotAnIpv4TcpPacketOrLiesAboutItsLength) {
    EXPECT_TRUE(parse(nflog_message(tcp_packet("192.0.2.1", 53, 17))).empty()) << "UDP";
    auto short_packet = tcp_packet("192.0.2.1", 80);
    short_packet.resize(22);  // the ports cut off
    EXPECT_TRUE(parse(nflog_message(short_packet)).empty());
    auto options = tcp_packet("192.0.2.1", 80);
    options[0] = 0x4f;  // a 60-byte header the 24 bytes do not hold
    EXPECT_TRUE(parse(nflog_message(options)).empty());
    auto ipv6 = tcp_packet("192.0.2.1", 80);
    ipv6[0] = 0x60;
    EXPECT_TRUE(parse(nflog_message(ipv6)).empty());
    // An attribute longer than its message, a message longer than the datagram, and a datagram
    // cut anywhere: nothing is read beyond the bytes given (ASan would say so).
    auto lying = nflog_message(tcp_packet("192.0.2.1", 80));
    const size_t payload_at =
        NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(nfgenmsg)) + NLA_ALIGN(NLA_HDRLEN + 14);
    lying[payload_at] = 0xff;
    EXPECT_TRUE(parse(lying).empty());
    const auto whole = nflog_message(tcp_packet("192.0.2.1", 80));
    for (size_t cut = 0; cut < whole.size(); ++cut)
        EXPECT_TRUE(parse(std::vector<uint8_t>(whole.begin(), whole.begin() + cut)).empty()) << cut;
    auto other_type = whole;
    other_type[4] = NFULNL_MSG_CONFIG;
    EXPECT_TRUE(parse(other_type).empty());
}

}  // namespace
}  // namespace corral
