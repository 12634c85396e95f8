#include "isolation/launch_message.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "isolation/holder_plan.hpp"

namespace corral {
namespace {

/// Says which layout follows: a zygote and its corrald are one binary, but a wrong version
/// must fail loudly rather than misread. 2: a request kind follows it (a holder, issue 18).
/// 3: the mount ops decided at setup beneath a fresh /proc or /sys. 4: tmpfs_at_setup
/// among them (mount op kinds are numbered in their order).
constexpr uint32_t kLaunchMessageVersion = 4;

class Writer {
  public:
    template <typename T>
    void value(T v) {
        static_assert(std::is_trivially_copyable_v<T>);
        out_.append(reinterpret_cast<const char*>(&v), sizeof v);
    }
    void text(std::string_view s) {
        value(static_cast<uint32_t>(s.size()));
        out_.append(s);
    }
    template <typename T>
    void array(const std::vector<T>& items) {
        static_assert(std::is_trivially_copyable_v<T>);
        value(static_cast<uint32_t>(items.size()));
        out_.append(reinterpret_cast<const char*>(items.data()), items.size() * sizeof(T));
    }
    void texts(const std::vector<std::string>& items) {
        value(static_cast<uint32_t>(items.size()));
        for (const auto& item : items) text(item);
    }
    std::string take() { return std::move(out_); }

  private:
    std::string out_;
};

/// Reads what Writer wrote; the first short read sets `failed` to the field's name and every
/// later read returns zeros.
class Reader {
  public:
    explicit Reader(std::string_view in) : in_(in) {}

    template <typename T>
    T value(const char* field) {
        T v{};
        if (!take(field, sizeof v)) return v;
        std::memcpy(&v, in_.data() + at_ - sizeof v, sizeof v);
        return v;
    }
    std::string text(const char* field) {
        const uint32_t size = value<uint32_t>(field);
        if (!take(field, size)) return {};
        return std::string(in_.substr(at_ - size, size));
    }
    template <typename T>
    std::vector<T> array(const char* field) {
        const uint32_t count = value<uint32_t>(field);
        if (count > (in_.size() - at_) / sizeof(T)) {
            fail(field);
            return {};
        }
        std::vector<T> items(count);
        if (count != 0) std::memcpy(items.data(), in_.data() + at_, count * sizeof(T));
        at_ += count * sizeof(T);
        return items;
    }
    std::vector<std::string> texts(const char* field) {
        const uint32_t count = value<uint32_t>(field);
        std::vector<std::string> items;
        // Room for all at once (each text takes 4 bytes at least): a vector that grows copies
        // its short strings (held inline) and frees the old buffer unwiped, and in the zygote
        // every later clone is a copy of that heap (launch_zygote_main.cpp, scrub).
        items.reserve(std::min<size_t>(count, remaining() / sizeof(uint32_t)));
        for (uint32_t i = 0; i < count && failed_ == nullptr; ++i) items.push_back(text(field));
        return items;
    }
    void fail(const char* field) {
        if (failed_ == nullptr) failed_ = field;
    }
    const char* failed() const { return failed_; }
    bool at_end() const { return at_ == in_.size(); }
    size_t remaining() const { return in_.size() - at_; }

  private:
    bool take(const char* field, size_t size) {
        if (failed_ != nullptr || size > in_.size() - at_) {
            fail(field);
            return false;
        }
        at_ += size;
        return true;
    }

    std::string_view in_;
    size_t at_ = 0;
    const char* failed_ = nullptr;
};

constexpr int32_t kNoDescriptor = -1;

/// The sender's side of "descriptors by their index": `index` gives a descriptor's place in
/// `fds` (-1 for -1); the first one not there is remembered for the error.
class DescriptorIndexer {
  public:
    explicit DescriptorIndexer(std::span<const int> fds) : fds_(fds) {}
    int32_t index(int fd, const char* what) {
        if (fd < 0) return kNoDescriptor;
        auto found = std::find(fds_.begin(), fds_.end(), fd);
        if (found == fds_.end()) {
            if (missing_.empty()) missing_ = what;
            return kNoDescriptor;
        }
        return static_cast<int32_t>(found - fds_.begin());
    }
    /// EBADF naming the first descriptor not attached, else ok.
    Status check(const char* message) const {
        if (missing_.empty()) return {};
        return sys_error(
            EBADF, std::string(message) + ": the " + missing_ + " descriptor is not attached");
    }

