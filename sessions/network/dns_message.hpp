#pragma once
// The DNS wire format, as far as the session resolver needs it (dns_resolver.hpp): parse one
// query a sandbox sent, build the answer. Pure functions, no syscalls: unit-testable.
//
// This is hostile-input code: every byte comes from a sandbox that may want to crash or stall
// the daemon, or to make it read a name one way while the rules read it another. DNS parsers
// have a long record of exactly that:
//   - dnsmasq CVE-2017-14491 (heap overflow building answers from names expanded past their
//     buffer) and the DNSpooq set, CVE-2020-25681..25687 (heap overflows in extract_name and
//     sort_rrset, and a weak check that let answers be matched to the wrong question);
//   - compression loops: a pointer that points at itself or at a later pointer back to it makes
//     a naive reader spin forever (e.g. CVE-2017-9345 Wireshark DNS, CVE-2006-6870 Avahi).
// So, strictly:
//   - a message is at most kMaxMessage bytes; every read is bounds-checked against it;
//   - a label is at most 63 bytes, a name at most 255 on the wire (RFC 1035 2.3.4) and at most
//     kMaxLabels labels; labels hold only letters, digits, `-` and `_` (a `.` or a NUL inside a
//     label would let "allowed.example.test" be one label of a name the rules never saw);
//   - the reserved label types 0x40 and 0x80 are refused; a compression pointer must point
//     strictly backwards, below every offset the name has visited so far, and not into the
//     header: so no loop and no forward or out-of-range pointer is possible, and the hops are
//     bounded besides (kMaxPointers);
//   - a query has exactly one question, no answer or authority records, at most one additional
//     record (an EDNS OPT, RFC 6891), and nothing after it; a message with the QR bit set (a
//     response) is never answered, so two resolvers cannot be made to answer each other.
// Answers are built into a buffer of at most the size the transport allows (512 bytes over UDP
// without EDNS, the advertised EDNS size up to kMaxUdpAnswer, 65535 over TCP); what does not fit
// is left out and the TC bit set, so the client asks again over TCP (RFC 1035 4.2.1, RFC 7766).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "policies/egress_rules.hpp"

namespace corral::dns {

inline constexpr size_t kHeaderBytes = 12;
inline constexpr size_t kMaxMessage = 65535;  ///< TCP's 16-bit length prefix
inline constexpr size_t kMaxNameWire = 255;   ///< RFC 1035 2.3.4
inline constexpr size_t kMaxLabel = 63;
inline constexpr size_t kMaxLabels = 127;         ///< 255 bytes hold at most 127 one-byte labels
inline constexpr size_t kMaxPointers = 16;        ///< compression hops per name
inline constexpr size_t kClassicUdpAnswer = 512;  ///< RFC 1035 without EDNS
inline constexpr size_t kMaxUdpAnswer = 1232;     ///< the DNS flag day 2020 EDNS size
inline constexpr size_t kMaxAnswers = 32;         ///< records in one answer, whatever fits

enum class Rcode : uint8_t {
    noerror = 0,
    formerr = 1,
    servfail = 2,
    nxdomain = 3,
    notimp = 4,
    refused = 5,
};

inline constexpr uint16_t kTypeA = 1;
inline constexpr uint16_t kTypeAAAA = 28;
inline constexpr uint16_t kTypeOpt = 41;
inline constexpr uint16_t kClassIn = 1;

/// One parsed query.
struct Query {
    uint16_t id = 0;
    uint16_t opcode = 0;
    bool recursion_desired = false;
    std::string name;  ///< lower case, dotted, no trailing dot; "" for the root
    uint16_t type = 0;
    uint16_t klass = 0;
    std::vector<uint8_t> question;          ///< the question's bytes as sent (echoed in the answer:
                                            ///< case and all, for clients that randomise case)
    std::optional<uint16_t> edns_udp_size;  ///< the OPT record's payload size, when present
};

/// Why a message was not parsed, and what to do with it.
struct ParseFailure {
    /// Send nothing: too short for a header, or a response (QR set). Otherwise answer `rcode`
    /// (FORMERR, NOTIMP) with `id` and no question.
    bool drop = false;
    uint16_t id = 0;
    Rcode rcode = Rcode::formerr;
    std::string reason;  ///< for logs and tests: "compression pointer points forward"
};

/// The query in `message`, or why not. Never reads outside `message`.
struct ParseResult {
    std::optional<Query> query;
    ParseFailure failure;  ///< meaningful when !query
};
ParseResult parse_query(std::span<const uint8_t> message);

/// Reads the (possibly compressed) name at `offset` of `message` under the rules above, and
/// moves `offset` past it (past the first pointer, if any). nullopt with `why` set when the name
/// breaks a rule. Public for the tests of the compression rules.
std::optional<std::string> read_name(std::span<const uint8_t> message, size_t& offset,
                                     std::string& why);

/// The answer to `query`: `rcode`, and one A or AAAA record per address of the query's type
/// (others are skipped) with `ttl`, as many as fit in `max_size` bytes (TC set when some did
/// not). An EDNS query gets an OPT record back.
std::vector<uint8_t> build_answer(const Query& query, Rcode rcode,
                                  const std::vector<IpAddress>& addresses, uint32_t ttl,
                                  size_t max_size);
/// The answer to a message that did not parse (`failure.drop` false): header only.
std::vector<uint8_t> build_failure(const ParseFailure& failure);
/// A query for `name` (dotted, labels of at most 63 bytes) of `type`, class IN, RD set: what a
/// stub resolver sends (tests and the benchmark ask the resolver with it).
std::vector<uint8_t> build_query(const std::string& name, uint16_t type, uint16_t id);
/// The largest UDP answer for `query`: 512, or its EDNS size clamped to [512, kMaxUdpAnswer].
size_t udp_answer_limit(const Query& query);

}  // namespace corral::dns
