// A session's code contexts (contexts/code_context.hpp): each one's interpreter is a session
// process started here, with the driver on its stdin and its channel at fd 3.
#include <algorithm>
#include <cctype>

#include "sessions/session.hpp"

namespace corral {
namespace {

bool valid_context_id(const std::string& id) {
    if (id.empty() || id.size() > 64) return false;
    return std::all_of(id.begin(), id.end(),
                       [](unsigned char c) { return std::isalnum(c) || c == '-' || c == '_'; });
}

}  // namespace

Status Session::create_context(const CodeContextRequest& request, CodeContext::Ready ready) {
    if (state_ != SessionState::active) {
        return sys_error(ESHUTDOWN, "session " + id_ + " is " + std::string(to_string(state_)));
    }
    std::string id = request.id;
    if (id.empty()) {
        do {
            id = "c" + std::to_string(next_context_++);
        } while (contexts_.count(id));
    } else if (!valid_context_id(id)) {
        return sys_error(EINVAL, "context id `" + id + "` must be 1-64 of [A-Za-z0-9_-]");
    } else if (auto found = contexts_.find(id);
               found != contexts_.end() && !found->second->dead()) {
        return sys_error(EEXIST, "session " + id_ + " already has code context `" + id + "`");
    }
    CodeContext::Options options;
    options.output_cap = static_cast<size_t>(policy_.limits.output);
    options.default_timeout = command_timeout_;
    options.grace = policy_.timeouts.grace;
    const std::string cwd = resolve_cwd(request.cwd, cwd_);
    auto context = std::make_shared<CodeContext>(context_.io, id, request.language, cwd, options);
    std::weak_ptr<Session> weak = weak_from_this();
    auto launch = [weak, &request, &cwd, id](int channel_fd) -> Result<std::shared_ptr<Process>> {
        auto self = weak.lock();
        if (!self) return sys_error(ESHUTDOWN, "the session is gone");
        ProcessRequest process;
        process.cwd = cwd;
        process.background = true;  // a context lives on; each run has its own timeout
        ProcessSetup setup = self->base_setup(process);
        setup.argv = interpreter_argv(request.language);
        setup.command =
            "corral code context " + id + " (" + std::string(to_string(request.language)) + ")";
        setup.env = self->process_env(request.env);
        setup.stdin_data = std::string(driver_source(request.language));
        setup.extra_fd = channel_fd;
        return self->launch(std::move(setup));
    };
    if (Status started = context->start(launch, std::move(ready)); !started) return started;
    contexts_[id] = std::move(context);
    return {};
}

std::vector<CodeContextInfo> Session::contexts() const {
    std::vector<CodeContextInfo> list;
    for (const auto& [id, context] : contexts_) list.push_back(context->info());
    return list;
}

Result<CodeContextInfo> Session::context(const std::string& id) const {
    auto found = contexts_.find(id);
    if (found == contexts_.end())
        return sys_error(ENOENT, "session " + id_ + " has no code context `" + id + "`");
    return found->second->info();
}

Status Session::delete_context(const std::string& id) {
    auto found = contexts_.find(id);
    if (found == contexts_.end())
        return sys_error(ENOENT, "session " + id_ + " has no code context `" + id + "`");
    found->second->close("deleted through the API");
    contexts_.erase(found);
    return {};
}

Result<uint64_t> Session::run_code(const std::string& id, CodeRunRequest request,
                                   std::shared_ptr<bool> alive, CodeContext::Events events) {
    if (state_ != SessionState::active) {
        return sys_error(ESHUTDOWN, "session " + id_ + " is " + std::string(to_string(state_)));
    }
    auto found = contexts_.find(id);
    if (found == contexts_.end())
        return sys_error(ENOENT, "session " + id_ + " has no code context `" + id + "`");
    idle_timer_.cancel();
    return found->second->enqueue(std::move(request), std::move(alive), std::move(events));
}

Status Session::interrupt_code(const std::string& id, uint64_t run) {
    auto found = contexts_.find(id);
    if (found == contexts_.end())
        return sys_error(ENOENT, "session " + id_ + " has no code context `" + id + "`");
    found->second->interrupt(run);
    return {};
}

}  // namespace corral
