#pragma once
// The API's JSON shapes: request bodies -> manager requests (strict, see json_fields.hpp) and
// manager records -> response bodies. Field names are camelCase as in DESIGN.md's API table.

#include <nlohmann/json.hpp>
#include <string_view>

#include "sessions/files/file_service.hpp"
#include "sessions/session_types.hpp"

namespace corral::daemon {

/// POST /v1/sessions body: {policy?, policyYaml?, id?, env?, cwd?, commandTimeoutMs?}.
CreateSessionRequest parse_create_session(std::string_view body);
/// run / exec / processes body: {command | argv, cwd?, env?, timeoutMs?, stdin?, stdinOpen?,
/// shell?, detachOnDisconnect?}.
/// Exactly one of command and argv is required.
ProcessRequest parse_process_request(std::string_view body);
/// POST shells body: {id?, cwd?, env?}.
ShellRequest parse_shell_request(std::string_view body);
/// A shell context record: id, cwd, env, functions, aliases, running, queued, commands.
nlohmann::json shell_json(const ShellInfo& shell);
/// PATCH env body: {set?: {K: V}, unset?: [K]}.
EnvPatch parse_env_patch(std::string_view body);
/// Entries per egress list a PATCH .../network may carry.
inline constexpr size_t kMaxEgressEntries = 1024;
/// The `egress` record: {mode, allowedHosts, allowedCIDRs, deniedCIDRs, refused, proxy}.
nlohmann::json egress_json(const EgressInfo& egress);

/// A process record: id, pid, argv, status, exitCode, signal, durationMs, usage, truncated, and
/// output: {stdout|stderr: {bytes, droppedBytes, truncated, eof}} (run adds the text as
/// stdout/stderr, or stdoutBase64/stderrBase64 when it is not UTF-8).
nlohmann::json process_json(const ProcessInfo& info);
/// A session record with its processes and ports.
nlohmann::json session_json(const SessionInfo& info);
/// A short session record for lists.
nlohmann::json session_summary_json(const SessionInfo& info);
/// What DELETE /v1/sessions/{sid} did.
nlohmann::json end_report_json(const EndSessionReport& report);
/// One directory entry / stat result.
nlohmann::json file_info_json(const FileInfo& info);
/// A leased port.
nlohmann::json port_json(const PortLeaseInfo& lease);
/// RFC 3339 UTC with milliseconds: "2024-05-01T12:00:00.123Z".
std::string format_time(std::chrono::system_clock::time_point time);

}  // namespace corral::daemon
