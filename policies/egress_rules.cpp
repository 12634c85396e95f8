#include "policies/egress_rules.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstring>

#include "policies/egress_destination.hpp"

namespace corral {
namespace {

std::string lower(std::string_view text) {
    std::string out(text);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

std::string_view strip_dot(std::string_view host) {
    if (!host.empty() && host.back() == '.') host.remove_suffix(1);
    return host;
}

// A DNS name: labels of [A-Za-z0-9_-] (underscore for SRV-style names), 1-63 characters, not
// starting or ending with '-', 253 characters in all.
std::string check_dns_name(std::string_view name) {
    if (name.empty()) return "empty name";
    if (name.size() > 253) return "longer than 253 characters";
    size_t start = 0;
    while (start <= name.size()) {
        size_t dot = name.find('.', start);
        std::string_view label =
            name.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
        if (label.empty()) return "empty label";
        if (label.size() > 63) return "a label longer than 63 characters";
        if (label.front() == '-' || label.back() == '-') return "a label starting or ending with -";
        for (char c : label)
            if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_')
                return c == '*' ? "`*` only as the whole first label (\"*.example.com\")"
                                : "a character that is not [A-Za-z0-9_-]";
        if (dot == std::string_view::npos) break;
        start = dot + 1;
    }
    return "";
}

// Ranges that no mode opens by itself: the daemon's own host (loopback, "this network") and
// link-local, where cloud metadata services answer (169.254.169.254, AWS's fd00:ec2::254). An
// SSRF to the metadata service is how the Capital One breach of 2019 got its credentials.
const std::vector<Cidr>& protected_ranges() {
    static const std::vector<Cidr> ranges = [] {
        std::vector<Cidr> out;
        for (const char* text : {"127.0.0.0/8", "0.0.0.0/8", "169.254.0.0/16", "::1/128", "::/128",
                                 "fe80::/10", "fd00:ec2::254/128"})
            out.push_back(*parse_cidr(text));
        return out;
    }();
    return ranges;
}

}  // namespace

std::optional<IpAddress> IpAddress::parse(std::string_view text) {
    if (text.size() > 2 && text.front() == '[' && text.back() == ']')
        text = text.substr(1, text.size() - 2);
    if (text.empty() || text.size() > 64) return std::nullopt;
    std::string copy(text);
    unsigned char buffer[16];
    if (::inet_pton(AF_INET, copy.c_str(), buffer) == 1) return from_bytes(AF_INET, buffer);
    if (::inet_pton(AF_INET6, copy.c_str(), buffer) == 1) return from_bytes(AF_INET6, buffer);
    return std::nullopt;
}

IpAddress IpAddress::from_bytes(int family, const void* bytes) {
    IpAddress address;
    const auto* raw = static_cast<const uint8_t*>(bytes);
    static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (family == AF_INET6 && std::memcmp(raw, kMapped, 12) == 0) {
        address.family = AF_INET;
        std::memcpy(address.bytes.data(), raw + 12, 4);
        return address;
    }
    address.family = family;
    std::memcpy(address.bytes.data(), raw, family == AF_INET ? 4 : 16);
    return address;
}

std::string IpAddress::to_string() const {
    char text[INET6_ADDRSTRLEN] = {};
    ::inet_ntop(family, bytes.data(), text, sizeof text);
    return text;
}

bool Cidr::contains(const IpAddress& address) const {
    if (address.family != base.family) return false;
    unsigned full = prefix / 8, rest = prefix % 8;
    if (std::memcmp(address.bytes.data(), base.bytes.data(), full) != 0) return false;
    if (rest == 0) return true;
    const uint8_t mask = static_cast<uint8_t>(0xff << (8 - rest));
    return (address.bytes[full] & mask) == (base.bytes[full] & mask);
}

bool Cidr::inside(const Cidr& outer) const {
    return prefix >= outer.prefix && outer.contains(base);
}

Result<Cidr> parse_cidr(std::string_view text) {
    auto bad = [&](const std::string& why) {
        return sys_error(EINVAL, "`" + std::string(text) + "`: " + why);
    };
    const size_t slash = text.find('/');
    const std::string_view written = text.substr(0, slash);
    auto address = IpAddress::parse(written);
    if (!address) return bad("expected a CIDR like 10.0.0.0/8, 2001:db8::/32 or an address");
    // An IPv4-mapped block (::ffff:10.0.0.0/104) is written in IPv6 notation, so its prefix
    // counts 128 bits, but its base was normalised to IPv4 (as every address judged is): take
    // the prefix as written and bring it to the IPv4 block it means. Before, /104 was refused
    // as "0 to 32" and /8 was silently taken as the IPv4 10.0.0.0/8.
    const bool mapped = address->family == AF_INET && written.find(':') != std::string_view::npos;
    const unsigned width = address->family == AF_INET && !mapped ? 32 : 128;
    unsigned prefix = width;
    if (slash != std::string_view::npos) {
        std::string_view digits = text.substr(slash + 1);
        auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), prefix);
        if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() ||
            prefix > width)
            return bad("the prefix length must be a number from 0 to " + std::to_string(width));
    }
    const unsigned written_prefix = prefix;
    if (mapped) {
        // Below /96 the block reaches past ::ffff:0:0/96 into other IPv6 space, which as one
        // IPv4-judged block it cannot mean; say so rather than judge half of it.
        if (prefix < 96)
            return bad("an IPv4-mapped block needs a prefix from 96 to 128 (write the IPv4 "
                       "block, e.g. 10.0.0.0/8, and any IPv6 block separately)");
        prefix -= 96;
    }
    const unsigned bits = address->family == AF_INET ? 32 : 128;
    Cidr cidr{*address, prefix, std::string(text)};
    // Host bits below the prefix are almost always a typo (10.1.2.3/8 for 10.0.0.0/8); say so
    // rather than guess which of the two was meant.
    for (unsigned bit = prefix; bit < bits; ++bit)
        if (cidr.base.bytes[bit / 8] & (0x80 >> (bit % 8)))
            return bad("host bits are set below the /" + std::to_string(written_prefix) +
                       " prefix (write the network address)");
    return cidr;
}

