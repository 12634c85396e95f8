// `corral cp LOCAL SID:PATH` and `corral cp SID:PATH LOCAL`: files into and out of a session,
// streamed in both directions so a file of any size passes through a fixed-size buffer. "-" as
// LOCAL is stdin (upload) or stdout (download). A download goes to a temporary file renamed into
// place at the end, so a failed copy never leaves a truncated file under the destination's name.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ostream>

#include "supervisor/cli/client_output.hpp"
#include "supervisor/cli/client_subcommands.hpp"

namespace corral::cli {
namespace {

using nlohmann::json;

/// A `SID:PATH` operand.
struct RemotePath {
    std::string sid;
    std::string path;
};

/// "SID:PATH" is remote when the part before the first ':' is a non-empty word without '/'; write
/// "./a:b" for a local file whose name contains a colon.
std::optional<RemotePath> parse_remote(const std::string& word) {
    size_t colon = word.find(':');
    if (colon == std::string::npos || colon == 0 ||
        word.substr(0, colon).find('/') != std::string::npos) {
        return std::nullopt;
    }
    return RemotePath{word.substr(0, colon), word.substr(colon + 1)};
}

std::string base_name(const std::string& path) {
    std::string trimmed = path;
    while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.pop_back();
    size_t slash = trimmed.rfind('/');
    return slash == std::string::npos ? trimmed : trimmed.substr(slash + 1);
}

std::string files_target(const RemotePath& remote) {
    return session_path(remote.sid) + "/files?path=" + url_encode(remote.path);
}

int local_failure(const Error& error, std::ostream& err) {
    err << "corral: cp: " << error.describe() << "\n";
    return client_exit::kLocalFile;
}

/// Reports a refused request from its (JSON or text) error body.
int report_refused(const HttpResponseHead& head, HttpResponseReader& reader, std::ostream& err) {
    auto text = reader.read_all(1 << 20);
    json body = text ? json::parse(*text, nullptr, false) : json();
    if (body.is_discarded()) body = *text;
    return report_api_error(ApiReply{head.status, body}, err);
}

int upload(const PreparedCommand& prepared, const std::string& local, RemotePath remote,
           ClientIo& io) {
    UniqueFd owned;
    int source = io.stdin_fd;
    std::optional<uint64_t> size;
    if (local != "-") {
        owned.reset(::open(local.c_str(), O_RDONLY | O_CLOEXEC));
        if (!owned) return local_failure(sys_error("open `" + local + "`"), io.err);
        source = owned.get();
    }
    struct stat st {};
    if (::fstat(source, &st) != 0) return local_failure(sys_error("stat `" + local + "`"), io.err);
    if (S_ISDIR(st.st_mode)) {
        return local_failure(plain_error("`" + local + "` is a directory (cp copies single files)"),
                             io.err);
    }
    if (S_ISREG(st.st_mode)) size = static_cast<uint64_t>(st.st_size);  // pipes go out chunked
    if (remote.path.empty() || remote.path.back() == '/') {
        if (local == "-")
            return report_usage_error(plain_error("cp: name the destination file for stdin"),
                                      io.err);
        remote.path += base_name(local);
    }
    HttpRequest request{
        "PUT", files_target(remote), {{"Content-Type", "application/octet-stream"}}, "", source,
        size};
    auto opened = prepared.client.open(request);
    if (!opened) return report_transport_error(opened.error(), io.err);
    auto& [head, reader] = *opened;
    if (head.status < 200 || head.status >= 300) return report_refused(head, reader, io.err);
    auto body = reader.read_all(1 << 20);
    if (!body) return report_transport_error(body.error(), io.err);
    if (prepared.args.flag("--json")) print_json(io.out, json::parse(*body, nullptr, false));
    return client_exit::kOk;
}

Status write_fd(int fd, const char* data, size_t size) {
    while (size > 0) {
        ssize_t n = ::write(fd, data, size);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return sys_error("write");
        data += n;
        size -= static_cast<size_t>(n);
    }
    return {};
}

/// Copies the body into `fd` (or io.out when fd < 0); `local_side` tells a failed write (ours) from
/// a failed read (the daemon's side).
Status copy_body(HttpResponseReader& reader, int fd, ClientIo& io, bool& local_side) {
    local_side = false;
    std::string buffer(64 * 1024, '\0');
    for (;;) {
        auto n = reader.read_body(buffer.data(), buffer.size());
        if (!n) return std::move(n.error());
        if (*n == 0) return {};
        local_side = true;
        if (fd < 0) {
            io.out.write(buffer.data(), static_cast<std::streamsize>(*n));
            if (!io.out) return sys_error(EIO, "write to stdout");
        } else {
            CORRAL_TRY(write_fd(fd, buffer.data(), *n), "");
        }
        local_side = false;
    }
}

int download(const PreparedCommand& prepared, const RemotePath& remote, std::string local,
             ClientIo& io) {
    struct stat st {};
    if (local != "-" && ::stat(local.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
        local += "/" + base_name(remote.path);
    }
    auto opened =
        prepared.client.open(HttpRequest{"GET", files_target(remote), {}, "", -1, std::nullopt});
    if (!opened) return report_transport_error(opened.error(), io.err);
    auto& [head, reader] = *opened;
    if (head.status < 200 || head.status >= 300) return report_refused(head, reader, io.err);
    if (local == "-") {
        bool local_side = false;
        auto copied = copy_body(reader, -1, io, local_side);
        io.out.flush();
        if (copied) return client_exit::kOk;
        return local_side ? local_failure(copied.error(), io.err)
                          : report_transport_error(copied.error(), io.err);
    }
    std::string partial = local + ".corral-partial-" + std::to_string(::getpid());
    UniqueFd file(::open(partial.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
    if (!file) return local_failure(sys_error("create `" + partial + "`"), io.err);
    bool local_side = false;
    auto copied = copy_body(reader, file.get(), io, local_side);
    if (copied) {
        local_side = true;  // from here on every failure is the local file's
        if (::fsync(file.get()) != 0) {
            copied = sys_error("fsync `" + partial + "`");
        } else if (::rename(partial.c_str(), local.c_str()) != 0) {
            copied = sys_error("rename `" + partial + "` to `" + local + "`");
        }
    }
    if (!copied) {
        ::unlink(partial.c_str());
        return local_side ? local_failure(copied.error(), io.err)
                          : report_transport_error(copied.error(), io.err);
    }
    return client_exit::kOk;
}

}  // namespace

int run_cp_command(const std::vector<std::string>& args, ClientIo& io) {
    ArgsSpec spec{
        "cp",
        {{"--json", false}},
        2,
        2,
        {"SOURCE", "DESTINATION"},
        false,
        "corral cp LOCAL SID:PATH | corral cp SID:PATH LOCAL   (LOCAL may be - for stdin/stdout)"};
    auto prepared = prepare_command(args, spec, io);
    if (!prepared) return report_usage_error(prepared.error(), io.err);
    const auto& words = prepared->args.positionals;
    auto from = parse_remote(words[0]);
    auto to = parse_remote(words[1]);
    if (from && to)
        return report_usage_error(
            plain_error("cp: both operands are in a session; one must be local"), io.err);
    if (!from && !to) {
        return report_usage_error(
            plain_error("cp: neither operand is SID:PATH\nusage: " + spec.synopsis), io.err);
    }
    if (to) return upload(*prepared, words[0], *to, io);
    if (from->path.empty())
        return report_usage_error(plain_error("cp: `" + words[0] + "` names no path"), io.err);
    return download(*prepared, *from, words[1], io);
}

}  // namespace corral::cli