  private:
    std::span<const int> fds_;
    std::string missing_;
};

/// The receiver's side: reads an index and gives the received descriptor's number (-1 for
/// kNoDescriptor); an index outside what arrived is remembered for the error, never used.
class DescriptorReader {
  public:
    DescriptorReader(Reader& in, const std::vector<UniqueFd>& fds) : in_(in), fds_(fds) {}
    /// `required`: kNoDescriptor is an error too (an entry of a list, the holder's cgroup).
    int descriptor(const char* field, bool required = false) {
        return at(in_.value<int32_t>(field), field, required);
    }
    int at(int32_t i, const char* field, bool required = false) {
        if (i == kNoDescriptor && !required) return -1;
        if (i < 0 || static_cast<size_t>(i) >= fds_.size()) {
            if (bad_ == nullptr) bad_ = field;
            return -1;
        }
        return fds_[static_cast<size_t>(i)].get();
    }
    /// Whatever went wrong, in the order a reader needs it: cut short, too long, a bad index.
    Status check(const char* message) const {
        if (in_.failed() != nullptr)
            return sys_error(EPROTO, std::string(message) + ": cut short at " + in_.failed());
        if (!in_.at_end()) return sys_error(EPROTO, std::string(message) + ": bytes after its end");
        if (bad_ != nullptr)
            return sys_error(EPROTO, std::string(message) + ": the " + bad_ +
                                         " descriptor is not among the " +
                                         std::to_string(fds_.size()) + " attached");
        return {};
    }

