#pragma once
// `corral doctor`: what this host can enforce, found by probing (never assumed).

#include <nlohmann/json.hpp>

namespace corral::cli {

/// Probes the host: cgroup layout and mount, kill support, limit backend, namespaces, seccomp,
/// Landlock ABI, clone3 + CLONE_INTO_CGROUP, openat2. Creates and removes a probe cgroup.
nlohmann::json probe_host();

/// Prints probe_host() as text (or JSON with `--json`); returns the exit code.
int doctor_command(bool as_json);

}  // namespace corral::cli