std::string check_host_pattern(std::string_view pattern) {
    auto bad = [&](const std::string& why) {
        return "`" + std::string(pattern) + "`: " + why +
               " (expected an exact name like registry.npmjs.org or a wildcard like "
               "*.example.com)";
    };
    if (pattern == "*") return bad("`*` alone is not a host; use mode: allow-all");
    if (IpAddress::parse(pattern)) return bad("an address; put it in allowedCIDRs");
    if (pattern.find(':') != std::string_view::npos) return bad("no ports or schemes here");
    std::string_view name = strip_dot(pattern);
    if (name.starts_with("*.")) {
        name.remove_prefix(2);
        if (name.find('.') == std::string_view::npos)
            return bad("a wildcard needs at least two labels after `*.`");
    }
    if (std::string problem = check_dns_name(name); !problem.empty()) return bad(problem);
    return "";
}

bool host_matches(std::string_view pattern, std::string_view host) {
    const std::string p = lower(strip_dot(pattern));
    const std::string h = lower(strip_dot(host));
    if (p.starts_with("*.")) return h.size() > p.size() - 1 && h.ends_with(p.substr(1));
    return p == h;
}

std::string_view to_string(EgressMode mode) {
    switch (mode) {
        case EgressMode::allow_all:
            return "allow-all";
        case EgressMode::deny_all:
            return "deny-all";
        case EgressMode::custom:
            return "custom";
    }
    return "deny-all";
}

std::optional<EgressMode> egress_mode_from(std::string_view text) {
    for (EgressMode mode : {EgressMode::allow_all, EgressMode::deny_all, EgressMode::custom})
        if (to_string(mode) == text) return mode;
    return std::nullopt;
}

