// File endpoints. Paths are exactly what the client sent; the file service resolves them inside
// the session root (openat2 RESOLVE_IN_ROOT) and its errors name the path.

#include "sessions/file_service.hpp"
#include "supervisor/daemon/api.hpp"
#include "supervisor/daemon/api_json.hpp"

namespace corral::daemon {
namespace {

template <class T>
T take_file(Result<T> result) {
    if (!result) throw ApiFailure(api_file_error(result.error()));
    return std::move(result).value();
}

void check_file(const Status& status) {
    if (!status) throw ApiFailure(api_file_error(status.error()));
}

}  // namespace

asio::awaitable<void> Api::get_file(Exchange& ex, const RouteParams& params, const Caller&) {
    auto files = take(sessions_.files(params.at("sid")));
    ReadHandle handle = take_file(files->open_read(required_query(ex, "path")));
    co_await ex.send_file(handle.fd.get(), handle.size);
}

asio::awaitable<void> Api::put_file(Exchange& ex, const RouteParams& params, const Caller&) {
    auto files = take(sessions_.files(params.at("sid")));
    const std::string& path = required_query(ex, "path");
    WriteTransaction upload = take_file(files->open_write(path, /*create_parents=*/true));
    uint64_t written = 0;
    // Each chunk goes to the temp file before the next is read: memory stays at one chunk.
    const std::function<Status(std::string_view)> sink = [&](std::string_view bytes) -> Status {
        written += bytes.size();
        return upload.write_all(bytes);
    };
    Status status = co_await ex.read_body_chunks(sink);
    check_file(status);  // the transaction's destructor removes the temp file
    check_file(upload.commit());
    nlohmann::json reply = {{"path", path}, {"size", written}};
    co_await ex.send_json(200, reply);
}

asio::awaitable<void> Api::delete_file(Exchange& ex, const RouteParams& params, const Caller&) {
    auto files = take(sessions_.files(params.at("sid")));
    const std::string& path = required_query(ex, "path");
    check_file(files->remove(path, query_flag(ex, "recursive")));
    nlohmann::json reply = {{"path", path}, {"deleted", true}};
    co_await ex.send_json(200, reply);
}

asio::awaitable<void> Api::make_directory(Exchange& ex, const RouteParams& params, const Caller&) {
    const std::string body = co_await ex.read_body(kJsonBodyLimit);
    const auto json = parse_json_object(body);
    ObjectReader r(json);
    auto path = r.string("path");
    const bool recursive = r.boolean("recursive").value_or(false);
    r.finish();
    if (!path) r.missing("path");
    auto files = take(sessions_.files(params.at("sid")));
    check_file(files->mkdir(*path, recursive));
    nlohmann::json reply = {{"path", *path}, {"created", true}};
    co_await ex.send_json(201, reply);
}

asio::awaitable<void> Api::move_file(Exchange& ex, const RouteParams& params, const Caller&) {
    const std::string body = co_await ex.read_body(kJsonBodyLimit);
    const auto json = parse_json_object(body);
    ObjectReader r(json);
    auto from = r.string("from");
    auto to = r.string("to");
    const bool replace = r.boolean("replace").value_or(false);
    r.finish();
    if (!from) r.missing("from");
    if (!to) r.missing("to");
    auto files = take(sessions_.files(params.at("sid")));
    check_file(files->move(*from, *to, replace));
    nlohmann::json reply = {{"from", *from}, {"to", *to}};
    co_await ex.send_json(200, reply);
}

asio::awaitable<void> Api::list_directory(Exchange& ex, const RouteParams& params, const Caller&) {
    auto files = take(sessions_.files(params.at("sid")));
    auto it = ex.query().find("path");
    const std::string path = it == ex.query().end() ? "/" : it->second;
    nlohmann::json entries = nlohmann::json::array();
    for (const auto& info : take_file(files->list(path))) entries.push_back(file_info_json(info));
    nlohmann::json reply = {{"path", path}, {"entries", std::move(entries)}};
    co_await ex.send_json(200, reply);
}

asio::awaitable<void> Api::stat_file(Exchange& ex, const RouteParams& params, const Caller&) {
    auto files = take(sessions_.files(params.at("sid")));
    const std::string& path = required_query(ex, "path");
    auto info = take_file(files->stat(path));
    nlohmann::json out = file_info_json(info);
    out["path"] = path;
    co_await ex.send_json(200, out);
}

}  // namespace corral::daemon
