#include "isolation/descriptor_store.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

namespace corral {
namespace {

enum class StoreOp : uint32_t { hold = 1, release = 2, sync = 3 };

/// One request (and, for sync, its answer). Fixed size: a SOCK_SEQPACKET message each.
struct StoreRequest {
    uint32_t op = 0;
    int32_t slot = 0;
    uint32_t count = 0;
    uint32_t reserved = 0;
    uint64_t nonce = 0;
};

bool valid_slot(int64_t slot) {
    return slot >= kFirstStoreSlot && slot <= kLastStoreSlot;
}

/// Sends `request` with `fds` attached, without blocking.
bool send_request(int channel, const StoreRequest& request, std::span<const int> fds) {
    iovec iov{const_cast<StoreRequest*>(&request), sizeof request};
    msghdr header{};
    header.msg_iov = &iov;
    header.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxHeldPerRequest)] = {};
    if (!fds.empty()) {
        header.msg_control = control;
        header.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
        cmsghdr* message = CMSG_FIRSTHDR(&header);
        message->cmsg_level = SOL_SOCKET;
        message->cmsg_type = SCM_RIGHTS;
        message->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
        std::memcpy(CMSG_DATA(message), fds.data(), sizeof(int) * fds.size());
    }
    ssize_t sent;
    do {
        sent = ::sendmsg(channel, &header, MSG_DONTWAIT | MSG_NOSIGNAL);
    } while (sent < 0 && errno == EINTR);
    return sent == static_cast<ssize_t>(sizeof request);
}

void serve_one(const StoreRequest& request, const int* fds, int count) noexcept {
    switch (static_cast<StoreOp>(request.op)) {
        case StoreOp::hold:
            for (int i = 0; i < count; ++i) {
                const int64_t slot = static_cast<int64_t>(request.slot) + i;
                // dup2 past RLIMIT_NOFILE fails (EBADF): that slot is simply not held.
                if (valid_slot(slot) && fds[i] != slot)
                    (void)::dup2(fds[i], static_cast<int>(slot));
            }
            break;
        case StoreOp::release:
            for (uint32_t i = 0; i < request.count && i <= kLastStoreSlot; ++i) {
                const int64_t slot = static_cast<int64_t>(request.slot) + i;
                if (valid_slot(slot)) (void)::close(static_cast<int>(slot));
            }
            break;
        case StoreOp::sync:
            (void)::send(kStoreHolderFd, &request, sizeof request, MSG_DONTWAIT | MSG_NOSIGNAL);
            break;
    }
}

}  // namespace

void serve_store_requests() noexcept {
    for (;;) {
        // Fail closed: a dumpable holder must not hand out anything (see the header).
        if (::prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 0) ::_exit(127);
        StoreRequest request;
        iovec iov{&request, sizeof request};
        alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxHeldPerRequest)];
        msghdr header{};
        header.msg_iov = &iov;
        header.msg_iovlen = 1;
        header.msg_control = control;
        header.msg_controllen = sizeof control;
        const ssize_t n = ::recvmsg(kStoreHolderFd, &header, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;  // nothing queued (or the channel is gone)
        int fds[kMaxHeldPerRequest];
        int count = 0;
        for (cmsghdr* message = CMSG_FIRSTHDR(&header); message != nullptr;
             message = CMSG_NXTHDR(&header, message)) {
            if (message->cmsg_level != SOL_SOCKET || message->cmsg_type != SCM_RIGHTS) continue;
            const size_t carried = (message->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t i = 0; i < carried; ++i) {
                int fd;
                std::memcpy(&fd, CMSG_DATA(message) + i * sizeof(int), sizeof fd);
                if (count < kMaxHeldPerRequest) {
                    fds[count++] = fd;
                } else {
                    (void)::close(fd);
                }
            }
        }
        const bool whole = n == static_cast<ssize_t>(sizeof request) &&
                           (header.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) == 0;
        if (whole) serve_one(request, fds, count);
        for (int i = 0; i < count; ++i) {
            // The slot it went to is a copy; the received descriptor itself goes (unless the
            // kernel happened to deliver it in the very slot asked for).
            if (!(whole && request.op == static_cast<uint32_t>(StoreOp::hold) &&
                  fds[i] == request.slot + i))
                (void)::close(fds[i]);
        }
    }
}

