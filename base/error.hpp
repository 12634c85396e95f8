#pragma once
// One error type for the whole project: an errno (0 when the failure is not a system call's)
// and a message that each layer extends with its own context, outermost first:
//   "create session cgroup: mkdir `/sys/fs/cgroup/unified/corral/sessions/s1`: "
//   "EEXIST (File exists)"
// Library code returns these; only supervisor/ turns them into exit codes or HTTP statuses.

#include <cerrno>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace corral {

/// What went wrong: errno (0 if none) and a human-readable message with context.
struct Error {
    int code = 0;
    std::string message;
    /// The policy asks for what cannot be honoured (a path that would not stand for the session):
    /// the caller's input is wrong, not the host (HTTP 422 invalid_policy, not 500).
    bool invalid_policy = false;

    /// Prefixes the message with "what: " (adds the caller's context); returns *this.
    Error& context(std::string_view what);
    /// The full message, with " : ENAME (strerror)" appended when code != 0.
    std::string describe() const;
};

/// An error from a failed system call: captures the current errno.
Error sys_error(std::string message);
/// An error from a failed system call with an explicit errno value.
Error sys_error(int code, std::string message);
/// An error that is not a system call's (bad input, protocol violation, ...).
Error plain_error(std::string message);
/// A policy that cannot be honoured as written (Error::invalid_policy); `message` names the key.
Error policy_refusal(std::string message);
/// "EACCES" for EACCES; "E123" for values glibc has no name for.
std::string errno_name(int code);

/// Either a value or an Error. Minimal std::expected for C++20.
template <class T>
class [[nodiscard]] Result {
public:
    Result(T value) : state_(std::in_place_index<0>, std::move(value)) {}
    Result(Error error) : state_(std::in_place_index<1>, std::move(error)) {}

    bool ok() const { return state_.index() == 0; }
    explicit operator bool() const { return ok(); }

    T& value() & { return std::get<0>(state_); }
    const T& value() const& { return std::get<0>(state_); }
    T&& value() && { return std::get<0>(std::move(state_)); }
    T& operator*() & { return value(); }
    const T& operator*() const& { return value(); }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }

    Error& error() & { return std::get<1>(state_); }
    const Error& error() const& { return std::get<1>(state_); }
    Error&& error() && { return std::get<1>(std::move(state_)); }

private:
    std::variant<T, Error> state_;
};

/// Success without a value, or an Error.
template <>
class [[nodiscard]] Result<void> {
public:
    Result() = default;
    Result(Error error) : error_(std::move(error)), failed_(true) {}

    bool ok() const { return !failed_; }
    explicit operator bool() const { return ok(); }
    Error& error() & { return error_; }
    const Error& error() const& { return error_; }
    Error&& error() && { return std::move(error_); }

private:
    Error error_;
    bool failed_ = false;
};

using Status = Result<void>;

}  // namespace corral

/// Propagates an error from a Result expression, adding context; usage:
///   CORRAL_TRY(cgroup.kill_all(), "end session");
#define CORRAL_TRY(expr, ctx)                                  \
    do {                                                       \
        auto corral_try_result_ = (expr);                      \
        if (!corral_try_result_) {                             \
            return std::move(corral_try_result_.error().context(ctx)); \
        }                                                      \
    } while (0)
