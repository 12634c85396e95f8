// SessionManager's shell-context calls and the queued start of a process: look the session up,
// then forward (shell_context.hpp has the mechanism).
#include "sessions/process.hpp"
#include "sessions/session.hpp"
#include "sessions/session_manager.hpp"

namespace corral {

WaitHandle SessionManager::async_start_process(const std::string& sid,
                                               const ProcessRequest& request, StartHandler handler,
                                               bool follow_output) {
    auto alive = std::make_shared<bool>(true);
    auto shared_handler = std::make_shared<StartHandler>(std::move(handler));
    auto fail = [this, alive, shared_handler](Error error) {
        boost::asio::post(io_, [alive, shared_handler, error = std::move(error)]() mutable {
            if (*alive) (*shared_handler)(std::move(error));
        });
    };
    // The answer waits until the child has exec'd or its record is final (a setup failure
    // names its step), on the loop, never blocking it (process_launch.cpp).
    // The hold is taken here, in the turn that started the process: its pipes are first read
    // in a later one (Process::start_watching). Dropped with the answer when nobody takes it.
    auto when_launched = [alive, shared_handler,
                          follow_output](const std::shared_ptr<Process>& process) {
        std::shared_ptr<OutputFollower> follower;
        if (follow_output) follower = process->follow(true, 0, true, 0);
        std::weak_ptr<Process> weak = process;
        (void)process->wait_launched([alive, shared_handler, weak, follower] {
            if (!*alive) return;
            auto self = weak.lock();
            if (!self) {
                (*shared_handler)(sys_error(ENOENT, "the process is gone"));
                return;
            }
            // Without usage: run and exec use the id only; a spawn or terminal answer reads
            // the record again (get_process).
            (*shared_handler)(StartedProcess{self->info(/*read_usage=*/false), follower});
        });
    };
    auto session = find_active(sid);
    if (!session) {
        fail(std::move(session.error()));
        return WaitHandle(alive);
    }
    if (request.shell.empty()) {
        auto process = (*session)->start_process(request);
        if (!process) {
            fail(std::move(process.error()));
        } else {
            when_launched(*process);
        }
        return WaitHandle(alive);
    }
    // One flag for both: dropping the handle also takes the command out of the queue.
    Status queued = (*session)->enqueue_shell_command(
        request, alive,
        [alive, shared_handler, when_launched](Result<std::shared_ptr<Process>> started) {
            if (!*alive) return;
            if (!started) {
                (*shared_handler)(std::move(started.error()));
            } else {
                when_launched(*started);
            }
        });
    if (!queued) fail(std::move(queued.error()));
    return WaitHandle(alive);
}

Result<ShellInfo> SessionManager::create_shell(const std::string& sid,
                                               const ShellRequest& request) {
    auto session = find_active(sid);
    if (!session) return std::move(session.error());
    return (*session)->create_shell(request);
}

Result<std::vector<ShellInfo>> SessionManager::list_shells(const std::string& sid) {
    auto session = find_any(sid);
    if (!session) return std::move(session.error());
    (*session)->touch();
    return (*session)->shells();
}

Result<ShellInfo> SessionManager::get_shell(const std::string& sid, const std::string& shell) {
    auto session = find_any(sid);
    if (!session) return std::move(session.error());
    (*session)->touch();
    return (*session)->shell(shell);
}

Status SessionManager::delete_shell(const std::string& sid, const std::string& shell) {
    auto session = find_active(sid);
    if (!session) return std::move(session.error());
    return (*session)->delete_shell(shell);
}

}  // namespace corral

namespace corral {

Result<FileTarget> SessionManager::file_target(const std::string& sid, std::string_view path,
                                               const std::string& shell) {
    auto session = find_active(sid);
    if (!session) return std::move(session.error());
    return (*session)->file_target(path, shell);
}

}  // namespace corral