  private:
    Reader& in_;
    const std::vector<UniqueFd>& fds_;
    const char* bad_ = nullptr;
};

void write_header(Writer& out, ZygoteRequest kind) {
    out.value(kLaunchMessageVersion);
    out.value(static_cast<uint8_t>(kind));
}

/// Reads the header; an error for another version or kind than `expected`.
Status read_header(Reader& in, ZygoteRequest expected, const char* message) {
    const uint32_t version = in.value<uint32_t>("version");
    if (in.failed() == nullptr && version != kLaunchMessageVersion)
        return sys_error(EPROTO, std::string(message) + ": version " + std::to_string(version) +
                                     ", this build reads " + std::to_string(kLaunchMessageVersion));
    const uint8_t kind = in.value<uint8_t>("request kind");
    if (in.failed() == nullptr && kind != static_cast<uint8_t>(expected))
        return sys_error(EPROTO, std::string(message) + ": request kind " + std::to_string(kind) +
                                     ", expected " +
                                     std::to_string(static_cast<uint8_t>(expected)));
    return {};
}

}  // namespace

Result<ZygoteRequest> request_kind(std::string_view bytes) {
    Reader in(bytes);
    const uint32_t version = in.value<uint32_t>("version");
    const uint8_t kind = in.value<uint8_t>("request kind");
    if (in.failed() != nullptr)
        return sys_error(EPROTO, std::string("zygote request: cut short at ") + in.failed());
    if (version != kLaunchMessageVersion)
        return sys_error(EPROTO, "zygote request: version " + std::to_string(version) +
                                     ", this build reads " + std::to_string(kLaunchMessageVersion));
    if (kind != static_cast<uint8_t>(ZygoteRequest::launch) &&
        kind != static_cast<uint8_t>(ZygoteRequest::holder) &&
        kind != static_cast<uint8_t>(ZygoteRequest::ahead))
        return sys_error(EPROTO, "zygote request: unknown request kind " + std::to_string(kind));
    return static_cast<ZygoteRequest>(kind);
}

std::vector<int> launch_descriptors(const LaunchSpec& spec) {
    std::vector<int> fds;
    auto add = [&](int fd) {
        if (fd >= 0 && std::find(fds.begin(), fds.end(), fd) == fds.end()) fds.push_back(fd);
    };
    add(spec.cgroup_fd);
    add(spec.namespace_holder_pidfd);
    add(spec.stdin_fd);
    add(spec.stdout_fd);
    add(spec.stderr_fd);
    add(spec.extra_fd);
    for (int fd : spec.v1_join_fds) add(fd);
    if (spec.landlock_ruleset_fd >= 0)
        add(spec.landlock_ruleset_fd);
    else if (spec.confinement != nullptr && spec.confinement->landlock_ruleset.valid())
        add(spec.confinement->landlock_ruleset.get());
    return fds;
}

Result<std::string> encode_launch(const LaunchSpec& spec, std::span<const int> fds,
                                  ZygoteRequest kind) {
    DescriptorIndexer indexer(fds);
    auto index = [&](int fd, const char* what) { return indexer.index(fd, what); };
    Writer out;
    write_header(out, kind);
    out.texts(spec.argv);
    out.texts(spec.env);
    out.text(spec.cwd);
    out.value(index(spec.cgroup_fd, "cgroup"));
    out.value(index(spec.namespace_holder_pidfd, "namespace holder"));
    out.value(static_cast<int32_t>(spec.namespace_flags));
    out.value(index(spec.stdin_fd, "stdin"));
    out.value(index(spec.stdout_fd, "stdout"));
    out.value(index(spec.stderr_fd, "stderr"));
    out.value(index(spec.extra_fd, "fd 3"));
    std::vector<int32_t> v1;
    for (int fd : spec.v1_join_fds) v1.push_back(index(fd, "v1 cgroup"));
    out.array(v1);
    out.value(static_cast<uint8_t>(spec.new_session));
    out.value(static_cast<uint8_t>(spec.controlling_terminal));
    out.value(static_cast<uint8_t>(spec.refusals != nullptr));
    const Confinement* c = spec.confinement;
    out.value(static_cast<uint8_t>(c != nullptr));
    if (c != nullptr) {
        out.array(c->seccomp_filter);
        out.array(c->seccomp_notifying_filter);
        out.value(static_cast<uint8_t>(c->drop_capabilities));
        out.value(c->keep_capabilities);
        out.value(static_cast<int32_t>(c->last_capability));
        out.value(static_cast<uint8_t>(c->change_ids));
        out.value(static_cast<uint32_t>(c->uid));
        out.value(static_cast<uint32_t>(c->gid));
        out.array(c->groups);
        out.array(c->rlimits);
        const int ruleset =
            spec.landlock_ruleset_fd >= 0 ? spec.landlock_ruleset_fd : c->landlock_ruleset.get();
        out.value(index(ruleset, "Landlock ruleset"));
        out.value(static_cast<uint8_t>(c->no_new_privs));
    }
    CORRAL_TRY(indexer.check("launch message"), "");
    return out.take();
}

Result<std::unique_ptr<DecodedLaunch>> decode_launch(std::string_view bytes,
                                                     std::vector<UniqueFd> fds,
                                                     ZygoteRequest kind) {
    auto decoded = std::make_unique<DecodedLaunch>();
    decoded->fds = std::move(fds);
    Reader in(bytes);
    DescriptorReader descriptors(in, decoded->fds);
    auto descriptor = [&](const char* field) { return descriptors.descriptor(field); };
    CORRAL_TRY(read_header(in, kind, "launch message"), "");
    LaunchSpec& spec = decoded->spec;
    spec.argv = in.texts("argv");
    spec.env = in.texts("env");
    spec.cwd = in.text("cwd");
    spec.cgroup_fd = descriptor("cgroup");
    spec.namespace_holder_pidfd = descriptor("namespace holder");
    spec.namespace_flags = in.value<int32_t>("namespace flags");
    spec.stdin_fd = descriptor("stdin");
    spec.stdout_fd = descriptor("stdout");
    spec.stderr_fd = descriptor("stderr");
    spec.extra_fd = descriptor("fd 3");
    for (int32_t i : in.array<int32_t>("v1 cgroups"))
        if (const int fd = descriptors.at(i, "v1 cgroups", true); fd >= 0)
            spec.v1_join_fds.push_back(fd);
    spec.new_session = in.value<uint8_t>("new session") != 0;
    spec.controlling_terminal = in.value<uint8_t>("controlling terminal") != 0;
    if (in.value<uint8_t>("counts refusals") != 0) {
        decoded->listener_handed_over.emplace(nullptr);
        spec.refusals = &*decoded->listener_handed_over;
    }
    if (in.value<uint8_t>("has confinement") != 0) {
        Confinement& c = decoded->confinement;
        c.seccomp_filter = in.array<sock_filter>("seccomp filter");
        c.seccomp_notifying_filter = in.array<sock_filter>("notifying seccomp filter");
        c.drop_capabilities = in.value<uint8_t>("drop capabilities") != 0;
        c.keep_capabilities = in.value<uint64_t>("kept capabilities");
        c.last_capability = in.value<int32_t>("last capability");
        c.change_ids = in.value<uint8_t>("change ids") != 0;
        c.uid = in.value<uint32_t>("uid");
        c.gid = in.value<uint32_t>("gid");
        c.groups = in.array<gid_t>("groups");
        c.rlimits = in.array<RlimitStep>("rlimits");
        // The confinement owns its ruleset, as compile_confinement's does: apply_confinement
        // restricts only where it has one.
        const int ruleset = descriptor("Landlock ruleset");
        for (auto& fd : decoded->fds)
            if (ruleset >= 0 && fd.get() == ruleset) c.landlock_ruleset = std::move(fd);
        c.no_new_privs = in.value<uint8_t>("no_new_privs") != 0;
        spec.confinement = &c;
    }
    CORRAL_TRY(descriptors.check("launch message"), "");
    spec.may_share_memory = false;
    return decoded;
}

Result<std::string> encode_holder(const HolderPlan& plan, int cgroup_fd, std::span<const int> fds) {
    DescriptorIndexer indexer(fds);
    Writer out;
    write_header(out, ZygoteRequest::holder);
    out.value(indexer.index(cgroup_fd, "cgroup"));
    out.value(static_cast<int32_t>(plan.flags));
    out.text(plan.hostname);
    out.value(indexer.index(plan.report_fd, "report"));
    out.value(indexer.index(plan.go_fd, "go"));
    out.value(indexer.index(plan.lease_fd, "id range lease"));
    out.value(indexer.index(plan.store_holder_fd, "store (holder's end)"));
    out.value(indexer.index(plan.store_daemon_fd, "store (daemon's end)"));
    out.value(static_cast<uint8_t>(plan.rehearse_suid_dumpable));
    out.value(static_cast<uint8_t>(plan.drop_groups));
    out.value(static_cast<uint32_t>(plan.mounts.ops.size()));
    for (const MountOp& op : plan.mounts.ops) {
        out.value(static_cast<uint32_t>(op.kind));
        out.text(op.source);
        out.text(op.target);
        out.text(op.data);
        out.value(static_cast<uint64_t>(op.flags));
        out.value(static_cast<uint8_t>(op.recursive));
        out.text(op.step);
        out.value(indexer.index(op.fd, "mount op tree"));
        out.value(static_cast<uint8_t>(op.optional));
        out.value(static_cast<uint8_t>(op.policy_path));
        out.value(static_cast<uint64_t>(op.expect_dev));
        out.value(static_cast<uint64_t>(op.expect_ino));
    }
    if (cgroup_fd < 0) return sys_error(EBADF, "holder message: no cgroup descriptor");
    CORRAL_TRY(indexer.check("holder message"), "");
    return out.take();
}

Result<std::unique_ptr<DecodedHolder>> decode_holder(std::string_view bytes,
                                                     std::vector<UniqueFd> fds) {
    auto decoded = std::make_unique<DecodedHolder>();
    decoded->fds = std::move(fds);
    Reader in(bytes);
    DescriptorReader descriptors(in, decoded->fds);
    CORRAL_TRY(read_header(in, ZygoteRequest::holder, "holder message"), "");
    HolderPlan& plan = decoded->plan;
    decoded->cgroup_fd = descriptors.descriptor("cgroup", true);
    plan.flags = in.value<int32_t>("namespace flags");
    plan.hostname = in.text("hostname");
    plan.report_fd = descriptors.descriptor("report", true);
    plan.go_fd = descriptors.descriptor("go");
    plan.lease_fd = descriptors.descriptor("id range lease");
    plan.store_holder_fd = descriptors.descriptor("store (holder's end)");
    plan.store_daemon_fd = descriptors.descriptor("store (daemon's end)");
    plan.rehearse_suid_dumpable = in.value<uint8_t>("rehearse suid_dumpable") != 0;
    plan.drop_groups = in.value<uint8_t>("drop groups") != 0;
    // Each op is at least its fixed fields: a count beyond what the bytes can hold is refused
    // before anything is allocated for it.
    const uint32_t count = in.value<uint32_t>("mount ops");
    constexpr size_t kSmallestOp = 4 + 3 * 4 + 8 + 1 + 4 + 4 + 1 + 1 + 8 + 8;
    if (in.failed() == nullptr && count > in.remaining() / kSmallestOp) in.fail("mount ops");
    const char* bad_kind = nullptr;
    // Read in place: no copy of an op's text left behind by a vector that grew (the zygote
    // wipes what it decoded once served, launch_zygote.cpp).
    if (in.failed() == nullptr) plan.mounts.ops.reserve(count);
    for (uint32_t i = 0; i < count && in.failed() == nullptr; ++i) {
        MountOp& op = plan.mounts.ops.emplace_back();
        const uint32_t kind = in.value<uint32_t>("mount op kind");
        if (kind > static_cast<uint32_t>(MountOp::Kind::pivot_into) && bad_kind == nullptr)
            bad_kind = "mount op kind";
        op.kind = static_cast<MountOp::Kind>(kind);
        op.source = in.text("mount op source");
        op.target = in.text("mount op target");
        op.data = in.text("mount op data");
        op.flags = static_cast<unsigned long>(in.value<uint64_t>("mount op flags"));
        op.recursive = in.value<uint8_t>("mount op recursive") != 0;
        op.step = in.text("mount op step");
        op.fd = descriptors.descriptor("mount op tree");
        op.optional = in.value<uint8_t>("mount op optional") != 0;
        op.policy_path = in.value<uint8_t>("mount op policy path") != 0;
        op.expect_dev = static_cast<dev_t>(in.value<uint64_t>("mount op expected device"));
        op.expect_ino = static_cast<ino_t>(in.value<uint64_t>("mount op expected inode"));
    }
    CORRAL_TRY(descriptors.check("holder message"), "");
    if (bad_kind != nullptr)
        return sys_error(EPROTO, std::string("holder message: ") + bad_kind + " out of range");
    return decoded;
}

}  // namespace corral
