#include "supervisor/daemon/auth.hpp"

#include <cctype>

namespace corral::daemon {

std::optional<std::string_view> bearer_token(std::string_view authorization) {
    constexpr std::string_view scheme = "Bearer ";
    if (authorization.size() <= scheme.size()) return std::nullopt;
    for (size_t i = 0; i < scheme.size(); ++i) {
        // The scheme name is case-insensitive (RFC 7235).
        if (std::tolower(static_cast<unsigned char>(authorization[i])) !=
            std::tolower(static_cast<unsigned char>(scheme[i])))
            return std::nullopt;
    }
    auto token = authorization.substr(scheme.size());
    while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
    while (!token.empty() && token.back() == ' ') token.remove_suffix(1);
    if (token.empty()) return std::nullopt;
    return token;
}

Result<Caller> authenticate(Listener listener, std::string_view authorization,
                            const TokenLookup& lookup) {
    if (authorization.empty()) {
        if (listener == Listener::tcp)
            return plain_error("this listener requires `Authorization: Bearer <token>`");
        return Caller{true, std::nullopt};
    }
    auto token = bearer_token(authorization);
    if (!token) return plain_error("Authorization header is not `Bearer <token>`");
    auto grant = lookup(*token);
    if (!grant) return plain_error("unknown or revoked token");
    return Caller{false, std::move(*grant)};
}

std::optional<ApiError> authorize(const Caller& caller, Access access,
                                  const std::string& session_id) {
    if (caller.daemon_rights) return std::nullopt;
    if (!caller.grant) return unauthorized("no token");
    const TokenGrant& grant = *caller.grant;
    switch (access) {
        case Access::daemon_info:
        case Access::session_list:
            return std::nullopt;
        case Access::daemon_admin:
            // Creating sessions and GET /metrics: said for both (stop 44's probe saw the first
            // sentence only, answering /metrics).
            return forbidden(
                "a session token may not use the daemon's own routes (creating sessions, "
                "/metrics): they need the daemon's full rights (the Unix socket, without a token)");
        case Access::session_use:
        case Access::session_admin:
            break;
    }
    if (grant.session_id != session_id) return no_such_session(session_id);
    if (access == Access::session_admin && grant.rights != TokenRights::full)
        return forbidden("a restricted token may not do this (needs the session's full token)");
    return std::nullopt;
}

}  // namespace corral::daemon
