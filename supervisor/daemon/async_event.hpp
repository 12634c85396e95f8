#pragma once
// Bridges the session manager's callbacks into coroutines, and lets the daemon interrupt every
// pending wait at shutdown.
//
// A coroutine that waits for output or for a process to finish creates an AsyncEvent<T>, hands a
// callback that calls set() to the manager, and co_awaits wait(). The event is a steady_timer that
// never expires on its own: set() stores the value and cancels the timer, which resumes the
// coroutine (Asio 1.74 has no per-operation cancellation, and a timer is the idiomatic
// "condition variable" of an io_context). interrupt() resumes it without a value, which is how
// shutdown makes every waiting stream send its final, truthful event.

// clang-format off
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded
// clang-format on

#include "base/asio.hpp"
#include <memory>
#include <optional>
#include <set>

namespace corral::daemon {

/// Anything a shutdown can wake up.
class Interruptible {
  public:
    virtual ~Interruptible() = default;
    /// Resumes the waiter without a value.
    virtual void interrupt() = 0;
};

/// The set of pending waits; shutdown interrupts them all. Event-loop thread only.
class WaitRegistry {
  public:
    void add(Interruptible* waiter) { waiters_.insert(waiter); }
    void remove(Interruptible* waiter) { waiters_.erase(waiter); }
    /// Interrupts every pending and every future wait.
    void interrupt_all() {
        stopping_ = true;
        auto copy = waiters_;
        for (auto* w : copy) w->interrupt();
    }
    /// True once interrupt_all() ran.
    bool stopping() const { return stopping_; }

  private:
    std::set<Interruptible*> waiters_;
    bool stopping_ = false;
};

/// A one-shot value delivered by a callback and awaited by a coroutine. Share it with the
/// callback through a shared_ptr so a late callback after the coroutine gave up is harmless.
template <class T>
class AsyncEvent : public Interruptible, public std::enable_shared_from_this<AsyncEvent<T>> {
  public:
    AsyncEvent(boost::asio::any_io_executor executor, WaitRegistry& registry)
        : timer_(executor, boost::asio::steady_timer::time_point::max()), registry_(registry) {
        registry_.add(this);
        if (registry_.stopping()) interrupted_ = true;
    }
    ~AsyncEvent() override { registry_.remove(this); }

    /// Delivers the value (first call wins) and wakes the waiter.
    void set(T value) {
        if (value_ || interrupted_) return;
        value_.emplace(std::move(value));
        timer_.cancel();
    }
    void interrupt() override {
        interrupted_ = true;
        timer_.cancel();
    }
    /// Waits for set() or interrupt(); returns the value, or nullopt when interrupted.
    boost::asio::awaitable<std::optional<T>> wait() {
        if (!value_ && !interrupted_) {
            boost::system::error_code ec;
            co_await timer_.async_wait(boost::asio::redirect_error(boost::asio::use_awaitable, ec));
        }
        co_return std::move(value_);
    }
    /// True after interrupt().
    bool interrupted() const { return interrupted_; }

  private:
    boost::asio::steady_timer timer_;
    WaitRegistry& registry_;
    std::optional<T> value_;
    bool interrupted_ = false;
};

}  // namespace corral::daemon
