#pragma once
// JSON response bodies produced while they are written (issue 12 item 3): a client that asks for
// a large response (a 16 MiB log, a long list) and does not read it must hold a piece of it, not
// the whole body two or three times over (raw bytes, the JSON tree, its dump: ~50 MB a request,
// 2 GB for 40 such clients). A handler builds the small part of the body as a nlohmann value with
// placeholders where the large parts go, and a source for each placeholder; Exchange::send_json
// pulls pieces from the sources as the client takes them. The bytes are exactly dump_json's.

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace corral::daemon {

/// A part of a response, a piece at a time: appends the next piece (about kResponsePiece bytes
/// at most) to `out`; returns true while more follows, false once it appended its last.
using PieceSource = std::function<bool(std::string& out)>;
/// Raw bytes (a process's output), a piece at a time, in the same convention.
using ByteSource = std::function<bool(std::string& out)>;

/// About how many bytes a response holds and writes at a time.
inline constexpr size_t kResponsePiece = 64 * 1024;

/// A placeholder for `sources[index]` in a value given to streamed_json (a binary value, which
/// no API body holds otherwise).
nlohmann::json streamed(size_t index);

/// dump_json(value) + "\n", with each placeholder replaced by what its source writes there. A
/// source is called only when the text before it has been produced, so a later one can report
/// what an earlier one did (a log's nextOffset after its data).
PieceSource streamed_json(const nlohmann::json& value, std::vector<PieceSource> sources);

/// A JSON array of `count` elements, each made by `element(i)` only when its turn comes.
PieceSource json_array_source(size_t count, std::function<nlohmann::json(size_t)> element);

/// A JSON string literal of the bytes (valid UTF-8), as dump_json writes it.
PieceSource json_text_source(ByteSource bytes);
/// A JSON string literal of utf8_with_replacements(bytes), as dump_json writes it.
PieceSource json_replaced_text_source(ByteSource bytes);
/// A JSON string literal of base64_encode(bytes).
PieceSource json_base64_source(ByteSource bytes);

/// The bytes of a string the source shares (a `run` result's excerpt), a piece at a time.
ByteSource bytes_of(std::shared_ptr<const std::string> bytes);

}  // namespace corral::daemon
