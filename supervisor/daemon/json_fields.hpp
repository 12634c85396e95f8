#pragma once
// Strict reading of JSON request bodies. Every field a request may carry is read through an
// ObjectReader, which remembers what it was asked for; finish() then refuses any field nobody
// asked for ("unknown field `polcy`"), so a typo is an error instead of a silently ignored
// option. Wrong types name the field ("field `env` must be an object of strings").
//
// Errors are thrown as ApiFailure: request handlers are coroutines several calls deep, and the
// dispatcher turns any ApiFailure into the JSON error response in one place.

#include <chrono>
#include <cstdint>
#include <exception>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "supervisor/daemon/http_errors.hpp"

namespace corral::daemon {

/// An API error on its way to the dispatcher.
struct ApiFailure : std::exception {
    explicit ApiFailure(ApiError e) : error(std::move(e)) {}
    const char* what() const noexcept override { return error.message.c_str(); }
    ApiError error;
};

/// The longest duration a request may give (timeoutMs, commandTimeoutMs): 30 days. Larger
/// values are refused rather than clamped, so a client's mistake is seen, not silently changed;
/// without a bound, 2^63-1 ms overflowed the timer's nanoseconds and killed the command at once.
inline constexpr uint64_t kMaxMillis = 30ull * 24 * 3600 * 1000;
/// `value` ms from a query parameter or field `name`, or a 400 naming it when beyond kMaxMillis.
std::chrono::milliseconds checked_millis(uint64_t value, const std::string& name);
/// 400 naming `field` when `text` holds a NUL byte.
void refuse_nul(std::string_view text, const std::string& field);
/// 400 naming `field` when `name` cannot be an environment variable's name: empty, or holding
/// `=` or NUL. execve's environment is "NAME=value" strings, so {"A=B": "c"} would set A to
/// "B=c" while the record said A=B was set (the class of issue 12 item 5: what runs must be
/// what the record says).
void refuse_bad_env_name(std::string_view name, const std::string& field);

/// Parses a request body that must be a JSON object. An empty body is `{}` (every field of such
/// a request is optional or reported missing by name). 400 bad_json when malformed.
nlohmann::json parse_json_object(std::string_view body);

/// Reads the fields of one JSON object and refuses the ones it was not asked for.
class ObjectReader {
  public:
    /// `object` must outlive the reader.
    explicit ObjectReader(const nlohmann::json& object, std::string prefix = "");

    /// A string that will reach a path or a process (command, cwd, paths, ids): a NUL byte is
    /// refused (400 naming the field), since execve and every path call would cut the string
    /// there while the record keeps the whole (issue 12 item 5: "echo safe\u0000; rm -rf"
    /// ran `echo safe` while the record said otherwise).
    std::optional<std::string> string(const char* name);
    /// A string of arbitrary bytes (stdin data): NUL allowed.
    std::optional<std::string> bytes(const char* name);
    /// A duration in whole milliseconds, 0 to kMaxMillis; anything else (negative, fractional,
    /// larger, not a number) is a 400 naming the field and the range.
    std::optional<std::chrono::milliseconds> milliseconds(const char* name);
    std::optional<bool> boolean(const char* name);
    /// A non-negative integer.
    std::optional<uint64_t> unsigned_integer(const char* name);
    /// A list of strings; a NUL byte in any is refused, naming `name[i]`.
    std::optional<std::vector<std::string>> string_list(const char* name);
    /// An environment: an object of strings whose keys are variable names (refuse_bad_env_name)
    /// and whose values hold no NUL byte (400 naming `name.KEY`).
    std::optional<std::map<std::string, std::string>> env_map(const char* name);
    /// A nested object (the caller reads it with its own ObjectReader).
    const nlohmann::json* object(const char* name);

    /// 400 missing_field naming `name`.
    [[noreturn]] void missing(const char* name) const;
    /// 400 unknown_field for the first field no accessor asked for.
    void finish() const;

  private:
    const nlohmann::json* get(const char* name);
    [[noreturn]] void wrong_type(const char* name, const char* expected) const;

    const nlohmann::json& object_;
    std::string prefix_;
    std::set<std::string> known_;
};

/// Puts `bytes` under `key` when they are valid UTF-8 that JSON escaping at most doubles, else
/// base64 under `key + "Base64"`, so a client always gets either exact text or exact bytes, never
/// replacement characters, and binary output costs 4/3 of its size on the wire, not up to 6x.
void put_bytes(nlohmann::json& out, const std::string& key, std::string_view bytes);
/// As put_bytes, but `key` is always there: when the bytes are not plain text it holds them as
/// UTF-8 with U+FFFD for each byte that is not part of a well-formed sequence, beside the exact
/// bytes under `key + "Base64"` (a `run` result: readable text and exact bytes, issue 13.9).
void put_text_and_bytes(nlohmann::json& out, const std::string& key, std::string_view bytes);
/// put_bytes' choice: true for text, false for base64.
bool send_as_text(std::string_view bytes);
/// Appends `text` (valid UTF-8) as a JSON string literal, quotes included. For hot paths that
/// build JSON by hand; same escapes as nlohmann's dump.
void append_json_string(std::string& out, std::string_view text);
/// Appends `text` (valid UTF-8) JSON-escaped, without quotes: a piece of a string literal that is
/// written in parts (json_stream.hpp).
void append_json_escaped(std::string& out, std::string_view text);
/// send_as_text() over bytes that come in pieces (a log read from the ring a piece at a time):
/// the same answer as send_as_text() of their concatenation, without holding it.
class TextCheck {
  public:
    /// The next piece.
    void feed(std::string_view bytes);
    /// send_as_text() of everything fed.
    bool as_text() const;

  private:
    uint64_t overhead_ = 0;
    uint64_t size_ = 0;
    bool valid_ = true;
    std::string carry_;  ///< the start of a character the next piece completes (at most 3 bytes)
};
/// Appends standard base64 with padding (no quotes).
void append_base64(std::string& out, std::string_view bytes);
/// True when `bytes` is well-formed UTF-8.
bool is_valid_utf8(std::string_view bytes);
/// `bytes` as well-formed UTF-8: each byte that does not belong to a well-formed sequence becomes
/// U+FFFD.
std::string utf8_with_replacements(std::string_view bytes);
/// Length of the longest prefix of `bytes` that does not end inside a multi-byte UTF-8 sequence
/// (so a chunk cut in the middle of a character can hold the partial character back).
size_t utf8_complete_prefix(std::string_view bytes);
/// Standard base64 with padding.
std::string base64_encode(std::string_view bytes);
/// Serializes JSON; invalid UTF-8 in any string (paths, messages) becomes U+FFFD instead of
/// throwing mid-response.
std::string dump_json(const nlohmann::json& value);

}  // namespace corral::daemon
