#pragma once
// Owns one file descriptor; closes it exactly once. Every kernel handle in corral is one of these
// (or wraps one), so no error path needs a hand-written close().

#include <unistd.h>

#include <utility>

namespace corral {

/// RAII owner of a file descriptor (-1 when empty).
class UniqueFd {
public:
    UniqueFd() = default;
    explicit UniqueFd(int fd) : fd_(fd) {}
    UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
    UniqueFd& operator=(UniqueFd&& other) noexcept {
        if (this != &other) reset(other.release());
        return *this;
    }
    UniqueFd(const UniqueFd&) = delete;
    UniqueFd& operator=(const UniqueFd&) = delete;
    ~UniqueFd() { reset(); }

    /// The descriptor, still owned.
    int get() const { return fd_; }
    bool valid() const { return fd_ >= 0; }
    explicit operator bool() const { return valid(); }
    /// Gives up ownership without closing.
    int release() { return std::exchange(fd_, -1); }
    /// Closes the current descriptor (if any) and owns `fd` instead.
    void reset(int fd = -1) {
        if (fd_ >= 0) ::close(fd_);
        fd_ = fd;
    }

private:
    int fd_ = -1;
};

}  // namespace corral
