#pragma once
// A LaunchSpec and its Confinement as bytes, for a launcher in another process (the launch
// zygote, launch_zygote.hpp). The spec's descriptors travel beside the bytes (SCM_RIGHTS), and
// the bytes name each one by its index in that list, so the receiver's numbers never matter.
//
// Only what the child needs crosses: the command, its stdio, cgroup, namespaces and confinement.
// The marked seccomp program and the refusal counts stay with the sender, who reads the child's
// report channel; a spec that counts refusals says only that its child hands the listener over.
//
// Both ends are corrald (the zygote is its fork), but the decoder still checks every length and
// index against what arrived: a message it cannot read whole is an error, never a guess.

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.hpp"
#include "base/unique_fd.hpp"
#include "isolation/confinement.hpp"
#include "isolation/holder_plan.hpp"
#include "isolation/launcher.hpp"
#include "isolation/seccomp_listener.hpp"

namespace corral {

/// What a message to the zygote asks for (its header: a version, then this).
enum class ZygoteRequest : uint8_t {
    launch = 1,  ///< encode_launch: start a command
    holder = 2,  ///< encode_holder: clone a session's namespace holder
    ahead = 3,   ///< encode_launch of a session's part: start a waiting child (launch_ahead.hpp)
};
/// The kind of request `bytes` is; EPROTO for a message too short, of another version or kind.
Result<ZygoteRequest> request_kind(std::string_view bytes);

/// Every descriptor `spec` names, once each, in a fixed order (the Landlock ruleset at
/// spec.landlock_ruleset_fd when set, else the confinement's own).
std::vector<int> launch_descriptors(const LaunchSpec& spec);

/// The bytes of `spec` with its descriptors named by their index in `fds`
/// (launch_descriptors(spec)). Fails only for a spec that names a descriptor not in `fds`.
/// With `kind` ahead, the same bytes say "start a waiting child" (launch_ahead.hpp).
Result<std::string> encode_launch(const LaunchSpec& spec, std::span<const int> fds,
                                  ZygoteRequest kind = ZygoteRequest::launch);

/// A spec read back, and what it points to. Not movable: spec.confinement points into it.
struct DecodedLaunch {
    LaunchSpec spec;
    Confinement confinement;
    /// Says "the child hands its listener over" (launch_begin asks spec.refusals); never attached
    /// here: the listener goes over the report channel to the sender.
    std::optional<SeccompRefusals> listener_handed_over;
    std::vector<UniqueFd> fds;  ///< as received; the spec's descriptors are these

    DecodedLaunch() = default;
    DecodedLaunch(const DecodedLaunch&) = delete;
    DecodedLaunch& operator=(const DecodedLaunch&) = delete;
};

/// Reads encode_launch's bytes with `fds` as received (owned from here on). The spec is a fork
/// launch (may_share_memory false, no setup limit: the sender applies its own).
/// `kind`: what the header must say (launch, or ahead).
Result<std::unique_ptr<DecodedLaunch>> decode_launch(
    std::string_view bytes, std::vector<UniqueFd> fds, ZygoteRequest kind = ZygoteRequest::launch);

/// The bytes of a holder's plan (holder_plan.hpp) and its cgroup, descriptors named by their
/// index in `fds` (descriptors_of(plan, cgroup_fd): the cgroup's first). plan.go_write_fd and
/// plan.heap_start never cross: the cloner's child never has the parent's end of `go`, and the
/// cloner knows its own heap. Fails for a plan naming a descriptor not in `fds`.
Result<std::string> encode_holder(const HolderPlan& plan, int cgroup_fd, std::span<const int> fds);

/// A holder's plan read back, and the descriptors it names. Not movable: the plan's numbers are
/// those of `fds`.
struct DecodedHolder {
    HolderPlan plan;
    int cgroup_fd = -1;
    std::vector<UniqueFd> fds;  ///< as received

    DecodedHolder() = default;
    DecodedHolder(const DecodedHolder&) = delete;
    DecodedHolder& operator=(const DecodedHolder&) = delete;
};

/// Reads encode_holder's bytes with `fds` as received (owned from here on). Every length,
/// count, index and mount op kind is checked; an error names the field.
Result<std::unique_ptr<DecodedHolder>> decode_holder(std::string_view bytes,
                                                     std::vector<UniqueFd> fds);

}  // namespace corral
