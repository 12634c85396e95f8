#include "sessions/network/dns_message.hpp"

#include <sys/socket.h>

#include <algorithm>

namespace corral::dns {
namespace {

uint16_t read16(std::span<const uint8_t> m, size_t at) {
    return static_cast<uint16_t>(m[at] << 8 | m[at + 1]);
}

void put16(std::vector<uint8_t>& out, uint16_t value) {
    out.push_back(static_cast<uint8_t>(value >> 8));
    out.push_back(static_cast<uint8_t>(value));
}

void put32(std::vector<uint8_t>& out, uint32_t value) {
    put16(out, static_cast<uint16_t>(value >> 16));
    put16(out, static_cast<uint16_t>(value));
}

bool label_byte(uint8_t c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_';
}

ParseFailure failure(uint16_t id, Rcode rcode, std::string reason) {
    ParseFailure f;
    f.id = id;
    f.rcode = rcode;
    f.reason = std::move(reason);
    return f;
}

void put_header(std::vector<uint8_t>& out, uint16_t id, uint16_t opcode, bool rd, bool tc,
                Rcode rcode, uint16_t qd, uint16_t an, uint16_t ar) {
    put16(out, id);
    // QR=1 (a response), opcode echoed, AA=0 (we answer for others), TC, RD echoed, RA=1.
    const uint16_t flags =
        static_cast<uint16_t>(0x8000 | (opcode & 0xF) << 11 | (tc ? 0x0200 : 0) |
                              (rd ? 0x0100 : 0) | 0x0080 | static_cast<uint16_t>(rcode));
    put16(out, flags);
    put16(out, qd);
    put16(out, an);
    put16(out, 0);
    put16(out, ar);
}

}  // namespace

std::optional<std::string> read_name(std::span<const uint8_t> m, size_t& offset, std::string& why) {
    std::string name;
    size_t at = offset;
    // Every offset this name has been read from so far is >= `lowest`; a pointer must go below
    // it. Strictly decreasing targets cannot loop, whatever the packet holds.
    size_t lowest = offset;
    size_t wire = 0;  // uncompressed length so far, the final 0 included at the end
    size_t labels = 0;
    size_t pointers = 0;
    bool jumped = false;
    for (;;) {
        if (at >= m.size()) return why = "name runs past the end of the message", std::nullopt;
        const uint8_t length = m[at];
        if ((length & 0xC0) == 0xC0) {
            if (at + 1 >= m.size())
                return why = "compression pointer runs past the end", std::nullopt;
            const size_t target = static_cast<size_t>(read16(m, at) & 0x3FFF);
            if (++pointers > kMaxPointers)
                return why = "too many compression pointers", std::nullopt;
            if (target >= lowest)
                return why = "compression pointer does not point backwards", std::nullopt;
            if (target < kHeaderBytes)
                return why = "compression pointer points into the header", std::nullopt;
            if (!jumped) offset = at + 2;
            jumped = true;
            lowest = target;
            at = target;
            continue;
        }
        if (length & 0xC0) return why = "reserved label type", std::nullopt;
        if (length == 0) {
            if (!jumped) offset = at + 1;
            return name;
        }
        if (length > kMaxLabel) return why = "label longer than 63 bytes", std::nullopt;
        if (at + 1 + length > m.size()) return why = "label runs past the end", std::nullopt;
        wire += 1 + length;
        if (wire + 1 > kMaxNameWire) return why = "name longer than 255 bytes", std::nullopt;
        if (++labels > kMaxLabels) return why = "too many labels", std::nullopt;
        if (!name.empty()) name += '.';
        for (size_t i = 0; i < length; ++i) {
            const uint8_t c = m[at + 1 + i];
            if (!label_byte(c))
                return why = "label holds a byte that is not a letter, digit, - or _", std::nullopt;
            name += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
        }
        at += 1 + length;
    }
}

ParseResult parse_query(std::span<const uint8_t> m) {
    ParseResult result;
    if (m.size() < kHeaderBytes) {
        result.failure.drop = true;
        result.failure.reason = "shorter than a DNS header";
        return result;
    }
    if (m.size() > kMaxMessage) {
        result.failure.drop = true;
        result.failure.reason = "longer than a DNS message";
        return result;
    }
    const uint16_t id = read16(m, 0);
    const uint16_t flags = read16(m, 2);
    if (flags & 0x8000) {
        result.failure = failure(id, Rcode::formerr, "a response, not a query");
        result.failure.drop = true;
        return result;
    }
    const uint16_t opcode = (flags >> 11) & 0xF;
    if (opcode != 0) {
        result.failure = failure(id, Rcode::notimp, "opcode " + std::to_string(opcode));
        return result;
    }
    const uint16_t qd = read16(m, 4), an = read16(m, 6), ns = read16(m, 8), ar = read16(m, 10);
    if (qd != 1) {
        result.failure = failure(id, Rcode::formerr, std::to_string(qd) + " questions");
        return result;
    }
    if (an != 0 || ns != 0 || ar > 1) {
        result.failure = failure(id, Rcode::formerr, "records other than one EDNS OPT");
        return result;
    }
    Query query;
    query.id = id;
    query.opcode = opcode;
    query.recursion_desired = flags & 0x0100;
    size_t at = kHeaderBytes;
    std::string why;
    auto name = read_name(m, at, why);
    if (!name) {
        result.failure = failure(id, Rcode::formerr, "question name: " + why);
        return result;
    }
    if (at + 4 > m.size()) {
        result.failure = failure(id, Rcode::formerr, "question without type and class");
        return result;
    }
    query.name = std::move(*name);
    query.type = read16(m, at);
    query.klass = read16(m, at + 2);
    at += 4;
    query.question.assign(m.begin() + kHeaderBytes, m.begin() + static_cast<ptrdiff_t>(at));
    if (ar == 1) {
        // The OPT record: root name, type 41, class = UDP payload size, TTL = extended rcode,
        // version and flags, then rdata (options, which we read past but do not use).
        auto owner = read_name(m, at, why);
        if (!owner || !owner->empty() || at + 10 > m.size() || read16(m, at) != kTypeOpt) {
            result.failure = failure(id, Rcode::formerr, "additional record is not an EDNS OPT");
            return result;
        }
        const uint16_t size = read16(m, at + 2);
        const size_t rdlength = read16(m, at + 8);
        at += 10;
        if (at + rdlength > m.size()) {
            result.failure = failure(id, Rcode::formerr, "EDNS options run past the end");
            return result;
        }
        at += rdlength;
        query.edns_udp_size = size;
    }
    if (at != m.size()) {
        result.failure = failure(id, Rcode::formerr, "bytes after the last record");
        return result;
    }
    result.query = std::move(query);
    return result;
}

size_t udp_answer_limit(const Query& query) {
    if (!query.edns_udp_size) return kClassicUdpAnswer;
    return std::clamp<size_t>(*query.edns_udp_size, kClassicUdpAnswer, kMaxUdpAnswer);
}

std::vector<uint8_t> build_answer(const Query& query, Rcode rcode,
                                  const std::vector<IpAddress>& addresses, uint32_t ttl,
                                  size_t max_size) {
    max_size = std::min(max_size, kMaxMessage);
    const int family = query.type == kTypeA ? AF_INET : query.type == kTypeAAAA ? AF_INET6 : 0;
    const size_t rdata = family == AF_INET ? 4 : 16;
    const size_t record_bytes = 2 + 10 + rdata;  // pointer to the question name, fixed, rdata
    const size_t opt_bytes = query.edns_udp_size ? 11 : 0;
    size_t fit = 0, wanted = 0;
    size_t used = kHeaderBytes + query.question.size() + opt_bytes;
    if (family != 0 && query.klass == kClassIn)
        for (const auto& address : addresses) {
            if (address.family != family || wanted == kMaxAnswers) continue;
            ++wanted;
            if (used + record_bytes <= max_size) {
                used += record_bytes;
                ++fit;
            }
        }
    const bool truncated = fit < wanted;
    std::vector<uint8_t> out;
    out.reserve(used);
    put_header(out, query.id, query.opcode, query.recursion_desired, truncated, rcode, 1,
               static_cast<uint16_t>(fit), query.edns_udp_size ? 1 : 0);
    out.insert(out.end(), query.question.begin(), query.question.end());
    size_t written = 0;
    for (const auto& address : addresses) {
        if (written == fit) break;
        if (address.family != family) continue;
        put16(out, 0xC000 | kHeaderBytes);  // the question's name, always at offset 12
        put16(out, query.type);
        put16(out, kClassIn);
        put32(out, ttl);
        put16(out, static_cast<uint16_t>(rdata));
        out.insert(out.end(), address.bytes.begin(), address.bytes.begin() + rdata);
        ++written;
    }
    if (query.edns_udp_size) {
        out.push_back(0);  // root
        put16(out, kTypeOpt);
        put16(out, static_cast<uint16_t>(kMaxUdpAnswer));
        put32(out, 0);  // extended rcode 0, version 0, no flags
        put16(out, 0);
    }
    return out;
}

std::vector<uint8_t> build_query(const std::string& name, uint16_t type, uint16_t id) {
    std::vector<uint8_t> out;
    put16(out, id);
    put16(out, 0x0100);  // RD
    put16(out, 1);
    put16(out, 0);
    put16(out, 0);
    put16(out, 0);
    size_t start = 0;
    while (start < name.size()) {
        size_t dot = name.find('.', start);
        if (dot == std::string::npos) dot = name.size();
        out.push_back(static_cast<uint8_t>(std::min<size_t>(dot - start, kMaxLabel)));
        out.insert(out.end(), name.begin() + static_cast<ptrdiff_t>(start),
                   name.begin() +
                       static_cast<ptrdiff_t>(start + std::min<size_t>(dot - start, kMaxLabel)));
        start = dot + 1;
    }
    out.push_back(0);
    put16(out, type);
    put16(out, kClassIn);
    return out;
}

std::vector<uint8_t> build_failure(const ParseFailure& f) {
    std::vector<uint8_t> out;
    put_header(out, f.id, 0, false, false, f.rcode, 0, 0, 0);
    return out;
}

}  // namespace corral::dns
