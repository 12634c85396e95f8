#include "base/stack_outside_forks.hpp"

#include <pthread.h>
#include <sys/mman.h>

namespace corral {

StackOutsideForks::StackOutsideForks() noexcept {
    pthread_attr_t attr;
    if (::pthread_getattr_np(::pthread_self(), &attr) != 0) return;
    void* stack = nullptr;
    size_t size = 0, guard = 0;
    const bool known = ::pthread_attr_getstack(&attr, &stack, &size) == 0 &&
                       ::pthread_attr_getguardsize(&attr, &guard) == 0;
    ::pthread_attr_destroy(&attr);
    if (!known || stack == nullptr) return;
    // The guard page lies below the stack (glibc maps them as one block): both are left out,
    // or the guard alone would still be a mapping to copy.
    void* start = static_cast<char*>(stack) - guard;
    if (::madvise(start, size + guard, MADV_DONTFORK) != 0) return;
    start_ = start;
    size_ = size + guard;
}

StackOutsideForks::~StackOutsideForks() {
    if (start_ != nullptr) (void)::madvise(start_, size_, MADV_DOFORK);
}

}  // namespace corral