Result<DescriptorStore> DescriptorStore::create(UniqueFd& holder_end) {
    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, pair) != 0)
        return sys_error("descriptor store: socketpair");
    holder_end.reset(pair[1]);
    return DescriptorStore(UniqueFd(pair[0]));
}

Result<DescriptorStore> DescriptorStore::take_over(int holder_pidfd,
                                                   std::chrono::milliseconds bound) {
    auto channel = take(holder_pidfd, kStoreDaemonFd);
    if (!channel) return std::move(channel.error().context("descriptor store: take the channel"));
    struct stat st;
    if (::fstat(channel->get(), &st) != 0 || !S_ISSOCK(st.st_mode))
        return sys_error(ENOTSOCK, "descriptor store: the holder's channel is not a socket");
    const int flags = ::fcntl(channel->get(), F_GETFL);
    if (flags < 0 || ::fcntl(channel->get(), F_SETFL, flags | O_NONBLOCK) != 0)
        return sys_error("descriptor store: O_NONBLOCK");
    DescriptorStore store(std::move(*channel));
    // A previous run's sync may have left an answer nobody read: nonces from a fresh random
    // start never match it.
    store.next_nonce_ = std::random_device{}() | (uint64_t{std::random_device{}()} << 32);
    CORRAL_TRY(store.sync(bound), "descriptor store");
    return store;
}

Status DescriptorStore::hold(int slot, std::span<const int> fds) {
    if (!valid()) return sys_error(EBADF, "descriptor store: no channel");
    if (fds.empty() || fds.size() > static_cast<size_t>(kMaxHeldPerRequest) || !valid_slot(slot) ||
        !valid_slot(static_cast<int64_t>(slot) + fds.size() - 1))
        return sys_error(EINVAL, "descriptor store: slot " + std::to_string(slot));
    StoreRequest request;
    request.op = static_cast<uint32_t>(StoreOp::hold);
    request.slot = slot;
    request.count = static_cast<uint32_t>(fds.size());
    if (!send_request(channel_.get(), request, fds)) return sys_error("descriptor store: hold");
    return {};
}

void DescriptorStore::release(int slot, int count) {
    if (!valid() || count <= 0) return;
    StoreRequest request;
    request.op = static_cast<uint32_t>(StoreOp::release);
    request.slot = slot;
    request.count = static_cast<uint32_t>(count);
    (void)send_request(channel_.get(), request, {});
}

Status DescriptorStore::sync(std::chrono::milliseconds bound) {
    if (!valid()) return sys_error(EBADF, "descriptor store: no channel");
    StoreRequest request;
    request.op = static_cast<uint32_t>(StoreOp::sync);
    request.nonce = next_nonce_++;
    if (!send_request(channel_.get(), request, {})) return sys_error("sync");
    const auto deadline = std::chrono::steady_clock::now() + bound;
    for (;;) {
        StoreRequest answer;
        const ssize_t n = ::recv(channel_.get(), &answer, sizeof answer, MSG_DONTWAIT);
        if (n == static_cast<ssize_t>(sizeof answer) &&
            answer.op == static_cast<uint32_t>(StoreOp::sync) && answer.nonce == request.nonce)
            return {};
        if (n == 0) return sys_error(EPIPE, "sync: the holder's end is gone");
        if (n > 0 || errno == EINTR) continue;  // a stale answer: read on
        if (errno != EAGAIN) return sys_error("sync");
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) return sys_error(ETIMEDOUT, "sync: the holder did not answer");
        pollfd ready{channel_.get(), POLLIN, 0};
        (void)::poll(&ready, 1, static_cast<int>(left.count()));
    }
}

Result<UniqueFd> DescriptorStore::take(int holder_pidfd, int slot) {
    const int fd = static_cast<int>(::syscall(SYS_pidfd_getfd, holder_pidfd, slot, 0));
    if (fd < 0) return sys_error("pidfd_getfd slot " + std::to_string(slot));
    return UniqueFd(fd);  // pidfd_getfd sets O_CLOEXEC
}

}  // namespace corral
