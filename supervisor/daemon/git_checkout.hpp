#pragma once
// POST /v1/sessions/{sid}/git/checkout: the request and the git command line it becomes.
//
// git runs inside the session as one of its processes, with the session's confinement, so git
// can reach nothing the session's own commands could not. What this file adds is that a `url`
// means a repository and nothing else: a caller (an agent's tool, a CI front end) may pass a url
// it got from someone else, and git has url forms that run commands or read options:
//   - `ext::CMD` runs CMD, `fd::N` talks over inherited descriptors, and any `TRANSPORT::ADDR`
//     starts git-remote-TRANSPORT: refused here, and protocol.ext.allow=never plus
//     GIT_PROTOCOL_FROM_USER=0 make git refuse the "user" class too (git-config protocol.allow);
//     file:// is allowed explicitly (CVE-2022-39253 made it "user" because a clone could copy the
//     cloner's local files; here the clone runs inside the sandbox, whose files are the session's);
//   - a url or branch starting with `-` would be an option (CVE-2017-1000117: ssh://-oProxyCommand=
//     ran a command on clone): refused, and the argv puts `--` before url and directory;
//   - control characters (CVE-2020-5260: a newline in a url leaked credentials to another host):
//     refused.
// Hooks: core.hooksPath=/dev/null, so no hook runs during the clone, even one a crafted
// repository manages to write (CVE-2024-32002: submodule symlinks placed a hook that ran on clone);
// submodules are not cloned at all.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace corral::daemon {

/// The body of POST .../git/checkout, validated.
struct GitCheckoutRequest {
    std::string url;
    std::string branch;             ///< "" = the remote's default branch
    std::string target_dir;         ///< "" = derived from the url as git does (default_clone_dir)
    std::optional<uint64_t> depth;  ///< shallow clone of this many commits
    std::optional<std::chrono::milliseconds> timeout;  ///< nullopt = the session's command timeout
};

/// Parses and validates the JSON body; throws ApiFailure (400) naming the field at fault.
GitCheckoutRequest parse_git_checkout(std::string_view body);
/// The directory `git clone URL` would create: the url's last path component without `.git`
/// ("https://h/a/repo.git/" -> "repo"); "" when there is none.
std::string default_clone_dir(std::string_view url);
/// git's argv for the request (target_dir filled in).
std::vector<std::string> git_clone_argv(const GitCheckoutRequest& request);
/// The environment git gets on top of the session's.
std::vector<std::pair<std::string, std::string>> git_environment();

}  // namespace corral::daemon
