#pragma once
// Work that must not run on corrald's event-loop thread: parsing a policy a caller sent (up to
// 1 MiB of YAML takes a noticeable fraction of a second) and reading the policy dir. Issue 10
// item 2: a 7 MB inline policy held the loop for 7-9 s, and every other client (health included)
// waited. The work runs on a small thread pool; its result comes back through an AsyncEvent
// posted to the loop, so the handler continues on the loop thread as before and may touch
// loop-only state again. The work itself must not touch anything of the loop's (take copies).

// clang-format off
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded
// clang-format on

#include <exception>
#include <memory>
#include <optional>
#include <type_traits>

#include "base/asio.hpp"
#include "supervisor/daemon/async_event.hpp"

namespace corral::daemon {

/// A few worker threads, and a way for a coroutine to await a function run on one of them.
class OffLoop {
  public:
    /// Starts `threads` workers (joined when this is destroyed); waits register with `waits`,
    /// so a shutdown does not wait for them.
    OffLoop(WaitRegistry& waits, size_t threads = 2) : waits_(waits), pool_(threads) {}
    OffLoop(const OffLoop&) = delete;
    OffLoop& operator=(const OffLoop&) = delete;

    /// Runs a copy of `work` on a worker and resumes the awaiting coroutine on its own executor
    /// with the result; rethrows what `work` threw; nullopt when shutdown interrupted the wait.
    /// `work` is taken by reference (name the lambda first: see api.hpp's coroutine rule).
    template <class F>
    boost::asio::awaitable<std::optional<std::invoke_result_t<F&>>> run(F& work) {
        namespace asio = boost::asio;
        using R = std::invoke_result_t<F&>;
        struct Outcome {
            std::optional<R> value;
            std::exception_ptr failure;
        };
        const auto loop = co_await asio::this_coro::executor;
        auto event = std::make_shared<AsyncEvent<Outcome>>(loop, waits_);
        asio::post(pool_, [job = work, loop, weak = std::weak_ptr(event)]() mutable {
            Outcome outcome;
            try {
                outcome.value.emplace(job());
            } catch (...) {
                outcome.failure = std::current_exception();
            }
            asio::post(loop, [weak, outcome = std::move(outcome)]() mutable {
                if (auto e = weak.lock()) e->set(std::move(outcome));
            });
        });
        std::optional<Outcome> outcome = co_await event->wait();
        if (!outcome) co_return std::nullopt;
        if (outcome->failure) std::rethrow_exception(outcome->failure);
        co_return std::move(outcome->value);
    }

  private:
    WaitRegistry& waits_;
    boost::asio::thread_pool pool_;
};

}  // namespace corral::daemon
