// File endpoints. Paths mean what they mean to the session's processes
// (sessions/files/path_space.hpp): absolute inside the sandbox, relative against the session's cwd
// (or, with ?shell=ID, that shell context's). The file services resolve them with openat2
// RESOLVE_IN_ROOT and name the path in their errors.

#include <unistd.h>

#include <charconv>

#include "sessions/files/file_service.hpp"
#include "sessions/files/path_space.hpp"
#include "supervisor/daemon/api.hpp"
#include "supervisor/daemon/api_json.hpp"

namespace corral::daemon {
namespace {

constexpr size_t kListLimit = 100000;  // entries of one recursive listing
constexpr size_t kListDepth = 64;

ApiError file_failure(const Error& error) {
    if (error.code == EROFS) {
        return {403, "read_only",
                error.describe() + "; that part of the sandbox is mounted read-only", nullptr};
    }
    return api_file_error(error);
}

template <class T>
T take_file(Result<T> result) {
    if (!result) throw ApiFailure(file_failure(result.error()));
    return std::move(result).value();
}

void check_file(const Status& status) {
    if (!status) throw ApiFailure(file_failure(status.error()));
}

std::string shell_of(const Exchange& ex) {
    auto it = ex.query().find("shell");
    return it == ex.query().end() ? "" : it->second;
}

/// A single byte range of `Range: bytes=...` against a file of `size` bytes: {first, length}.
/// nullopt for a range this server does not take (several ranges, other units): the whole file.
/// Throws 416 for a range that lies past the end.
std::optional<std::pair<uint64_t, uint64_t>> parse_range(const std::string& header, uint64_t size) {
    constexpr std::string_view prefix = "bytes=";
    if (header.rfind(prefix, 0) != 0 || header.find(',') != std::string::npos) return std::nullopt;
    const std::string_view spec = std::string_view(header).substr(prefix.size());
    const size_t dash = spec.find('-');
    if (dash == std::string_view::npos) return std::nullopt;
    auto number = [](std::string_view text) -> std::optional<uint64_t> {
        uint64_t value = 0;
        auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return {};
        return value;
    };
    const auto first = number(spec.substr(0, dash));
    const auto last = number(spec.substr(dash + 1));
    auto unsatisfiable = [&] {
        return ApiFailure(
            {416, "range_not_satisfiable",
             "range `" + header + "` lies outside the file's " + std::to_string(size) + " bytes",
             nullptr});
    };
    if (!first && !last) return std::nullopt;
    if (!first) {  // "-N": the last N bytes
        if (*last == 0) throw unsatisfiable();
        const uint64_t length = std::min(*last, size);
        return std::pair{size - length, length};
    }
    if (*first >= size) throw unsatisfiable();
    const uint64_t end = last ? std::min(*last, size - 1) : size - 1;
    if (end < *first) throw unsatisfiable();
    return std::pair{*first, end - *first + 1};
}

/// Byte offsets of lines [start_line, end_line] (1-based, inclusive; past the end stops at the
/// end) of the open file: {first byte, length}. Reads the file once.
Result<std::pair<uint64_t, uint64_t>> line_span(int fd, uint64_t size, uint64_t start_line,
                                                uint64_t end_line) {
    std::vector<char> chunk(64 * 1024);
    uint64_t line = 1, offset = 0, first = start_line == 1 ? 0 : size, last = size;
    bool have_first = start_line == 1;
    while (offset < size) {
        const ssize_t n = ::pread(fd, chunk.data(), chunk.size(), static_cast<off_t>(offset));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return sys_error("read");
        if (n == 0) break;
        for (ssize_t i = 0; i < n; ++i) {
            if (chunk[static_cast<size_t>(i)] != '\n') continue;
            const uint64_t after = offset + static_cast<uint64_t>(i) + 1;
            if (line == end_line) {
                last = after;
                return std::pair{first, last - first};
            }
            ++line;
            if (!have_first && line == start_line) {
                first = after;
                have_first = true;
            }
        }
        offset += static_cast<uint64_t>(n);
    }
    if (!have_first) first = size;
    return std::pair{first, last - first};
}

}  // namespace

asio::awaitable<void> Api::get_file(Exchange& ex, const RouteParams& params, const Caller&) {
    const FileTarget target = take_file(
        sessions_.file_target(params.at("sid"), required_query(ex, "path"), shell_of(ex)));
    ReadHandle handle = take_file(target.service->open_read(target.path));
    const auto start_line = query_number(ex, "startLine");
    const auto end_line = query_number(ex, "endLine");
    uint64_t first = 0, length = handle.size;
    std::string content_range;
    if (start_line || end_line) {
        const uint64_t from = start_line.value_or(1);
        const uint64_t to = end_line.value_or(UINT64_MAX);
        if (from == 0 || to < from)
            throw ApiFailure(bad_request("bad_query",
                                         "startLine and endLine are 1-based and "
                                         "startLine <= endLine"));
        std::tie(first, length) = take_file(line_span(handle.fd.get(), handle.size, from, to));
    } else if (auto range = parse_range(ex.header("Range"), handle.size)) {
        std::tie(first, length) = *range;
        content_range = "bytes " + std::to_string(first) + "-" +
                        std::to_string(first + length - 1) + "/" + std::to_string(handle.size);
    }
    if (first != 0 && ::lseek(handle.fd.get(), static_cast<off_t>(first), SEEK_SET) < 0)
        throw ApiFailure(file_failure(sys_error("seek `" + target.path + "`")));
    co_await ex.send_file(handle.fd.get(), length, content_range);
}

asio::awaitable<void> Api::put_file(Exchange& ex, const RouteParams& params, const Caller&) {
    const std::string& path = required_query(ex, "path");
    const FileTarget target =
        take_file(sessions_.file_target(params.at("sid"), path, shell_of(ex)));
    WriteTransaction upload = take_file(target.service->open_write(target.path, true));
    uint64_t written = 0;
    // Each chunk goes to the temp file before the next is read: memory stays at one chunk.
    const std::function<Status(std::string_view)> sink = [&](std::string_view bytes) -> Status {
        written += bytes.size();
        return upload.write_all(bytes);
    };
    Status status = co_await ex.read_body_chunks(sink);
    check_file(status);  // the transaction's destructor removes the temp file
    check_file(upload.commit());
    nlohmann::json reply = {{"path", target.path}, {"size", written}};
    co_await ex.send_json(200, reply);
}

asio::awaitable<void> Api::delete_file(Exchange& ex, const RouteParams& params, const Caller&) {
    const FileTarget target = take_file(
        sessions_.file_target(params.at("sid"), required_query(ex, "path"), shell_of(ex)));
    check_file(target.service->remove(target.path, query_flag(ex, "recursive")));
    nlohmann::json reply = {{"path", target.path}, {"deleted", true}};
    co_await ex.send_json(200, reply);
}

asio::awaitable<void> Api::make_directory(Exchange& ex, const RouteParams& params, const Caller&) {
    const std::string body = co_await ex.read_body(kJsonBodyLimit);
    const auto json = parse_json_object(body);
    ObjectReader r(json);
    auto path = r.string("path");
    const bool recursive = r.boolean("recursive").value_or(false);
    const std::string shell = r.string("shell").value_or("");
    r.finish();
    if (!path) r.missing("path");
    const FileTarget target = take_file(sessions_.file_target(params.at("sid"), *path, shell));
    check_file(target.service->mkdir(target.path, recursive));
    nlohmann::json reply = {{"path", target.path}, {"created", true}};
    co_await ex.send_json(201, reply);
}

asio::awaitable<void> Api::move_file(Exchange& ex, const RouteParams& params, const Caller&) {
    const std::string body = co_await ex.read_body(kJsonBodyLimit);
    const auto json = parse_json_object(body);
    ObjectReader r(json);
    auto from = r.string("from");
    auto to = r.string("to");
    const bool replace = r.boolean("replace").value_or(false);
    const std::string shell = r.string("shell").value_or("");
    r.finish();
    if (!from) r.missing("from");
    if (!to) r.missing("to");
    const FileTarget source = take_file(sessions_.file_target(params.at("sid"), *from, shell));
    const FileTarget dest = take_file(sessions_.file_target(params.at("sid"), *to, shell));
    if (source.service != dest.service) {
        throw ApiFailure(file_failure(sys_error(
            EXDEV, "move `" + source.path + "` to `" + dest.path +
                       "`: one is in the workspace and the other is not; copy it instead")));
    }
    check_file(source.service->move(source.path, dest.path, replace));
    nlohmann::json reply = {{"from", source.path}, {"to", dest.path}};
    co_await ex.send_json(200, reply);
}

asio::awaitable<void> Api::list_directory(Exchange& ex, const RouteParams& params, const Caller&) {
    auto it = ex.query().find("path");
    const std::string path = it == ex.query().end() ? "." : it->second;
    const FileTarget target =
        take_file(sessions_.file_target(params.at("sid"), path, shell_of(ex)));
    const bool recursive = query_flag(ex, "recursive");
    // Entries are kept as records and made into JSON one at a time as they are written (issue 12
    // item 3: 100,000 entries as a JSON tree are ~100 MB).
    auto entries = std::make_shared<std::vector<FileInfo>>();
    // Breadth-first; entries of subdirectories are named relative to the listed directory
    // ("sub/a.txt"). Symlinks are listed, never followed.
    struct Pending {
        std::string relative;
        size_t depth;
    };
    std::vector<Pending> queue{{"", 0}};
    bool truncated = false;
    for (size_t next = 0; next < queue.size(); ++next) {
        const Pending dir = queue[next];
        const std::string dir_path =
            dir.relative.empty() ? target.path
                                 : (target.path == "/" ? "" : target.path) + "/" + dir.relative;
        auto listed = target.service->list(dir_path);
        if (!listed) {
            if (dir.relative.empty()) throw ApiFailure(file_failure(listed.error()));
            continue;  // a subdirectory that vanished or is unreadable: skipped
        }
        for (const auto& info : *listed) {
            if (entries->size() >= kListLimit) {
                truncated = true;
                break;
            }
            const std::string relative =
                dir.relative.empty() ? info.name : dir.relative + "/" + info.name;
            entries->push_back(info);
            entries->back().name = relative;
            if (recursive && info.type == FileType::dir && dir.depth + 1 < kListDepth)
                queue.push_back({relative, dir.depth + 1});
        }
        if (truncated || !recursive) break;
    }
    nlohmann::json reply = {{"path", target.path}, {"entries", streamed(0)}};
    if (recursive) reply["truncated"] = truncated;
    std::vector<PieceSource> sources;
    sources.push_back(json_array_source(
        entries->size(), [entries](size_t i) { return file_info_json((*entries)[i]); }));
    co_await ex.send_json(200, reply, std::move(sources));
}

asio::awaitable<void> Api::stat_file(Exchange& ex, const RouteParams& params, const Caller&) {
    const FileTarget target = take_file(
        sessions_.file_target(params.at("sid"), required_query(ex, "path"), shell_of(ex)));
    auto info = take_file(target.service->stat(target.path));
    nlohmann::json out = file_info_json(info);
    out["path"] = target.path;
    co_await ex.send_json(200, out);
}

}  // namespace corral::daemon
