#include "supervisor/daemon/git_checkout.hpp"

#include "supervisor/daemon/http_errors.hpp"
#include "supervisor/daemon/json_fields.hpp"

namespace corral::daemon {
namespace {

[[noreturn]] void refuse(const std::string& message) {
    throw ApiFailure(bad_request("invalid", message));
}

bool has_control_character(std::string_view text) {
    for (const char ch : text)
        if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) return true;
    return false;
}

/// `TRANSPORT::ADDRESS` (git's remote-helper syntax, ext:: and fd:: among them): a scheme-like
/// word followed by "::" before any '/'.
bool is_remote_helper_syntax(std::string_view url) {
    const size_t colons = url.find("::");
    if (colons == std::string_view::npos || colons == 0) return false;
    for (const char ch : url.substr(0, colons))
        if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '+' || ch == '-' || ch == '.'))
            return false;
    return true;
}

void check_url(const std::string& url) {
    if (url.empty()) refuse("field `url` is empty");
    if (has_control_character(url)) refuse("field `url` holds a control character");
    if (url.front() == '-') refuse("field `url` starts with `-` (git would read it as an option)");
    if (is_remote_helper_syntax(url))
        refuse("field `url` uses git's TRANSPORT::ADDRESS form (`" +
               url.substr(0, url.find("::") + 2) +
               "`), which runs a remote helper or a command; give an https://, ssh://, git://, "
               "file:// url or a path");
    // ssh://-oProxyCommand=... (CVE-2017-1000117): a host or user that git would hand to ssh as
    // an option. Current git refuses it too; refusing here names the field.
    const size_t scheme_end = url.find("://");
    if (scheme_end != std::string::npos && url.compare(scheme_end + 3, 1, "-") == 0)
        refuse("field `url` has a host starting with `-`");
}

void check_name(const std::string& value, const char* field) {
    if (has_control_character(value))
        refuse(std::string("field `") + field + "` holds a control character");
    if (!value.empty() && value.front() == '-')
        refuse(std::string("field `") + field + "` starts with `-`");
}

}  // namespace

GitCheckoutRequest parse_git_checkout(std::string_view body) {
    const auto json = parse_json_object(body);
    ObjectReader r(json);
    GitCheckoutRequest request;
    request.url = r.string("url").value_or("");
    request.branch = r.string("branch").value_or("");
    request.target_dir = r.string("targetDir").value_or("");
    request.depth = r.unsigned_integer("depth");
    request.timeout = r.milliseconds("timeoutMs");
    r.finish();
    if (!json.contains("url")) r.missing("url");
    check_url(request.url);
    check_name(request.branch, "branch");
    if (json.contains("branch") && request.branch.empty()) refuse("field `branch` is empty");
    check_name(request.target_dir, "targetDir");
    if (request.depth && *request.depth == 0) refuse("field `depth` must be at least 1");
    if (request.target_dir.empty()) {
        request.target_dir = default_clone_dir(request.url);
        if (request.target_dir.empty())
            refuse("cannot derive a directory from field `url`; give `targetDir`");
    }
    return request;
}

std::string default_clone_dir(std::string_view url) {
    // As git's guess_dir_name: drop trailing slashes and "/.git", then ".git", keep the last
    // component after '/' or ':' (scp-like host:path).
    while (!url.empty() && url.back() == '/') url.remove_suffix(1);
    if (url.ends_with("/.git")) url.remove_suffix(5);
    if (url.ends_with(".git")) url.remove_suffix(4);
    const size_t cut = url.find_last_of("/:");
    std::string_view name = cut == std::string_view::npos ? url : url.substr(cut + 1);
    if (name == "." || name == "..") return "";
    return std::string(name);
}

std::vector<std::string> git_clone_argv(const GitCheckoutRequest& request) {
    std::vector<std::string> argv = {
        "git", "-c", "protocol.ext.allow=never", "-c", "protocol.fd.allow=never",
        // file:// is "user" class since git 2.38.1; inside the
        // session it reads only what the session sees anyway.
        "-c", "protocol.file.allow=always", "-c", "core.hooksPath=/dev/null", "clone",
        "--no-recurse-submodules"};
    if (!request.branch.empty()) {
        argv.push_back("--branch");
        argv.push_back(request.branch);
    }
    if (request.depth) {
        argv.push_back("--depth");
        argv.push_back(std::to_string(*request.depth));
    }
    argv.push_back("--");
    argv.push_back(request.url);
    argv.push_back(request.target_dir);
    return argv;
}

std::vector<std::pair<std::string, std::string>> git_environment() {
    return {
        // Only protocols git knows to be safe (file, git, http(s), ssh); "user" ones are refused.
        {"GIT_PROTOCOL_FROM_USER", "0"},
        // Never wait for a password on a terminal: fail with git's own message instead.
        {"GIT_TERMINAL_PROMPT", "0"},
        // No pager, no editor: nothing interactive.
        {"GIT_PAGER", "cat"},
        {"GIT_EDITOR", "true"},
    };
}

}  // namespace corral::daemon
