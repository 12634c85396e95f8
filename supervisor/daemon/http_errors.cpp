#include "supervisor/daemon/http_errors.hpp"

#include <cerrno>

#include "sessions/files/file_service.hpp"

namespace corral::daemon {
namespace {

struct Mapping {
    unsigned status;
    const char* code;
};

Mapping map_errno(int code) {
    switch (code) {
        case ENOENT:
            return {404, "not_found"};
        case ESRCH:
            return {409, "not_running"};
        case EIDRM:  // a finished process record dropped by the per-session cap
            return {410, "gone"};
        case ESHUTDOWN:
            return {409, "session_ended"};
        case EPIPE:
        case EBADF:
            return {409, "stdin_closed"};
        case EEXIST:
            return {409, "exists"};
        case ENOTEMPTY:
            return {409, "not_empty"};
        // Escapes are refused requests, not malformed ones: the caller may not reach that path.
        case EXDEV:
            return {403, "path_escape"};
        case ELOOP:
            return {403, "symlink_refused"};
        case EACCES:
        case EROFS:
        case EPERM:
            return {403, "forbidden"};
        case EINVAL:
        case ENAMETOOLONG:
        case ENOTDIR:
        case EISDIR:
            return {400, "invalid"};
        case EBADMSG:
            return {422, "invalid_policy"};
        case EAGAIN:
        case EADDRNOTAVAIL:
        case EBUSY:
            return {503, "exhausted"};
        case ENOSPC:
        case EDQUOT:
            return {507, "no_space"};
        case EFBIG:
        case E2BIG:
            return {413, "too_large"};
        case ETIMEDOUT:
            return {504, "timeout"};
        default:
            return {500, "internal"};
    }
}

}  // namespace

nlohmann::json ApiError::to_json() const {
    nlohmann::json inner = {{"code", code}, {"message", message}};
    if (!diagnostics.is_null()) inner["diagnostics"] = diagnostics;
    return {{"error", std::move(inner)}};
}

ApiError api_error(const Error& error) {
    if (error.invalid_policy) return {422, "invalid_policy", error.describe(), nullptr};
    const Mapping m = map_errno(error.code);
    return {m.status, m.code, error.describe(), nullptr};
}

ApiError api_file_error(const Error& error) {
    // The file service classifies by errno itself; EBUSY there means "the root itself", a bad
    // request rather than an exhausted resource.
    switch (classify(error)) {
        case FileErrorKind::not_found:
            return {404, "not_found", error.describe(), nullptr};
        case FileErrorKind::escapes_root:
            return {403, "path_escape", error.describe(), nullptr};
        case FileErrorKind::exists:
            return {409, "exists", error.describe(), nullptr};
        case FileErrorKind::not_empty:
            return {409, "not_empty", error.describe(), nullptr};
        case FileErrorKind::not_a_directory:
            return {400, "not_a_directory", error.describe(), nullptr};
        case FileErrorKind::is_a_directory:
            return {400, "is_a_directory", error.describe(), nullptr};
        case FileErrorKind::denied:
            return {403, "forbidden", error.describe(), nullptr};
        case FileErrorKind::invalid:
            return {400, "invalid", error.describe(), nullptr};
        case FileErrorKind::io:
            break;
    }
    return api_error(error);
}

ApiError bad_request(std::string code, std::string message) {
    return {400, std::move(code), std::move(message), nullptr};
}

ApiError no_such_session(const std::string& sid, bool being_created) {
    if (being_created)
        return {404, "no_such_session",
                "no such session `" + sid +
                    "` yet: it is still being created (its namespaces are being set up)",
                nullptr};
    return {404, "no_such_session", "no such session `" + sid + "`", nullptr};
}

ApiError no_such_route(const std::string& method, const std::string& path) {
    return {404, "no_such_route", "no route for " + method + " `" + path + "`", nullptr};
}

ApiError method_not_allowed(const std::string& method, const std::string& path) {
    return {405, "method_not_allowed", "method " + method + " not allowed on `" + path + "`",
            nullptr};
}

ApiError unauthorized(std::string message) {
    return {401, "unauthorized", std::move(message), nullptr};
}

ApiError forbidden(std::string message) {
    return {403, "forbidden", std::move(message), nullptr};
}

ApiError policy_error(const std::vector<PolicyDiagnostic>& diagnostics) {
    nlohmann::json list = nlohmann::json::array();
    std::string message = "invalid policy";
    for (const auto& d : diagnostics) {
        list.push_back({{"file", d.file},
                        {"line", d.line},
                        {"column", d.column},
                        {"key", d.key},
                        {"message", d.message}});
    }
    if (!diagnostics.empty()) message += ": " + diagnostics.front().format();
    if (diagnostics.size() > 1)
        message += " (and " + std::to_string(diagnostics.size() - 1) + " more)";
    return {422, "invalid_policy", std::move(message), std::move(list)};
}

}  // namespace corral::daemon
