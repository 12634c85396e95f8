#pragma once
// The one place where corral::Error becomes an HTTP status. Library code reports errno plus a
// message with context; the API answers {"error": {"code": "...", "message": "..."}} with a status
// chosen here, so every endpoint maps the same errno to the same status.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "policies/policy_parser.hpp"

namespace corral::daemon {

/// An error as the API reports it.
struct ApiError {
    unsigned status = 500;       ///< HTTP status
    std::string code;            ///< stable machine-readable code ("not_found", "bad_json")
    std::string message;         ///< human-readable, names the path / id / field at fault
    nlohmann::json diagnostics;  ///< policy diagnostics (array) or null

    /// {"error": {"code", "message"[, "diagnostics"]}}
    nlohmann::json to_json() const;
};

/// Maps an Error's errno to status and code:
///   ENOENT -> 404 not_found, ESRCH -> 409 not_running (process already finished),
///   ESHUTDOWN -> 409 session_ended, EPIPE/EBADF -> 409 stdin_closed,
///   EEXIST -> 409 exists, ENOTEMPTY -> 409 not_empty,
///   EXDEV -> 403 path_escape (a path that would leave the session root),
///   ELOOP -> 403 symlink_refused (magic link or symlink where none may be followed),
///   EACCES/EPERM/EROFS -> 403 forbidden, EINVAL/ENAMETOOLONG/ENOTDIR/EISDIR -> 400 invalid,
///   EBADMSG -> 422 invalid_policy, EAGAIN/EADDRNOTAVAIL/EBUSY -> 503 exhausted (ports, sessions),
///   ENOSPC/EDQUOT -> 507 no_space, EFBIG/E2BIG -> 413 too_large, ETIMEDOUT -> 504 timeout,
///   others -> 500 internal. The message is Error::describe() ("open `a/b`: ENOENT (...)").
ApiError api_error(const Error& error);
/// Maps an Error of the file service (sessions/files/file_service.hpp classify()): escapes (EXDEV,
/// ELOOP) -> 403 path_escape, with the message naming the path as the client sent it.
ApiError api_file_error(const Error& error);

/// A 400 with the given code ("bad_json", "unknown_field", "bad_type", "missing_field", ...).
ApiError bad_request(std::string code, std::string message);
/// 404 "no such session `sid`"; `being_created`: it is, and its id is taken (not ready yet).
ApiError no_such_session(const std::string& sid, bool being_created = false);
/// 404 for an unknown path.
ApiError no_such_route(const std::string& method, const std::string& path);
/// 405 for a known path with the wrong method.
ApiError method_not_allowed(const std::string& method, const std::string& path);
/// 401 (no or unknown token) with a message saying which.
ApiError unauthorized(std::string message);
/// 403 for a token whose rights do not cover the request.
ApiError forbidden(std::string message);
/// 422 invalid_policy carrying every diagnostic as {file, line, column, key, message}.
ApiError policy_error(const std::vector<PolicyDiagnostic>& diagnostics);

}  // namespace corral::daemon
