#include "isolation/launch_message.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace corral {
namespace {

/// Says which layout follows: a zygote and its corrald are one binary, but a wrong version
/// must fail loudly rather than misread.
constexpr uint32_t kLaunchMessageVersion = 1;

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
        for (uint32_t i = 0; i < count && failed_ == nullptr; ++i) items.push_back(text(field));
        return items;
    }
    void fail(const char* field) {
        if (failed_ == nullptr) failed_ = field;
    }
    const char* failed() const { return failed_; }
    bool at_end() const { return at_ == in_.size(); }

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

}  // namespace

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

Result<std::string> encode_launch(const LaunchSpec& spec, std::span<const int> fds) {
    std::string missing;
    auto index = [&](int fd, const char* what) -> int32_t {
        if (fd < 0) return kNoDescriptor;
        auto found = std::find(fds.begin(), fds.end(), fd);
        if (found == fds.end()) {
            missing = what;
            return kNoDescriptor;
        }
        return static_cast<int32_t>(found - fds.begin());
    };
    Writer out;
    out.value(kLaunchMessageVersion);
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
    if (!missing.empty())
        return sys_error(EBADF, "launch message: the " + missing + " descriptor is not attached");
    return out.take();
}

Result<std::unique_ptr<DecodedLaunch>> decode_launch(std::string_view bytes,
                                                     std::vector<UniqueFd> fds) {
    auto decoded = std::make_unique<DecodedLaunch>();
    decoded->fds = std::move(fds);
    Reader in(bytes);
    const char* bad_index = nullptr;
    auto descriptor = [&](const char* field) -> int {
        const int32_t i = in.value<int32_t>(field);
        if (i == kNoDescriptor) return -1;
        if (i < 0 || static_cast<size_t>(i) >= decoded->fds.size()) {
            if (bad_index == nullptr) bad_index = field;
            return -1;
        }
        return decoded->fds[static_cast<size_t>(i)].get();
    };
    if (const uint32_t version = in.value<uint32_t>("version");
        in.failed() == nullptr && version != kLaunchMessageVersion)
        return sys_error(EPROTO, "launch message: version " + std::to_string(version) +
                                     ", this build reads " +
                                     std::to_string(kLaunchMessageVersion));
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
    for (int32_t i : in.array<int32_t>("v1 cgroups")) {
        if (i < 0 || static_cast<size_t>(i) >= decoded->fds.size()) {
            if (bad_index == nullptr) bad_index = "v1 cgroups";
            continue;
        }
        spec.v1_join_fds.push_back(decoded->fds[static_cast<size_t>(i)].get());
    }
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
    if (in.failed() != nullptr)
        return sys_error(EPROTO, std::string("launch message: cut short at ") + in.failed());
    if (!in.at_end()) return sys_error(EPROTO, "launch message: bytes after its end");
    if (bad_index != nullptr)
        return sys_error(EPROTO, std::string("launch message: the ") + bad_index +
                                     " descriptor is not among the " +
                                     std::to_string(decoded->fds.size()) + " attached");
    spec.may_share_memory = false;
    return decoded;
}

}  // namespace corral
