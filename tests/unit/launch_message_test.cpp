// The launch zygote's message (isolation/launch_message.hpp): every field the child needs comes
// back as sent, descriptors by their place in the attached list, and a message that is cut short,
// too long, of another version or naming a descriptor that did not arrive is an error naming
// what is wrong, never a spec read half.
#include "isolation/launch_message.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace corral {
namespace {

/// `count` descriptors of /dev/null, closed with the vector.
std::vector<UniqueFd> open_null(int count) {
    std::vector<UniqueFd> fds;
    for (int i = 0; i < count; ++i) fds.emplace_back(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    return fds;
}

/// Copies of `fds` as a receiver would get them (other numbers, owned).
std::vector<UniqueFd> received_copies(const std::vector<int>& fds) {
    std::vector<UniqueFd> copies;
    for (int fd : fds) copies.emplace_back(::fcntl(fd, F_DUPFD_CLOEXEC, 100));
    return copies;
}

/// Every message `bytes` cut short (at each length) is refused by `decode`, naming where.
template <typename Decode>
void expect_every_shortened_refused(const std::string& bytes, const std::vector<int>& fds,
                                    Decode decode) {
    for (size_t length = 0; length < bytes.size(); ++length) {
        auto decoded = decode(std::string_view(bytes).substr(0, length), received_copies(fds));
        ASSERT_FALSE(decoded) << "a message of " << length << " of " << bytes.size()
                              << " bytes was read";
        EXPECT_EQ(decoded.error().code, EPROTO);
        EXPECT_NE(decoded.error().describe().find("cut short at "), std::string::npos)
            << decoded.error().describe();
    }
}

struct Sent {
    std::vector<UniqueFd> own;  ///< what the spec's numbers are
    Confinement confinement;
    std::optional<SeccompRefusals> refusals;
    LaunchSpec spec;
};

/// A spec with every field set to something other than its default.
std::unique_ptr<Sent> full_spec() {
    auto sent = std::make_unique<Sent>();
    sent->own = open_null(9);
    Confinement& c = sent->confinement;
    c.seccomp_filter = {{0x20, 0, 0, 4}, {0x06, 0, 0, 0x7fff0000}};
    c.seccomp_notifying_filter = {{0x06, 0, 0, 0x7fc00000}};
    c.drop_capabilities = false;
    c.keep_capabilities = 0x1234;
    c.last_capability = 39;
    c.change_ids = true;
    c.uid = 1000;
    c.gid = 1001;
    c.groups = {4, 24, 27};
    c.rlimits = {{RLIMIT_NOFILE, {64, 128}}, {RLIMIT_CORE, {0, 0}}};
    c.landlock_ruleset = std::move(sent->own[8]);
    c.no_new_privs = false;
    sent->refusals.emplace(nullptr);
    LaunchSpec& s = sent->spec;
    s.argv = {"/bin/echo", "two words", ""};
    s.env = {"A=1", "EMPTY="};
    s.cwd = "/tmp";
    s.cgroup_fd = sent->own[0].get();
    s.v1_join_fds = {sent->own[1].get(), sent->own[2].get()};
    s.namespace_holder_pidfd = sent->own[3].get();
    s.namespace_flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWUSER;
    s.stdin_fd = sent->own[4].get();
    s.stdout_fd = sent->own[5].get();
    s.stderr_fd = sent->own[5].get();  // one descriptor in two roles crosses once
    s.extra_fd = sent->own[6].get();
    s.new_session = false;
    s.controlling_terminal = true;
    s.confinement = &c;
    s.refusals = &*sent->refusals;
    return sent;
}

TEST(LaunchMessage, EveryFieldComesBackAndDescriptorsByTheirPlace) {
    auto sent = full_spec();
    const LaunchSpec& s = sent->spec;
    const std::vector<int> fds = launch_descriptors(s);
    ASSERT_EQ(fds.size(), 8u) << "cgroup, holder, stdin, stdout=stderr, fd 3, 2 v1, Landlock";
    auto bytes = encode_launch(s, fds);
    ASSERT_TRUE(bytes) << bytes.error().describe();
    auto copies = received_copies(fds);
    std::vector<int> theirs;
    for (const auto& fd : copies) theirs.push_back(fd.get());
    auto decoded = decode_launch(*bytes, std::move(copies));
    ASSERT_TRUE(decoded) << decoded.error().describe();
    const LaunchSpec& d = (*decoded)->spec;
    auto same_place = [&](int ours, int got) {
        for (size_t i = 0; i < fds.size(); ++i)
            if (fds[i] == ours) return theirs[i] == got;
        return false;
    };
    EXPECT_EQ(d.argv, s.argv);
    EXPECT_EQ(d.env, s.env);
    EXPECT_EQ(d.cwd, s.cwd);
    EXPECT_TRUE(same_place(s.cgroup_fd, d.cgroup_fd));
    ASSERT_EQ(d.v1_join_fds.size(), 2u);
    EXPECT_TRUE(same_place(s.v1_join_fds[0], d.v1_join_fds[0]));
    EXPECT_TRUE(same_place(s.v1_join_fds[1], d.v1_join_fds[1]));
    EXPECT_TRUE(same_place(s.namespace_holder_pidfd, d.namespace_holder_pidfd));
    EXPECT_EQ(d.namespace_flags, s.namespace_flags);
    EXPECT_TRUE(same_place(s.stdin_fd, d.stdin_fd));
    EXPECT_TRUE(same_place(s.stdout_fd, d.stdout_fd));
    EXPECT_EQ(d.stdout_fd, d.stderr_fd);
    EXPECT_TRUE(same_place(s.extra_fd, d.extra_fd));
    EXPECT_EQ(d.new_session, false);
    EXPECT_EQ(d.controlling_terminal, true);
    EXPECT_NE(d.refusals, nullptr) << "the child must hand its listener over";
    EXPECT_FALSE(d.may_share_memory);
    ASSERT_NE(d.confinement, nullptr);
    const Confinement& c = *d.confinement;
    const Confinement& o = sent->confinement;
    ASSERT_EQ(c.seccomp_filter.size(), o.seccomp_filter.size());
    EXPECT_EQ(std::memcmp(c.seccomp_filter.data(), o.seccomp_filter.data(),
                          o.seccomp_filter.size() * sizeof(sock_filter)),
              0);
    ASSERT_EQ(c.seccomp_notifying_filter.size(), 1u);
    EXPECT_EQ(c.seccomp_notifying_filter[0].k, 0x7fc00000u);
    EXPECT_EQ(c.drop_capabilities, false);
    EXPECT_EQ(c.keep_capabilities, 0x1234u);
    EXPECT_EQ(c.last_capability, 39);
    EXPECT_EQ(c.change_ids, true);
    EXPECT_EQ(c.uid, 1000u);
    EXPECT_EQ(c.gid, 1001u);
    EXPECT_EQ(c.groups, o.groups);
    ASSERT_EQ(c.rlimits.size(), 2u);
    EXPECT_EQ(c.rlimits[0].resource, RLIMIT_NOFILE);
    EXPECT_EQ(c.rlimits[0].value.rlim_cur, 64u);
    EXPECT_EQ(c.rlimits[0].value.rlim_max, 128u);
    // The ruleset is the confinement's own, as compile_confinement's is: apply_confinement
    // restricts only where the confinement has one (a lost ruleset would be a sandbox without
    // Landlock).
    ASSERT_TRUE(c.landlock_ruleset.valid());
    EXPECT_TRUE(same_place(o.landlock_ruleset.get(), c.landlock_ruleset.get()));
    EXPECT_EQ(c.no_new_privs, false);
}

/// `true` with no descriptor at all (a LaunchSpec's stdout and stderr are ours by default).
LaunchSpec spec_without_descriptors() {
    LaunchSpec s;
    s.argv = {"true"};
    s.stdout_fd = -1;
    s.stderr_fd = -1;
    return s;
}

TEST(LaunchMessage, ASpecWithoutConfinementOrDescriptorsStaysWithout) {
    LaunchSpec s = spec_without_descriptors();
    auto bytes = encode_launch(s, {});
    ASSERT_TRUE(bytes) << bytes.error().describe();
    auto decoded = decode_launch(*bytes, {});
    ASSERT_TRUE(decoded) << decoded.error().describe();
    EXPECT_EQ((*decoded)->spec.confinement, nullptr);
    EXPECT_EQ((*decoded)->spec.refusals, nullptr);
    EXPECT_EQ((*decoded)->spec.cgroup_fd, -1);
    EXPECT_EQ((*decoded)->spec.stdin_fd, -1);
}

// A request to start a waiting child (launch_ahead.hpp) and a launch are the same bytes but for
// their kind, and neither is read as the other: a zygote never starts a command for a request
// that only asked it to wait, nor a waiting child for a command.
TEST(LaunchMessage, AnAheadRequestIsItsOwnKindAndNeverReadAsALaunch) {
    LaunchSpec s = spec_without_descriptors();
    auto ahead = encode_launch(s, {}, ZygoteRequest::ahead);
    ASSERT_TRUE(ahead) << ahead.error().describe();
    ASSERT_TRUE(request_kind(*ahead));
    EXPECT_EQ(*request_kind(*ahead), ZygoteRequest::ahead);
    auto as_launch = decode_launch(*ahead, {});
    ASSERT_FALSE(as_launch);
    EXPECT_EQ(as_launch.error().code, EPROTO);
    EXPECT_TRUE(decode_launch(*ahead, {}, ZygoteRequest::ahead));
    auto launch = encode_launch(s, {});
    ASSERT_TRUE(launch);
    EXPECT_EQ(*request_kind(*launch), ZygoteRequest::launch);
    EXPECT_FALSE(decode_launch(*launch, {}, ZygoteRequest::ahead));
}

TEST(LaunchMessage, ASpecNamingADescriptorNotAttachedIsNotEncoded) {
    auto sent = full_spec();
    std::vector<int> fds = launch_descriptors(sent->spec);
    fds.pop_back();  // the Landlock ruleset
    auto bytes = encode_launch(sent->spec, fds);
    ASSERT_FALSE(bytes);
    EXPECT_NE(bytes.error().describe().find("Landlock ruleset"), std::string::npos)
        << bytes.error().describe();
}

TEST(LaunchMessage, EveryShortenedMessageIsRefusedNamingWhereItEnds) {
    auto sent = full_spec();
    const std::vector<int> fds = launch_descriptors(sent->spec);
    auto bytes = encode_launch(sent->spec, fds);
    ASSERT_TRUE(bytes);
    expect_every_shortened_refused(*bytes, fds, [](std::string_view b, std::vector<UniqueFd> f) { return decode_launch(b, std::move(f)); });
}

TEST(LaunchMessage, TrailingBytesAnotherVersionAndMissingDescriptorsAreRefused) {
    auto sent = full_spec();
    const std::vector<int> fds = launch_descriptors(sent->spec);
    auto bytes = encode_launch(sent->spec, fds);
    ASSERT_TRUE(bytes);

    auto longer = decode_launch(*bytes + "x", received_copies(fds));
    ASSERT_FALSE(longer);
    EXPECT_NE(longer.error().describe().find("bytes after its end"), std::string::npos);

    std::string other = *bytes;
    other[0] = static_cast<char>(other[0] + 1);
    auto version = decode_launch(other, received_copies(fds));
    ASSERT_FALSE(version);
    EXPECT_NE(version.error().describe().find("version"), std::string::npos)
        << version.error().describe();

    auto fewer = received_copies(fds);
    fewer.resize(3);  // the holder's pidfd arrived, the rest did not
    auto missing = decode_launch(*bytes, std::move(fewer));
    ASSERT_FALSE(missing);
    EXPECT_NE(missing.error().describe().find("not among the 3 attached"), std::string::npos)
        << missing.error().describe();
}

// A count that claims more entries than bytes remain must not allocate for them (a length read
// as 4 billion would otherwise be a 4-billion-entry vector).
TEST(LaunchMessage, ACountLargerThanTheMessageIsRefusedWithoutAllocatingIt) {
    auto header = encode_launch(spec_without_descriptors(), {});  // version and kind, then argv
    ASSERT_TRUE(header);
    std::string bytes = header->substr(0, 5);
    const uint32_t huge = 0xffffffffu;
    bytes.append(reinterpret_cast<const char*>(&huge), 4);  // argv: 4 billion strings
    auto decoded = decode_launch(bytes, {});
    ASSERT_FALSE(decoded);
    EXPECT_NE(decoded.error().describe().find("cut short at argv"), std::string::npos)
        << decoded.error().describe();
}

// ---- a namespace holder's plan (holder_plan.hpp), for a holder cloned in the zygote ----

struct SentHolder {
    std::vector<UniqueFd> own;  ///< what the plan's numbers are
    HolderPlan plan;
    int cgroup_fd = -1;
};

MountOp op(MountOp::Kind kind, std::string target, int fd = -1) {
    MountOp o;
    o.kind = kind;
    o.source = "/src" + target;
    o.target = std::move(target);
    o.data = "mode=0755";
    o.flags = 0x1234'5678'9abcULL & ~0UL;
    o.recursive = true;
    o.step = "step for " + o.target;
    o.fd = fd;
    o.optional = true;
    o.policy_path = true;
    o.expect_dev = 0x0801;
    o.expect_ino = 0x1234'5678'9abcULL;
    return o;
}

/// A plan with every setting other than its default, and ops of every kind.
std::unique_ptr<SentHolder> full_plan() {
    auto sent = std::make_unique<SentHolder>();
    sent->own = open_null(8);
    HolderPlan& p = sent->plan;
    sent->cgroup_fd = sent->own[0].get();
    p.flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWUSER | CLONE_NEWUTS | CLONE_NEWNET;
    p.hostname = "corral-test";
    p.report_fd = sent->own[1].get();
    p.go_fd = sent->own[2].get();
    p.go_write_fd = sent->own[3].get();  // never crosses
    p.lease_fd = sent->own[4].get();
    p.store_holder_fd = sent->own[5].get();
    p.store_daemon_fd = sent->own[6].get();
    p.rehearse_suid_dumpable = true;
    p.drop_groups = true;
    p.heap_start = 0x5555'0000;  // the cloner's own: never crosses
    for (int k = 0; k <= static_cast<int>(MountOp::Kind::pivot_into); ++k)
        p.mounts.ops.push_back(op(static_cast<MountOp::Kind>(k), "/t" + std::to_string(k)));
    p.mounts.ops[static_cast<size_t>(MountOp::Kind::attach_tree)].fd = sent->own[7].get();
    p.mounts.ops[static_cast<size_t>(MountOp::Kind::attach_tree_beneath)].fd = sent->own[7].get();
    p.mounts.ops[0].optional = false;
    p.mounts.ops[0].policy_path = false;
    p.mounts.ops[0].data.clear();
    return sent;
}

std::vector<int> numbers(const std::vector<UniqueFd>& fds) {
    std::vector<int> out;
    for (const auto& fd : fds) out.push_back(fd.get());
    return out;
}

TEST(HolderMessage, EverySettingAndMountOpComesBackAndDescriptorsByTheirPlace) {
    auto sent = full_plan();
    const HolderPlan& p = sent->plan;
    const std::vector<int> fds = descriptors_of(p, sent->cgroup_fd);
    ASSERT_EQ(fds.size(), 7u) << "cgroup first, report, go, lease, store x2, one tree; no go_write";
    EXPECT_EQ(fds[0], sent->cgroup_fd);
    auto bytes = encode_holder(p, sent->cgroup_fd, fds);
    ASSERT_TRUE(bytes) << bytes.error().describe();
    EXPECT_EQ(request_kind(*bytes).ok() ? *request_kind(*bytes) : ZygoteRequest::launch,
              ZygoteRequest::holder);
    auto copies = received_copies(fds);
    const std::vector<int> theirs = numbers(copies);
    auto decoded = decode_holder(*bytes, std::move(copies));
    ASSERT_TRUE(decoded) << decoded.error().describe();
    const HolderPlan& d = (*decoded)->plan;
    auto same_place = [&](int ours, int got) {
        for (size_t i = 0; i < fds.size(); ++i)
            if (fds[i] == ours) return theirs[i] == got;
        return false;
    };
    EXPECT_TRUE(same_place(sent->cgroup_fd, (*decoded)->cgroup_fd));
    EXPECT_EQ(d.flags, p.flags);
    EXPECT_EQ(d.hostname, p.hostname);
    EXPECT_TRUE(same_place(p.report_fd, d.report_fd));
    EXPECT_TRUE(same_place(p.go_fd, d.go_fd));
    EXPECT_EQ(d.go_write_fd, -1) << "the parent's end of `go` crossed";
    EXPECT_TRUE(same_place(p.lease_fd, d.lease_fd));
    EXPECT_TRUE(same_place(p.store_holder_fd, d.store_holder_fd));
    EXPECT_TRUE(same_place(p.store_daemon_fd, d.store_daemon_fd));
    EXPECT_TRUE(d.rehearse_suid_dumpable);
    EXPECT_TRUE(d.drop_groups);
    EXPECT_EQ(d.heap_start, 0u) << "the cloner's heap is its own to name";
    ASSERT_EQ(d.mounts.ops.size(), p.mounts.ops.size());
    for (size_t i = 0; i < p.mounts.ops.size(); ++i) {
        SCOPED_TRACE(p.mounts.ops[i].step);
        const MountOp& a = p.mounts.ops[i];
        const MountOp& b = d.mounts.ops[i];
        EXPECT_EQ(b.kind, a.kind);
        EXPECT_EQ(b.source, a.source);
        EXPECT_EQ(b.target, a.target);
        EXPECT_EQ(b.data, a.data);
        EXPECT_EQ(b.flags, a.flags);
        EXPECT_EQ(b.recursive, a.recursive);
        EXPECT_EQ(b.step, a.step);
        if (a.fd < 0)
            EXPECT_EQ(b.fd, -1);
        else
            EXPECT_TRUE(same_place(a.fd, b.fd));
        EXPECT_EQ(b.optional, a.optional);
        EXPECT_EQ(b.policy_path, a.policy_path);
        EXPECT_EQ(b.expect_dev, a.expect_dev);
        EXPECT_EQ(b.expect_ino, a.expect_ino);
    }
}

TEST(HolderMessage, APlanWithoutMountsOrOptionalDescriptorsStaysWithout) {
    auto fds = open_null(2);
    HolderPlan p;
    p.flags = CLONE_NEWPID;
    p.report_fd = fds[1].get();
    const std::vector<int> list = descriptors_of(p, fds[0].get());
    auto bytes = encode_holder(p, fds[0].get(), list);
    ASSERT_TRUE(bytes) << bytes.error().describe();
    auto decoded = decode_holder(*bytes, received_copies(list));
    ASSERT_TRUE(decoded) << decoded.error().describe();
    EXPECT_EQ((*decoded)->plan.go_fd, -1);
    EXPECT_EQ((*decoded)->plan.lease_fd, -1);
    EXPECT_EQ((*decoded)->plan.store_holder_fd, -1);
    EXPECT_TRUE((*decoded)->plan.mounts.ops.empty());
    EXPECT_TRUE((*decoded)->plan.hostname.empty());
}

TEST(HolderMessage, APlanNamingADescriptorNotAttachedIsNotEncoded) {
    auto sent = full_plan();
    std::vector<int> fds = descriptors_of(sent->plan, sent->cgroup_fd);
    fds.pop_back();  // the detached tree
    auto bytes = encode_holder(sent->plan, sent->cgroup_fd, fds);
    ASSERT_FALSE(bytes);
    EXPECT_NE(bytes.error().describe().find("mount op tree"), std::string::npos)
        << bytes.error().describe();
}

TEST(HolderMessage, EveryShortenedMessageIsRefusedNamingWhereItEnds) {
    auto sent = full_plan();
    const std::vector<int> fds = descriptors_of(sent->plan, sent->cgroup_fd);
    auto bytes = encode_holder(sent->plan, sent->cgroup_fd, fds);
    ASSERT_TRUE(bytes);
    expect_every_shortened_refused(*bytes, fds, decode_holder);
}

// Every byte flipped in turn: the decoder refuses the message or reads a plan whose every kind
// is a real one and whose every descriptor is one that arrived (never a number it made up).
TEST(HolderMessage, AFlippedByteIsRefusedOrReadWithinBounds) {
    auto sent = full_plan();
    const std::vector<int> fds = descriptors_of(sent->plan, sent->cgroup_fd);
    auto bytes = encode_holder(sent->plan, sent->cgroup_fd, fds);
    ASSERT_TRUE(bytes);
    size_t refused = 0;
    for (size_t at = 0; at < bytes->size(); ++at) {
        std::string flipped = *bytes;
        flipped[at] = static_cast<char>(flipped[at] ^ 0xff);
        auto copies = received_copies(fds);
        const std::vector<int> theirs = numbers(copies);
        auto decoded = decode_holder(flipped, std::move(copies));
        if (!decoded) {
            ++refused;
            EXPECT_EQ(decoded.error().code, EPROTO) << decoded.error().describe();
            EXPECT_EQ(decoded.error().describe().rfind("holder message: ", 0), 0u)
                << decoded.error().describe();
            continue;
        }
        const HolderPlan& d = (*decoded)->plan;
        auto arrived = [&](int fd) {
            return std::find(theirs.begin(), theirs.end(), fd) != theirs.end();
        };
        EXPECT_TRUE(arrived((*decoded)->cgroup_fd)) << "byte " << at;
        EXPECT_TRUE(arrived(d.report_fd)) << "byte " << at;
        for (int fd : {d.go_fd, d.lease_fd, d.store_holder_fd, d.store_daemon_fd})
            EXPECT_TRUE(fd == -1 || arrived(fd)) << "byte " << at;
        for (const MountOp& o : d.mounts.ops) {
            EXPECT_LE(static_cast<uint32_t>(o.kind),
                      static_cast<uint32_t>(MountOp::Kind::pivot_into))
                << "byte " << at;
            EXPECT_TRUE(o.fd == -1 || arrived(o.fd)) << "byte " << at;
        }
    }
    EXPECT_GT(refused, bytes->size() / 4) << "lengths, kinds and indexes are checked";
}

// A malformed message is refused with the field named, never read half.
TEST(HolderMessage, AMalformedMessageIsRefusedNamingTheField) {
    auto sent = full_plan();
    const std::vector<int> fds = descriptors_of(sent->plan, sent->cgroup_fd);
    auto bytes = encode_holder(sent->plan, sent->cgroup_fd, fds);
    ASSERT_TRUE(bytes);
    auto refused_for = [&](std::string message, std::vector<UniqueFd> given) {
        auto decoded = decode_holder(message, std::move(given));
        EXPECT_FALSE(decoded);
        return decoded ? std::string() : decoded.error().describe();
    };
    EXPECT_NE(refused_for(*bytes + "x", received_copies(fds)).find("bytes after its end"),
              std::string::npos);
    auto fewer = received_copies(fds);
    fewer.resize(1);  // the cgroup arrived, nothing else
    EXPECT_NE(
        refused_for(*bytes, std::move(fewer)).find("the report descriptor is not among the 1"),
        std::string::npos);
    EXPECT_NE(refused_for(*bytes, {}).find("the cgroup descriptor is not among the 0"),
              std::string::npos);
    // The first op's kind, one past the last kind there is.
    HolderPlan one;
    one.report_fd = fds[1];
    one.mounts.ops.push_back(op(MountOp::Kind::mkdir, "/x"));
    const std::vector<int> two = {fds[0], fds[1]};
    auto small = encode_holder(one, fds[0], two);
    ASSERT_TRUE(small);
    HolderPlan none = one.without_trees();
    none.mounts.ops.clear();
    auto before_ops = encode_holder(none, fds[0], two);  // the ops follow what it holds
    ASSERT_TRUE(before_ops);
    const size_t kind_at = before_ops->size();
    const uint32_t past = static_cast<uint32_t>(MountOp::Kind::pivot_into) + 1;
    std::string bad_kind = *small;
    std::memcpy(bad_kind.data() + kind_at, &past, 4);
    EXPECT_NE(refused_for(bad_kind, received_copies(two)).find("mount op kind out of range"),
              std::string::npos);
    // A launch is not a holder, nor a holder a launch.
    auto launch = encode_launch(spec_without_descriptors(), {});
    ASSERT_TRUE(launch);
    EXPECT_NE(refused_for(*launch, {}).find("request kind 1, expected 2"), std::string::npos);
    auto as_launch = decode_launch(*bytes, received_copies(fds));
    ASSERT_FALSE(as_launch);
    EXPECT_NE(as_launch.error().describe().find("request kind 2, expected 1"), std::string::npos);
    EXPECT_FALSE(request_kind(std::string_view(*bytes).substr(0, 4)));
    std::string unknown = *bytes;
    unknown[4] = 9;
    ASSERT_FALSE(request_kind(unknown));
    EXPECT_NE(request_kind(unknown).error().describe().find("unknown request kind 9"),
              std::string::npos);
}

// A count of ops larger than the bytes could hold is refused before a vector of it is made.
TEST(HolderMessage, AnOpCountLargerThanTheMessageIsRefusedWithoutAllocatingIt) {
    auto fds = open_null(2);
    HolderPlan p;
    p.report_fd = fds[1].get();
    const std::vector<int> list = {fds[0].get(), fds[1].get()};
    auto bytes = encode_holder(p, fds[0].get(), list);
    ASSERT_TRUE(bytes);
    std::string huge = *bytes;
    const uint32_t count = 0xffffffffu;
    std::memcpy(huge.data() + huge.size() - 4, &count, 4);  // the op count is last
    auto decoded = decode_holder(huge, received_copies(list));
    ASSERT_FALSE(decoded);
    EXPECT_NE(decoded.error().describe().find("cut short at mount ops"), std::string::npos)
        << decoded.error().describe();
}

}  // namespace
}  // namespace corral
