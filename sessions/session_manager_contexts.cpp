// SessionManager's code-context calls: look the session up, then forward
// (contexts/code_context.hpp has the mechanism).
#include "sessions/session.hpp"
#include "sessions/session_manager.hpp"

namespace corral {

WaitHandle SessionManager::create_context(const std::string& sid, const CodeContextRequest& request,
                                          ContextHandler handler) {
    auto alive = std::make_shared<bool>(true);
    auto shared_handler = std::make_shared<ContextHandler>(std::move(handler));
    auto finish = [alive, shared_handler](Result<CodeContextInfo> result) {
        if (*alive) (*shared_handler)(std::move(result));
    };
    auto session = find_active(sid);
    Status created =
        session ? (*session)->create_context(request, finish) : Status(std::move(session.error()));
    if (!created) {
        boost::asio::post(io_, [finish, error = std::move(created.error())]() mutable {
            finish(std::move(error));
        });
    }
    return WaitHandle(alive);
}

Result<std::vector<CodeContextInfo>> SessionManager::list_contexts(const std::string& sid) {
    auto session = find_any(sid);
    if (!session) return std::move(session.error());
    (*session)->touch();
    return (*session)->contexts();
}

Result<CodeContextInfo> SessionManager::get_context(const std::string& sid,
                                                    const std::string& ctx) {
    auto session = find_any(sid);
    if (!session) return std::move(session.error());
    (*session)->touch();
    return (*session)->context(ctx);
}

Status SessionManager::delete_context(const std::string& sid, const std::string& ctx) {
    auto session = find_active(sid);
    if (!session) return std::move(session.error());
    return (*session)->delete_context(ctx);
}

Result<SessionManager::CodeRunTicket> SessionManager::run_code(const std::string& sid,
                                                               const std::string& ctx,
                                                               CodeRunRequest request,
                                                               CodeEventHandler handler) {
    auto session = find_active(sid);
    if (!session) return std::move(session.error());
    auto alive = std::make_shared<bool>(true);
    auto queued = (*session)->run_code(ctx, std::move(request), alive, std::move(handler));
    if (!queued) return std::move(queued.error());
    return CodeRunTicket{*queued, WaitHandle(alive)};
}

Status SessionManager::interrupt_code(const std::string& sid, const std::string& ctx,
                                      uint64_t run) {
    auto session = find_active(sid);
    if (!session) return std::move(session.error());
    return (*session)->interrupt_code(ctx, run);
}

}  // namespace corral
