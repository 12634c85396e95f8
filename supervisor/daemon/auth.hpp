#pragma once
// Who may do what. Every session has two bearer tokens: a full one and a restricted one. A
// restricted token may run, spawn, use shell contexts and read and write files, but may not end
// the session, change its environment, or touch ports at all (lease, list, endpoint, wait,
// release), as the AI SDK's restricted sandbox view has no port methods. A token only ever opens
// its own session.
//
// Listeners: on the Unix socket a request without a token acts with the daemon's full rights (the
// socket's file mode is the access control, as with Docker's socket); a request that carries a
// token is held to that token. On TCP every request needs a token (health included), because any
// local user can reach a loopback port.
//
// Tokens are issued and checked (in constant time) by the session manager; this file only decides
// what a checked token may do.

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.hpp"
#include "sessions/session_types.hpp"
#include "supervisor/daemon/http_errors.hpp"

namespace corral::daemon {

/// Where a request came in.
enum class Listener { unix_socket, tcp };

/// What an endpoint requires.
enum class Access {
    daemon_info,    ///< health, policies, validate: any authenticated caller
    daemon_admin,   ///< create sessions: daemon rights only (no session token)
    session_list,   ///< list sessions: daemon rights see all, a token sees its own session
    session_use,    ///< run, spawn, shells, files: full or restricted token of the session
    session_admin,  ///< end session, PATCH env, every port endpoint: full token of the session
};

/// The authenticated caller of one request.
struct Caller {
    bool daemon_rights = false;       ///< Unix socket without a token
    std::optional<TokenGrant> grant;  ///< set when a valid token was presented
};

/// Resolves a token to its grant (the session manager's check_token, which compares in constant
/// time); an Error when the token is unknown.
using TokenLookup = std::function<Result<TokenGrant>(std::string_view token)>;

/// The token of an "Authorization: Bearer T" header value; nullopt if absent or not Bearer.
std::optional<std::string_view> bearer_token(std::string_view authorization);

/// Authenticates a request: 401 when TCP carries no token, when the header is not a Bearer
/// header, or when the token is unknown.
Result<Caller> authenticate(Listener listener, std::string_view authorization,
                            const TokenLookup& lookup);

/// Authorizes `caller` for `access` on session `session_id` (empty for daemon-level access).
/// A token for another session gets the same 404 as a session that does not exist, so tokens
/// cannot probe which sessions exist. Returns nullopt when allowed.
std::optional<ApiError> authorize(const Caller& caller, Access access,
                                  const std::string& session_id);

}  // namespace corral::daemon
