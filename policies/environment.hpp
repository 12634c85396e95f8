#pragma once
// The environment a session's process gets: the policy's env section applied to the caller's
// environment, then per-session and per-request overrides. Pure data.

#include <map>
#include <string>
#include <vector>

#include "policies/policy.hpp"

namespace corral {

/// Builds "KEY=VALUE" entries: start empty (clear) or from `caller` (a null-terminated environ
/// array, may be nullptr), copy `pass` names from `caller`, apply `set`, then `overrides` (an
/// empty-string value in `unset` removes). Sorted by key, each key once.
std::vector<std::string> build_environment(const EnvSpec& spec, char* const* caller,
                                           const std::map<std::string, std::string>& overrides = {},
                                           const std::vector<std::string>& unset = {});

}  // namespace corral
