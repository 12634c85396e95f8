// SessionManager's per-process, output, stdin, port and file calls: look the session (and
// process) up, then forward. Reads work on ended sessions during their retention window; anything
// that changes a session needs it active.
#include "sessions/process.hpp"
#include "sessions/session.hpp"
#include "sessions/session_manager.hpp"

namespace corral {
namespace {

/// Posts `fn(error)` so a handler never runs inline from the call that registered it.
template <class Handler>
void post_error(boost::asio::io_context& io, Handler handler, Error error) {
    boost::asio::post(io, [handler = std::move(handler), error = std::move(error)]() mutable {
        handler(std::move(error));
    });
}

}  // namespace

Result<ProcessInfo> SessionManager::start_process(const std::string& sid,
                                                  const ProcessRequest& request) {
    auto session = find_active(sid);
    if (!session) return std::move(session.error());
    auto process = (*session)->start_process(request);
    if (!process) return std::move(process.error());
    return (*process)->info();
}

Result<std::vector<ProcessInfo>> SessionManager::list_processes(const std::string& sid) {
    auto session = find_any(sid);
    if (!session) return std::move(session.error());
    (*session)->touch();
    std::vector<ProcessInfo> list;
    for (const auto& process : (*session)->processes()) list.push_back(process->info());
    return list;
}

Result<ProcessInfo> SessionManager::get_process(const std::string& sid, const std::string& proc) {
    auto session = find_any(sid);
    if (!session) return std::move(session.error());
    (*session)->touch();
    auto process = (*session)->process(proc);
    if (!process) return std::move(process.error());
    return (*process)->info();
}

Status SessionManager::signal_process(const std::string& sid, const std::string& proc, int signal) {
    auto session = find_active(sid);
    if (!session) return std::move(session.error());
    auto process = (*session)->process(proc);
    if (!process) return std::move(process.error());
    return (*process)->signal(signal);
}

Status SessionManager::resize_terminal(const std::string& sid, const std::string& proc,
                                       TerminalSize size) {
    auto session = find_active(sid);
    if (!session) return std::move(session.error());
    auto process = (*session)->process(proc);
    if (!process) return std::move(process.error());
    return (*process)->resize_terminal(size);
}

Result<size_t> SessionManager::kill_process(const std::string& sid, const std::string& proc) {
    auto session = find_active(sid);
    if (!session) return std::move(session.error());
    auto process = (*session)->process(proc);
    if (!process) return std::move(process.error());
    return (*process)->kill();
}

WaitHandle SessionManager::async_wait_process(const std::string& sid, const std::string& proc,
                                              std::optional<Millis> timeout, WaitHandler handler) {
    auto session = find_any(sid);
    Result<std::shared_ptr<Process>> process =
        session ? (*session)->process(proc) : Result<std::shared_ptr<Process>>(session.error());
    if (!process) {
        auto alive = std::make_shared<bool>(true);
        boost::asio::post(io_, [alive, handler = std::move(handler), error = process.error()] {
            if (*alive) handler(error, false);
        });
        return WaitHandle(alive);
    }
    (*session)->touch();
    std::weak_ptr<Process> weak = *process;
    return WaitHandle(
        (*process)->wait_exit(timeout, [weak, handler = std::move(handler)](bool finished) {
            auto self = weak.lock();
            if (!self) {
                handler(sys_error(ENOENT, "process is gone"), false);
                return;
            }
            handler(self->info(), finished);
        }));
}

Result<std::shared_ptr<Process>> SessionManager::find_process(const std::string& sid,
                                                              const std::string& proc) {
    auto session = find_any(sid);
    if (!session) return std::move(session.error());
    return (*session)->process(proc);
}

Result<OutputChunk> SessionManager::read_output(const std::string& sid, const std::string& proc,
                                                OutputStream stream, uint64_t offset,
                                                size_t max_bytes) {
    auto process = find_process(sid, proc);
    if (!process) return std::move(process.error());
    return (*process)->read(stream, offset, max_bytes);
}

Result<OutputView> SessionManager::view_output(const std::string& sid, const std::string& proc,
                                               OutputStream stream, uint64_t offset,
                                               size_t max_bytes) {
    auto process = find_process(sid, proc);
    if (!process) return std::move(process.error());
    return (*process)->view(stream, offset, max_bytes);
}

Result<OutputBuffer::Excerpt> SessionManager::output_excerpt(const std::string& sid,
                                                             const std::string& proc,
                                                             OutputStream stream) {
    auto process = find_process(sid, proc);
    if (!process) return std::move(process.error());
    return (*process)->excerpt(stream);
}

Result<std::shared_ptr<OutputFollower>> SessionManager::follow_output(
    const std::string& sid, const std::string& proc, bool want_stdout, uint64_t stdout_offset,
    bool want_stderr, uint64_t stderr_offset) {
    auto process = find_process(sid, proc);
    if (!process) return std::move(process.error());
    return (*process)->follow(want_stdout, stdout_offset, want_stderr, stderr_offset);
}

WaitHandle SessionManager::async_wait_output(const std::string& sid, const std::string& proc,
                                             uint64_t stdout_offset, uint64_t stderr_offset,
                                             OutputHandler handler) {
    auto session = find_any(sid);
    Result<std::shared_ptr<Process>> process =
        session ? (*session)->process(proc) : Result<std::shared_ptr<Process>>(session.error());
    if (!process) {
        auto alive = std::make_shared<bool>(true);
        boost::asio::post(io_, [alive, handler = std::move(handler), error = process.error()] {
            if (*alive) handler(error);
        });
        return WaitHandle(alive);
    }
    (*session)->touch();
    return WaitHandle((*process)->wait_output(
        stdout_offset, stderr_offset, [handler = std::move(handler)] { handler(Status{}); }));
}

void SessionManager::write_stdin(const std::string& sid, const std::string& proc, std::string data,
                                 bool eof, StatusHandler handler) {
    auto session = find_active(sid);
    if (!session) return post_error(io_, std::move(handler), std::move(session.error()));
    auto process = (*session)->process(proc);
    if (!process) return post_error(io_, std::move(handler), std::move(process.error()));
    (*process)->write_stdin(std::move(data), eof, std::move(handler));
}

Result<PortLeaseInfo> SessionManager::lease_port(const std::string& sid) {
    auto session = find_active(sid);
    if (!session) return std::move(session.error());
    return (*session)->lease_port();
}

Result<std::vector<PortLeaseInfo>> SessionManager::list_ports(const std::string& sid) {
    auto session = find_any(sid);
    if (!session) return std::move(session.error());
    (*session)->touch();
    return (*session)->ports();
}

Status SessionManager::release_port(const std::string& sid, uint16_t port) {
    auto session = find_active(sid);
    if (!session) return std::move(session.error());
    return (*session)->release_port(port);
}

Result<std::string> SessionManager::port_endpoint(const std::string& sid, uint16_t port,
                                                  std::string_view protocol) {
    auto session = find_active(sid);
    if (!session) return std::move(session.error());
    return (*session)->endpoint(port, protocol);
}

Result<std::shared_ptr<FileService>> SessionManager::files(const std::string& sid) {
    auto session = find_active(sid);
    if (!session) return std::move(session.error());
    return (*session)->files();
}

}  // namespace corral
