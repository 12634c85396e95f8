#pragma once
// What a session's namespace holder (sandbox.hpp) needs after clone, computed beforehand, and the
// holder's life itself. Shared by Sandbox, which makes the plan, and the launch zygote
// (launch_zygote.hpp), which receives it as bytes (launch_message.hpp) and clones the holder
// from its own small copy of corrald's memory instead of corrald's (issue 18).

#include <cstdint>
#include <string>
#include <vector>

#include "isolation/mounts.hpp"

namespace corral {

/// What the holder needs after clone besides its mounts, all computed beforehand: values and
/// descriptor numbers, none owned, so a copy is a plain copy (HolderPlan::without_trees).
struct HolderSettings {
    int flags = 0;
    std::string hostname;
    int report_fd = -1;
    int go_fd = -1;            ///< user namespace: wait until the parent wrote the id maps
    int go_write_fd = -1;      ///< the parent's end, closed at once (see holder_main)
    int lease_fd = -1;         ///< the uid range's lock: kept open for the holder's whole life
    int store_holder_fd = -1;  ///< descriptor store: the holder's end (-1: no store)
    int store_daemon_fd = -1;  ///< and its copy of the daemon's end (descriptor_store.hpp)
    /// Test seam (SandboxOptions::rehearse_suid_dumpable): what the kernel does on a host with
    /// fs.suid_dumpable=1 after a credential change, without touching the host's sysctl.
    bool rehearse_suid_dumpable = false;
    /// Root wrote the id maps: clear supplementary groups (namespaces.hpp).
    bool drop_groups = false;
    /// Where the cloning process's brk heap starts when the holder runs on a stack that is not
    /// in it (a copy of the launch worker's thread, or the zygote's main stack): the heap copy is
    /// dropped after setup (drop_heap_copy). 0: kept.
    uintptr_t heap_start = 0;
};

/// What the holder needs after clone, all computed beforehand.
struct HolderPlan : HolderSettings {
    PreparedMounts mounts;

    /// A copy that owns no descriptor: every setting, and the mounts without their detached
    /// trees (PreparedMounts::without_trees), which stay with this plan. The plan cannot simply
    /// be copied (it owns the trees); this gives every field added to HolderSettings for free.
    HolderPlan without_trees() const {
        HolderPlan copy;
        static_cast<HolderSettings&>(copy) = *this;
        copy.mounts = mounts.without_trees();
        return copy;
    }
};

/// Every descriptor the holder keeps or uses after clone, the cgroup's first, once each: what a
/// cloner in another table (the launch worker, the zygote) needs copies of. `go_write_fd` is
/// not among them: a holder cloned there never has it.
std::vector<int> descriptors_of(const HolderPlan& plan, int cgroup_fd);

/// Where this process's brk heap starts (/proc/self/stat field 47, start_brk); 0 if unknown.
uintptr_t heap_start();

/// The holder's side, right after clone: sets up the namespaces as `plan` says, reports ready
/// on plan.report_fd (or the failed step) and holds them until killed. Never returns.
[[noreturn]] void holder_main(const HolderPlan& plan) noexcept;

}  // namespace corral
