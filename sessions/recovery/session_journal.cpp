// Appending session changes and compacting the journal.
#include "sessions/recovery/session_journal.hpp"

namespace corral {

SessionJournal::SessionJournal(boost::asio::io_context& io, Journal journal,
                               SnapshotSource snapshot, Log log, uint64_t compact_at)
    : io_(io),
      journal_(std::move(journal)),
      snapshot_(std::move(snapshot)),
      log_(std::move(log)),
      compact_at_(compact_at) {}

// Compaction is posted, not done in the middle of the change being recorded: the snapshot must
// be taken when the live state includes that change (a process is recorded before it is listed).
Status SessionJournal::append(const nlohmann::json& record) {
    Status appended = journal_.append(record);
    if (!appended) {
        if (log_) log_("journal: " + appended.error().describe());
        return appended;
    }
    if (!compaction_posted_ && journal_.size() > compact_at_ &&
        journal_.size() > 2 * journal_.compacted_size()) {
        compaction_posted_ = true;
        boost::asio::post(io_, [this, alive = alive_] {
            if (!*alive) return;
            compaction_posted_ = false;
            (void)compact_now();
        });
    }
    return {};
}

Status SessionJournal::compact_now() {
    Status compacted = journal_.compact(snapshot_ ? snapshot_() : std::vector<nlohmann::json>{});
    if (!compacted && log_) log_("journal: " + compacted.error().describe());
    return compacted;
}

Status SessionJournal::session_changed(const JournalSession& session) {
    return append(session_record(session));
}

Status SessionJournal::process_started(const std::string& sid, const JournalProcess& process) {
    return append(process_record(sid, process));
}

Status SessionJournal::process_ended(const std::string& sid, const std::string& proc,
                                     const JournalExit& exit) {
    return append(exit_record(sid, proc, exit));
}

Status SessionJournal::session_ending(const std::string& sid, const std::string& reason) {
    return append(ending_record(sid, reason));
}

Status SessionJournal::session_ended(const std::string& sid) {
    return append(end_record(sid));
}

}  // namespace corral
