#include "isolation/event_watch.hpp"

#include <fcntl.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <cerrno>

namespace corral {
namespace {

// kernfs reports a change to every descriptor that has not read the file since: reading it
// (from the start, through that descriptor) is what consumes it.
void consume(int fd) {
    char buf[512];
    (void)!::pread(fd, buf, sizeof buf, 0);
}

}  // namespace

Status EventWatch::ensure_epoll() {
    if (epoll_) return {};
    epoll_.reset(::epoll_create1(EPOLL_CLOEXEC));
    if (!epoll_) return sys_error("epoll_create1");
    return {};
}

Result<bool> EventWatch::watch_file(int dir_fd, const std::string& name,
                                    const std::string& shown_dir) {
    UniqueFd file(::openat(dir_fd, name.c_str(), O_RDONLY | O_CLOEXEC));
    if (!file) {
        if (errno == ENOENT) return false;
        return sys_error("open `" + shown_dir + "/" + name + "`");
    }
    CORRAL_TRY(ensure_epoll(), "");
    consume(file.get());
    epoll_event event{};
    event.events = EPOLLPRI;
    event.data.fd = file.get();
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, file.get(), &event) != 0)
        return sys_error("watch `" + shown_dir + "/" + name + "`");
    files_.push_back(std::move(file));
    ++watched_;
    return true;
}

Status EventWatch::watch_readable(int fd) {
    CORRAL_TRY(ensure_epoll(), "");
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.fd = fd;
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &event) != 0) return sys_error("epoll_ctl");
    ++watched_;
    return {};
}

void EventWatch::rearm() const {
    for (const auto& file : files_) consume(file.get());
}

}  // namespace corral
