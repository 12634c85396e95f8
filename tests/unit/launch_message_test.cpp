// The launch zygote's message (isolation/launch_message.hpp): every field the child needs comes
// back as sent, descriptors by their place in the attached list, and a message that is cut short,
// too long, of another version or naming a descriptor that did not arrive is an error naming
// what is wrong, never a spec read half.
#include "isolation/launch_message.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

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

TEST(LaunchMessage, ASpecWithoutConfinementOrDescriptorsStaysWithout) {
    LaunchSpec s;
    s.argv = {"true"};
    s.stdout_fd = -1;
    s.stderr_fd = -1;
    auto bytes = encode_launch(s, {});
    ASSERT_TRUE(bytes) << bytes.error().describe();
    auto decoded = decode_launch(*bytes, {});
    ASSERT_TRUE(decoded) << decoded.error().describe();
    EXPECT_EQ((*decoded)->spec.confinement, nullptr);
    EXPECT_EQ((*decoded)->spec.refusals, nullptr);
    EXPECT_EQ((*decoded)->spec.cgroup_fd, -1);
    EXPECT_EQ((*decoded)->spec.stdin_fd, -1);
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
    for (size_t length = 0; length < bytes->size(); ++length) {
        auto decoded = decode_launch(std::string_view(*bytes).substr(0, length),
                                     received_copies(fds));
        ASSERT_FALSE(decoded) << "a message of " << length << " of " << bytes->size()
                              << " bytes was read";
        EXPECT_EQ(decoded.error().code, EPROTO);
        EXPECT_NE(decoded.error().describe().find("cut short at "), std::string::npos)
            << decoded.error().describe();
    }
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
    std::string bytes(4, '\0');
    const uint32_t version = 1;
    std::memcpy(bytes.data(), &version, 4);
    const uint32_t huge = 0xffffffffu;
    bytes.append(reinterpret_cast<const char*>(&huge), 4);  // argv: 4 billion strings
    auto decoded = decode_launch(bytes, {});
    ASSERT_FALSE(decoded);
    EXPECT_NE(decoded.error().describe().find("cut short at argv"), std::string::npos)
        << decoded.error().describe();
}

}  // namespace
}  // namespace corral
