#include "sessions/network/refusal_log.hpp"

#include <arpa/inet.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_log.h>
#include <linux/netlink.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <boost/asio/posix/stream_descriptor.hpp>
#include <chrono>
#include <cstring>

#include "base/unique_fd.hpp"

namespace corral {
namespace {

// Enough of each logged packet for its destination: an IPv4 header (at most 60 bytes) and the
// first 4 bytes of TCP (the ports).
constexpr uint32_t kCopyRange = 64;
constexpr int kReceiveBuffer = 1 << 20;
constexpr int kAckTimeoutMs = 2000;
constexpr uint16_t kPacketType = (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_PACKET;
// One datagram carries up to this many packets (each ~150 bytes with kCopyRange)...
constexpr uint32_t kQueueThreshold = 64;
// ...or whatever came within this many hundredths of a second.
constexpr uint32_t kFlushTimeoutHundredths = 1;
// The kernel's buffer for one datagram: what drain() reads at once.
constexpr uint32_t kDatagramBuffer = 16384;

/// One NFULNL_MSG_CONFIG request for `group`, its attributes appended with add().
struct ConfigRequest {
    explicit ConfigRequest(uint16_t group) {
        message.header.nlmsg_len = NLMSG_LENGTH(sizeof(nfgenmsg));
        message.header.nlmsg_type = (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_CONFIG;
        message.header.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
        message.header.nlmsg_seq = 1;
        message.generic.nfgen_family = AF_UNSPEC;
        message.generic.version = NFNETLINK_V0;
        message.generic.res_id = htons(group);
    }
    void add(uint16_t type, const void* data, size_t length) {
        auto* attribute = reinterpret_cast<nlattr*>(reinterpret_cast<char*>(&message) +
                                                    NLMSG_ALIGN(message.header.nlmsg_len));
        attribute->nla_type = type;
        attribute->nla_len = static_cast<uint16_t>(NLA_HDRLEN + length);
        std::memcpy(reinterpret_cast<char*>(attribute) + NLA_HDRLEN, data, length);
        message.header.nlmsg_len =
            NLMSG_ALIGN(message.header.nlmsg_len) + NLA_ALIGN(attribute->nla_len);
    }
    struct {
        nlmsghdr header;
        nfgenmsg generic;
        char attributes[64];
    } message{};
};

/// Runs on the NetnsRunner: a socket bound to NFLOG `group` of the thread's namespace, copying
/// packets, delivered in batches.
Result<UniqueFd> bind_group(uint16_t group) {
    UniqueFd fd(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_NETFILTER));
    if (!fd) return sys_error("netlink socket (nfnetlink_log)");
    sockaddr_nl local{};
    local.nl_family = AF_NETLINK;
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&local), sizeof local) != 0)
        return sys_error("bind netlink socket (nfnetlink_log)");
    (void)::setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUF, &kReceiveBuffer, sizeof kReceiveBuffer);
    // Connected to the kernel (port id 0), the socket takes unicast from nobody else: a sandbox
    // that kept CAP_NET_ADMIN over its namespace cannot fill it with forged reports or push
    // real ones out with ENOBUFS (the recvfrom check below stays as a second line).
    sockaddr_nl kernel{};
    kernel.nl_family = AF_NETLINK;
    if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) != 0)
        return sys_error("connect netlink socket to the kernel (nfnetlink_log)");
    ConfigRequest request(group);
    const nfulnl_msg_config_cmd bind{NFULNL_CFG_CMD_BIND};
    request.add(NFULA_CFG_CMD, &bind, sizeof bind);
    nfulnl_msg_config_mode mode{};
    mode.copy_range = htonl(kCopyRange);
    mode.copy_mode = NFULNL_COPY_PACKET;
    request.add(NFULA_CFG_MODE, &mode, sizeof mode);
    // Batched: the kernel sends one datagram per kQueueThreshold packets or per kFlushTimeout,
    // whichever comes first, so a sandbox sending SYNs as fast as it can wakes corrald's loop
    // ~1/64 as often as one datagram per packet would (stop 25's review, L2), and a lone
    // refusal is still counted within 10 ms. The kernel's own default is 100 packets or 1 s.
    const uint32_t threshold = htonl(kQueueThreshold);
    request.add(NFULA_CFG_QTHRESH, &threshold, sizeof threshold);
    const uint32_t timeout = htonl(kFlushTimeoutHundredths);
    request.add(NFULA_CFG_TIMEOUT, &timeout, sizeof timeout);
    const uint32_t buffer = htonl(kDatagramBuffer);
    request.add(NFULA_CFG_NLBUFSIZ, &buffer, sizeof buffer);
    if (::send(fd.get(), &request.message, request.message.header.nlmsg_len, 0) < 0)
        return sys_error("send NFLOG bind");
    // The acknowledgement may come behind packets already logged to the group (a re-adopted
    // session's old table logs there while the sandbox connects): skip those until it comes.
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(kAckTimeoutMs);
    for (;;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        pollfd ready{fd.get(), POLLIN, 0};
        if (left.count() <= 0 || ::poll(&ready, 1, static_cast<int>(left.count())) != 1)
            return sys_error(ETIMEDOUT, "NFLOG bind: no answer");
        alignas(nlmsghdr) char answer[16384];
        const ssize_t length = ::recv(fd.get(), answer, sizeof answer, 0);
        if (length < 0) {
            if (errno == EAGAIN || errno == EINTR || errno == ENOBUFS) continue;
            return sys_error("NFLOG bind answer");
        }
        int rest = static_cast<int>(length);
        for (auto* header = reinterpret_cast<const nlmsghdr*>(answer); NLMSG_OK(header, rest);
             header = NLMSG_NEXT(header, rest)) {
            if (header->nlmsg_type != NLMSG_ERROR) continue;  // a logged packet: not the answer
            if (header->nlmsg_len < NLMSG_LENGTH(sizeof(nlmsgerr)))
                return sys_error(EPROTO, "NFLOG bind answer");
            if (const int error = -reinterpret_cast<const nlmsgerr*>(NLMSG_DATA(header))->error)
                return sys_error(error, "bind NFLOG group " + std::to_string(group));
            return fd;
        }
    }
}

