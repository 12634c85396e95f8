#include "isolation/descriptor_passing.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

namespace corral {

Status send_passing(int socket, std::string_view bytes, std::span<const int> fds,
                    const char* what) {
    if (fds.size() > kMaxPassedDescriptors)
        return sys_error(EMSGSIZE, std::string(what) + ": " + std::to_string(fds.size()) +
                                       " descriptors, more than " +
                                       std::to_string(kMaxPassedDescriptors));
    iovec data{const_cast<char*>(bytes.data()), bytes.size()};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxPassedDescriptors)] = {};
    msghdr header{};
    header.msg_iov = &data;
    header.msg_iovlen = 1;
    if (!fds.empty()) {
        header.msg_control = control;
        header.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
        cmsghdr* rights = CMSG_FIRSTHDR(&header);
        rights->cmsg_level = SOL_SOCKET;
        rights->cmsg_type = SCM_RIGHTS;
        rights->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
        std::memcpy(CMSG_DATA(rights), fds.data(), sizeof(int) * fds.size());
    }
    for (;;) {
        if (::sendmsg(socket, &header, MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size()))
            return {};
        if (errno == ECONNRESET) errno = EPIPE;
        if (errno != EINTR) return sys_error(std::string(what) + ": sendmsg");
    }
}

Result<PassedMessage> receive_passing(
    int socket, const char* what, std::optional<std::chrono::steady_clock::time_point> deadline) {
    PassedMessage message;
    while (deadline) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            *deadline - std::chrono::steady_clock::now());
        pollfd ready{socket, POLLIN, 0};
        const int n = ::poll(&ready, 1, static_cast<int>(std::max<int64_t>(left.count(), 0)));
        if (n > 0) break;
        if (n == 0) return sys_error(ETIMEDOUT, std::string(what) + ": no answer in time");
        if (errno != EINTR) return sys_error(std::string(what) + ": poll");
    }
    // The length first (MSG_TRUNC reports a datagram's whole length), then the message itself.
    ssize_t length;
    char probe;
    do {
        length = ::recv(socket, &probe, 1, MSG_PEEK | MSG_TRUNC);
    } while (length < 0 && errno == EINTR);
    if (length < 0) {
        if (errno == ECONNRESET) errno = EPIPE;
        return sys_error(std::string(what) + ": recv");
    }
    if (length == 0) return sys_error(EPIPE, std::string(what) + ": the other end is gone");
    message.bytes.resize(static_cast<size_t>(length));
    iovec data{message.bytes.data(), message.bytes.size()};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxPassedDescriptors)] = {};
    msghdr header{};
    header.msg_iov = &data;
    header.msg_iovlen = 1;
    header.msg_control = control;
    header.msg_controllen = sizeof control;
    do {
        length = ::recvmsg(socket, &header, MSG_CMSG_CLOEXEC);
    } while (length < 0 && errno == EINTR);
    if (length < 0) return sys_error(std::string(what) + ": recvmsg");
    for (cmsghdr* c = CMSG_FIRSTHDR(&header); c != nullptr; c = CMSG_NXTHDR(&header, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        const size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < n; ++i) {
            int fd;
            std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
            message.fds.emplace_back(fd);
        }
    }
    if (length != static_cast<ssize_t>(message.bytes.size()) || (header.msg_flags & MSG_CTRUNC))
        return sys_error(EPROTO, std::string(what) + ": a message cut short");
    return message;
}

}  // namespace corral
