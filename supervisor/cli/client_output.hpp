#pragma once
// Human-readable output of the client commands: aligned tables and short renderings of JSON values.
// Field names come from the API contract; the renderers tolerate missing fields ("-") so a daemon
// that adds or omits a field never breaks `corral ps`.

#include <initializer_list>
#include <iosfwd>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace corral::cli {

/// Prints rows under a header, columns padded to their widest cell, separated by two spaces.
void print_table(std::ostream& out, const std::vector<std::string>& header,
                 const std::vector<std::vector<std::string>>& rows);

/// A JSON value as one table cell: strings as they are, null/missing as "-", arrays as their length
/// (or their items joined with "," when all are scalars and `join_arrays`), objects compactly.
std::string cell_text(const nlohmann::json& value, bool join_arrays = false);

/// The first of `keys` present in `object` as a cell ("-" when none is).
std::string field_text(const nlohmann::json& object, std::initializer_list<const char*> keys,
                       bool join_arrays = false);

/// The list inside a reply: the body itself when it is an array, else body[key] when that is an
/// array, else empty. Lets `ls` commands accept both `[...]` and `{"sessions": [...]}`.
nlohmann::json list_in(const nlohmann::json& body, const char* key);

/// Prints an object as "key: value" lines, nested objects flattened as "a.b: value".
void print_fields(std::ostream& out, const nlohmann::json& object, const std::string& prefix = "");

/// Pretty-prints the raw reply (for --json).
void print_json(std::ostream& out, const nlohmann::json& body);

}  // namespace corral::cli