/// The destination of an IPv4 TCP packet (the payload NFLOG copied), if it is one.
void parse_packet(const uint8_t* packet, size_t length,
                  const std::function<void(const IpAddress&, uint16_t)>& on_packet) {
    if (length < 20 || (packet[0] >> 4) != 4) return;
    const size_t header = static_cast<size_t>(packet[0] & 0x0f) * 4;
    if (header < 20 || packet[9] != IPPROTO_TCP || length < header + 4) return;
    const uint16_t port = static_cast<uint16_t>((packet[header + 2] << 8) | packet[header + 3]);
    on_packet(IpAddress::from_bytes(AF_INET, packet + 16), port);
}

}  // namespace

void parse_nflog_datagram(const void* data, size_t length,
                          const std::function<void(const IpAddress&, uint16_t)>& on_packet) {
    int left = static_cast<int>(std::min<size_t>(length, 1 << 30));
    for (auto* header = static_cast<const nlmsghdr*>(data); NLMSG_OK(header, left);
         header = NLMSG_NEXT(header, left)) {
        constexpr size_t kAttributesAt = NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(nfgenmsg));
        if (header->nlmsg_type != kPacketType || header->nlmsg_len < kAttributesAt) continue;
        const auto* at = reinterpret_cast<const uint8_t*>(header) + kAttributesAt;
        size_t rest = header->nlmsg_len - kAttributesAt;
        while (rest >= NLA_HDRLEN) {
            nlattr attribute;
            std::memcpy(&attribute, at, sizeof attribute);
            if (attribute.nla_len < NLA_HDRLEN || attribute.nla_len > rest) break;
            if ((attribute.nla_type & NLA_TYPE_MASK) == NFULA_PAYLOAD)
                parse_packet(at + NLA_HDRLEN, attribute.nla_len - NLA_HDRLEN, on_packet);
            const size_t step = NLA_ALIGN(attribute.nla_len);
            if (step >= rest) break;
            at += step;
            rest -= step;
        }
    }
}

struct RefusalLog::State : std::enable_shared_from_this<State> {
    State(boost::asio::io_context& io, UniqueFd fd, Handler handler)
        : socket(io, fd.release()), handler(std::move(handler)) {}

    void wait() {
        socket.async_wait(boost::asio::posix::stream_descriptor::wait_read,
                          [self = shared_from_this()](const boost::system::error_code& error) {
                              if (error || self->stopped) return;
                              self->drain();
                              if (!self->stopped) self->wait();
                          });
    }
    /// Reads what is queued, a bounded number of datagrams per wake-up (the loop stays fair).
    void drain() {
        alignas(nlmsghdr) uint8_t buffer[kDatagramBuffer];
        for (int i = 0; i < 64 && !stopped; ++i) {
            sockaddr_nl from{};
            socklen_t from_length = sizeof from;
            const ssize_t length =
                ::recvfrom(socket.native_handle(), buffer, sizeof buffer, MSG_DONTWAIT,
                           reinterpret_cast<sockaddr*>(&from), &from_length);
            if (length < 0) {
                if (errno == ENOBUFS) {
                    handler(std::nullopt, 0);
                    continue;
                }
                return;  // EAGAIN: all read
            }
            if (from.nl_pid != 0) continue;  // not from the kernel
            parse_nflog_datagram(buffer, static_cast<size_t>(length),
                                 [this](const IpAddress& address, uint16_t port) {
                                     if (!stopped) handler(address, port);
                                 });
        }
    }
    void stop() {
        stopped = true;
        boost::system::error_code ignored;
        socket.close(ignored);
    }

    boost::asio::posix::stream_descriptor socket;
    Handler handler;
    bool stopped = false;
};

RefusalLog::RefusalLog(std::shared_ptr<State> state) : state_(std::move(state)) {}

RefusalLog::~RefusalLog() {
    stop();
}

void RefusalLog::stop() {
    if (state_) state_->stop();
}

Result<std::unique_ptr<RefusalLog>> RefusalLog::start(boost::asio::io_context& io,
                                                      NetnsRunner& netns, uint16_t group,
                                                      Handler handler) {
    auto fd = netns.run([group] { return bind_group(group); });
    if (!fd) return std::move(fd.error());
    auto state = std::make_shared<State>(io, std::move(*fd), std::move(handler));
    state->wait();
    return std::make_unique<RefusalLog>(std::move(state));
}

}  // namespace corral
