// A session's processes' output descriptors kept by its holder across a daemon restart (issue 12.2,
// isolation/descriptor_store.hpp). The session picks the slots, journals them with the process,
// and takes them back when a restart adopts the process.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "sessions/session.hpp"

namespace corral {
namespace {

/// Slots are bounded by the holder's RLIMIT_NOFILE, which it inherited from the daemon: past the
/// daemon's own soft limit the holder cannot take them either.
int slot_limit() {
    rlimit limit{};
    if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY)
        return kLastStoreSlot;
    return static_cast<int>(std::min<rlim_t>(limit.rlim_cur - 1, kLastStoreSlot));
}

/// Whether `fd` is what a held slot should be: a pipe's read end, or a terminal's master.
bool is_output_descriptor(int fd, bool terminal) {
    struct stat st;
    if (::fstat(fd, &st) != 0) return false;
    if (terminal) return S_ISCHR(st.st_mode);
    const int flags = ::fcntl(fd, F_GETFL);
    return S_ISFIFO(st.st_mode) && flags >= 0 && (flags & O_ACCMODE) == O_RDONLY;
}

}  // namespace

std::optional<int> Session::allocate_slots(int count) {
    const int limit = slot_limit();
    for (int first = kFirstStoreSlot; first + count - 1 <= limit; ++first) {
        bool free = true;
        for (int i = 0; i < count && free; ++i) {
            const size_t slot = static_cast<size_t>(first + i);
            free = slot >= slots_in_use_.size() || !slots_in_use_[slot];
        }
        if (!free) continue;
        const size_t end = static_cast<size_t>(first + count);
        if (slots_in_use_.size() < end) slots_in_use_.resize(end, false);
        for (int i = 0; i < count; ++i) slots_in_use_[static_cast<size_t>(first + i)] = true;
        return first;
    }
    return std::nullopt;
}

void Session::free_slots(int first, int count) {
    for (int i = 0; i < count; ++i) {
        const size_t slot = static_cast<size_t>(first + i);
        if (slot < slots_in_use_.size()) slots_in_use_[slot] = false;
    }
}

void Session::hold_output(Process& process) {
    if (!context_.keep_output || !sandbox_.keeps_output()) return;
    const std::vector<int> fds = process.output_descriptors();
    if (fds.empty()) return;
    const auto slot = allocate_slots(static_cast<int>(fds.size()));
    if (!slot) return;  // the holder's limit: this process's output is not kept
    if (!sandbox_.hold_output(*slot, fds)) {
        free_slots(*slot, static_cast<int>(fds.size()));
        return;
    }
    process.set_held_slot(*slot);
}

void Session::release_output(Process& process) {
    const auto slot = process.setup().held_slot;
    if (!slot) return;
    const int count = process.setup().terminal ? 1 : 2;
    sandbox_.release_output(*slot, count);
    free_slots(*slot, count);
    process.set_held_slot(std::nullopt);
}

void Session::release_slots(const JournalProcess& journalled) {
    if (!journalled.held_slot) return;
    const int count = journalled.terminal ? 1 : 2;
    sandbox_.release_output(*journalled.held_slot, count);
    free_slots(*journalled.held_slot, count);
}

// EBADF from pidfd_getfd means "not held" (the holder's limit may have been lowered with prlimit
// from inside the session, or the old daemon died before the holder served the request): the
// process is adopted without its output, and its record says so (outputResumed false).
ResumedOutput Session::take_output(const JournalProcess& journalled,
                                   std::vector<std::string>& notes) {
    ResumedOutput resumed;
    if (!journalled.held_slot || !sandbox_.keeps_output()) return resumed;
    const int first = *journalled.held_slot;
    const int count = journalled.terminal ? 1 : 2;
    std::vector<UniqueFd> taken;
    for (int i = 0; i < count; ++i) {
        auto fd = sandbox_.take_output(first + i);
        if (!fd || !is_output_descriptor(fd->get(), journalled.terminal)) {
            notes.push_back(
                "session " + id_ + ": " + journalled.id + ": output not resumed: " +
                (fd ? std::string("slot ") + std::to_string(first + i) + " holds something else"
                    : fd.error().describe()));
            return resumed;
        }
        taken.push_back(std::move(*fd));
    }
    if (slots_in_use_.size() < static_cast<size_t>(first + count))
        slots_in_use_.resize(static_cast<size_t>(first + count), false);
    for (int i = 0; i < count; ++i) slots_in_use_[static_cast<size_t>(first + i)] = true;
    if (journalled.terminal) {
        resumed.pty_master = std::move(taken[0]);
    } else {
        resumed.stdout_fd = std::move(taken[0]);
        resumed.stderr_fd = std::move(taken[1]);
    }
    return resumed;
}

}  // namespace corral