Status check_egress_spec(const EgressSpec& spec) {
    for (size_t i = 0; i < spec.allowed_hosts.size(); ++i)
        if (std::string problem = check_host_pattern(spec.allowed_hosts[i]); !problem.empty())
            return sys_error(EINVAL, "allowedHosts[" + std::to_string(i) + "]: " + problem);
    const std::pair<const char*, const std::vector<std::string>*> lists[] = {
        {"allowedCIDRs", &spec.allowed_cidrs}, {"deniedCIDRs", &spec.denied_cidrs}};
    for (const auto& [name, list] : lists)
        for (size_t i = 0; i < list->size(); ++i)
            if (auto cidr = parse_cidr((*list)[i]); !cidr)
                return std::move(cidr.error().context(std::string(name) + "[" +
                                                      std::to_string(i) + "]"));
    return {};
}

Result<EgressRules> EgressRules::compile(const EgressSpec& spec,
                                         const std::vector<std::string>& allow) {
    if (auto checked = check_egress_spec(spec); !checked) return std::move(checked.error());
    EgressRules rules;
    rules.spec_ = spec;
    for (const auto& text : spec.allowed_cidrs) rules.allowed_.push_back(*parse_cidr(text));
    for (const auto& text : spec.denied_cidrs) rules.denied_.push_back(*parse_cidr(text));
    for (const auto& entry : allow) {
        auto destination = parse_egress_destination(entry);
        if (!destination) return std::move(destination.error().context("network.allow"));
        auto address = IpAddress::parse(destination->address);
        if (!address) return sys_error(EINVAL, "network.allow `" + entry + "`: not numeric");
        rules.ports_.push_back({*address, destination->port, entry});
    }
    return rules;
}

EgressVerdict EgressRules::check_name(std::string_view host) const {
    if (spec_.mode == EgressMode::deny_all) return {false, "mode deny-all"};
    if (spec_.mode == EgressMode::allow_all) return {true, "mode allow-all"};
    for (const auto& pattern : spec_.allowed_hosts)
        if (host_matches(pattern, host)) return {true, "allowedHosts " + pattern};
    return {false, "`" + std::string(host) + "` is not in allowedHosts"};
}

bool EgressRules::names_reach_cidrs() const {
    return spec_.mode == EgressMode::custom && !allowed_.empty();
}

EgressVerdict EgressRules::check_address(const IpAddress& address, uint16_t port,
                                         bool name_allowed, bool pinned, bool host_local) const {
    for (const auto& cidr : denied_)
        if (cidr.contains(address)) return {false, "deniedCIDRs " + cidr.text};
    for (const auto& rule : ports_)
        if (rule.address == address && rule.port == port)
            return {true, "network.allow " + rule.text};
    if (spec_.mode == EgressMode::deny_all) return {false, "mode deny-all"};
    for (const auto& range : protected_ranges()) {
        if (!range.contains(address) || pinned) continue;
        for (const auto& cidr : allowed_)
            if (cidr.contains(address) && cidr.inside(range))
                return {true, "allowedCIDRs " + cidr.text};
        return {false, "protected range " + range.text +
                           " (loopback, link-local and cloud metadata addresses are refused "
                           "unless allowedCIDRs names them)"};
    }
    if (host_local && !pinned) {
        const unsigned whole = address.family == AF_INET ? 32 : 128;
        for (const auto& cidr : allowed_)
            if (cidr.prefix == whole && cidr.contains(address))
                return {true, "allowedCIDRs " + cidr.text};
        return {false, address.to_string() +
                           " is an address of the daemon's host (its own services are refused "
                           "unless allowedCIDRs names that address itself)"};
    }
    if (spec_.mode == EgressMode::allow_all) return {true, "mode allow-all"};
    for (const auto& cidr : allowed_)
        if (cidr.contains(address)) return {true, "allowedCIDRs " + cidr.text};
    if (name_allowed) return {true, "allowedHosts"};
    return {false, address.to_string() + " is not in allowedCIDRs"};
}

}  // namespace corral
