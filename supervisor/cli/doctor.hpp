#pragma once
// `corral doctor`: what this host can enforce, found by probing (isolation/host_probe.hpp).

namespace corral::cli {

/// Probes the host and prints the result as text, or JSON with `as_json`; returns the exit code
/// (1 when cgroups cannot be used at all).
int doctor_command(bool as_json);

}  // namespace corral::cli
