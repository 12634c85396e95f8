// Start-up after a crash, the journal's half (DESIGN.md "Surviving the daemon"): read and replay
// the journal, decide which sessions come back, take them over, and start the journal anew as a
// snapshot of what did. The other half — reaping what nobody owns — is recovery/recovery.cpp.
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>

#include "base/directory_listing.hpp"
#include "policies/compiled/compiled_presets.hpp"
#include "policies/policy_parser.hpp"
#include "sessions/recovery/session_journal.hpp"
#include "sessions/session.hpp"
#include "sessions/session_manager.hpp"

namespace corral {
namespace {

bool cgroup_populated(const std::string& dir) {
    auto cgroup = Cgroup::open_unowned(dir);
    if (!cgroup) return false;
    auto populated = cgroup->populated();
    return populated && *populated;
}

/// Whether a leaf of the session cgroup `dir` other than its holder's holds processes.
bool populated_besides_holder(const std::string& dir) {
    for (const auto& name : subdirectory_names(dir))
        if (name != "holder" && cgroup_populated(dir + "/" + name)) return true;
    return false;
}

}  // namespace

std::map<std::string, JournalSession> SessionManager::read_journalled_sessions(
    const std::string& sessions_cgroup, uint64_t& valid_bytes, std::set<std::string>& known) {
    std::map<std::string, JournalSession> adoptable;
    valid_bytes = 0;
    if (!config_.journal) return adoptable;
    const std::string path = config_.state_dir + "/journal";
    auto contents = read_journal(path);
    if (!contents) {
        // Not ours, too large or too new: nothing in it is believed; it is replaced below and
        // everything of corral's is reaped as without a journal.
        adoption_.notes.push_back("journal refused: " + contents.error().describe());
        return adoptable;
    }
    valid_bytes = contents->valid_bytes;
    for (auto& note : contents->notes) adoption_.notes.push_back(std::move(note));
    auto sessions = replay_journal(contents->records, adoption_.notes);
    for (auto& [sid, record] : sessions) {
        known.insert(sid);
        if (!config_.adopt_sessions) continue;
        if (record.ending) {
            adoption_.refused.push_back(sid + ": it was ending (" + *record.ending +
                                        ") when the daemon stopped");
            continue;
        }
        // The cgroup is found from the id beneath our own instance, never from the journal.
        // A keeper alone (a `none` session with nothing running) does not count, as an empty
        // cgroup would not.
        const std::string dir = sessions_cgroup + "/" + sid;
        if (!cgroup_populated(dir) || (record.keeper && !populated_besides_holder(dir)))
            continue;  // ends: daemon-restart
        adoptable.emplace(sid, std::move(record));
    }
    return adoptable;
}

Status SessionManager::open_journal(uint64_t valid_bytes) {
    auto journal = Journal::open(config_.state_dir + "/journal", valid_bytes, config_.journal_sync);
    if (!journal) return std::move(journal.error());
    journal_ = std::make_unique<SessionJournal>(
        io_, std::move(*journal), [this] { return journal_snapshot_records(); }, config_.log,
        config_.journal_compact_at);
    return {};
}

std::vector<nlohmann::json> SessionManager::journal_snapshot_records() const {
    std::vector<nlohmann::json> records;
    for (const auto& [sid, session] : sessions_) {
        if (session->state() == SessionState::ended) continue;
        for (auto& record : journal_snapshot(session->journal_state()))
            records.push_back(std::move(record));
    }
    return records;
}

uint64_t SessionManager::journal_size() const {
    return journal_ ? journal_->size() : 0;
}

void SessionManager::adopt_sessions(std::map<std::string, JournalSession> sessions,
                                    const LeftoverScope& scope) {
    for (auto& [sid, record] : sessions) {
        CreateSessionRequest source;
        source.policy = record.policy;
        source.policy_yaml = record.policy_yaml;
        PolicyParseResult parsed =
            !source.policy_yaml.empty()
                ? parse_confined_policy(source.policy_yaml, "<inline>", config_.policy_dir)
                : load_named_policy_compiled(source.policy.empty() ? "default" : source.policy,
                                    config_.policy_dir);
        Result<std::shared_ptr<Session>> session =
            sys_error(EINVAL, "its policy no longer resolves: " +
                                  (parsed.ok() ? std::string() : parsed.format_errors()));
        if (parsed.ok()) {
            hide_daemon_paths(*parsed.policy);
            session = Session::adopt(session_context(), record, std::move(*parsed.policy),
                                     [this](Session& ended) { on_session_ended(ended.id()); },
                                     adoption_.notes);
        }
        if (!session) {
            adoption_.refused.push_back(sid + ": " + session.error().describe());
            reap_session_leftovers(scope, sid, leftovers_);
            SessionInfo info;
            info.id = sid;
            info.state = SessionState::ended;
            info.end_reason = "daemon-restart";
            info.created_at = record.created_at;
            info.ended_at = std::chrono::system_clock::now();
            remember_tombstone(info, true);
            continue;
        }
        for (const auto& process : (*session)->processes())
            adoption_.running_processes += !process->finished();
        adoption_.adopted.push_back(sid);
        register_session(sid, std::move(*session));
    }
    // The journal starts again as a snapshot of what came back (the old records are history).
    (void)journal_->compact_now();
}

}  // namespace corral
