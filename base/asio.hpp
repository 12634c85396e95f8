#pragma once
// Include Boost.Asio through this header. Boost 1.74's asio/awaitable.hpp uses std::exchange
// without including <utility>, which GCC 12's headers no longer pull in on their own; a
// formatter that sorts includes would otherwise reintroduce the error in any file.

// clang-format off
#include <utility>
#include <boost/asio.hpp>
// clang-format on
