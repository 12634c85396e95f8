#pragma once
// Matches an HTTP method and path against the API's route table. Patterns are literal segments and
// `{name}` placeholders that capture exactly one non-empty segment ("/v1/sessions/{sid}/run").
// The router knows nothing about Beast or the session manager, so it is unit-tested on its own.
// A path that matches some pattern under a different method is "method not allowed" (405, with
// the methods that would match), not "not found" (404): clients learn which mistake they made.

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace corral::daemon {

/// Captured `{name}` segments, percent-decoded.
using RouteParams = std::map<std::string, std::string, std::less<>>;

/// Decoded query parameters (`a=1&b=x%20y`); the last occurrence of a key wins.
using QueryParams = std::map<std::string, std::string, std::less<>>;

/// The outcome of matching one request.
struct RouteMatch {
    enum class Kind { found, not_found, method_not_allowed };
    Kind kind = Kind::not_found;
    int route_id = -1;                 ///< the id given to Router::add (when found)
    RouteParams params;                ///< captured placeholders (when found)
    std::vector<std::string> allowed;  ///< methods that match the path (for 405's Allow header)
};

/// A table of (method, pattern) -> route id.
class Router {
  public:
    /// Adds a route. `method` is upper case ("GET"); `pattern` starts with '/'.
    void add(std::string_view method, std::string_view pattern, int route_id);
    /// Matches a request path (without the query string). First matching route wins; a literal
    /// segment therefore wins over a placeholder only if it was added first.
    RouteMatch match(std::string_view method, std::string_view path) const;

  private:
    struct Route {
        std::string method;
        std::vector<std::string> segments;  ///< "{sid}" for placeholders
        int id;
    };
    std::vector<Route> routes_;
};

/// Splits a request target into its path and its query string (without '?').
std::pair<std::string_view, std::string_view> split_target(std::string_view target);
/// Parses `a=1&b=two` with percent-decoding ('+' is a space). Empty keys are ignored, and so are
/// pairs percent_decode refuses: check_query() says what is wrong with those first.
QueryParams parse_query(std::string_view query);
/// What a query's parameters cannot be taken as: {code, message} naming the parameter, for an
/// escape of NUL (`nul_byte`: no path or name can hold one) or a malformed escape (`bad_query`);
/// nullopt when every pair decodes. Without it such a parameter vanished from parse_query and the
/// request failed as if it had not been sent (`missing_query: path is required`).
std::optional<std::pair<std::string, std::string>> check_query(std::string_view query);
/// Percent-decodes `text`; nullopt when an escape is malformed ("%4" or "%zz") or decodes to NUL.
std::optional<std::string> percent_decode(std::string_view text, bool plus_is_space = false);

}  // namespace corral::daemon
