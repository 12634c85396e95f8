// SessionManager's ways to stop processes beyond kill_process: a graceful stop of one tree, a
// signal to a whole tree, and killing everything a session runs (Cloudflare's killAllProcesses).
#include "sessions/process.hpp"
#include "sessions/session.hpp"
#include "sessions/session_manager.hpp"

namespace corral {

Result<size_t> SessionManager::stop_process(const std::string& sid, const std::string& proc,
                                            bool force) {
    auto session = find_active(sid);
    if (!session) return std::move(session.error());
    auto process = (*session)->process(proc);
    if (!process) return std::move(process.error());
    return (*process)->stop(force);
}

Result<size_t> SessionManager::signal_process_tree(const std::string& sid, const std::string& proc,
                                                   int signal) {
    auto session = find_active(sid);
    if (!session) return std::move(session.error());
    auto process = (*session)->process(proc);
    if (!process) return std::move(process.error());
    return (*process)->signal_tree(signal);
}

Result<std::vector<std::string>> SessionManager::kill_all_processes(const std::string& sid) {
    auto session = find_active(sid);
    if (!session) return std::move(session.error());
    std::vector<std::string> killed;
    for (const auto& process : (*session)->processes()) {
        if (process->finished() && !process->leaf_populated()) continue;
        auto result = process->kill();
        if (!result) return std::move(result.error());
        if (!process->finished()) killed.push_back(process->id());
    }
    return killed;
}

}  // namespace corral
