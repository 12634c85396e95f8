#pragma once
// The sessions' side of the journal (journal.hpp, journal_records.hpp): what sessions tell it as
// their state changes, and compaction when the file grows. One per daemon, owned by the manager;
// sessions reach it through SessionContext. Appends happen before the change they describe is
// visible to any client (the session's id and tokens, a process's id, a new env or port), so a
// client never holds something a restart would not know.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/asio.hpp"
#include "sessions/recovery/journal.hpp"
#include "sessions/recovery/journal_records.hpp"

namespace corral {

/// Appends session changes to the journal and compacts it.
class SessionJournal {
  public:
    /// Builds the snapshot of every live session for a compaction.
    using SnapshotSource = std::function<std::vector<nlohmann::json>()>;
    using Log = std::function<void(const std::string&)>;

    /// `compact_at`: compact once the file is larger than this and twice its last compacted size.
    SessionJournal(boost::asio::io_context& io, Journal journal, SnapshotSource snapshot, Log log,
                   uint64_t compact_at);

    /// The session's whole recoverable state (creation, env, ports).
    Status session_changed(const JournalSession& session);
    /// A process started (after launch: its pid is known; before its id reaches a client).
    Status process_started(const std::string& sid, const JournalProcess& process);
    /// A process's record became final.
    Status process_ended(const std::string& sid, const std::string& proc, const JournalExit& exit);
    /// A session began to end / is gone.
    Status session_ending(const std::string& sid, const std::string& reason);
    Status session_ended(const std::string& sid);
    /// Rewrites the journal now as a snapshot of the live sessions.
    Status compact_now();
    /// Bytes in the journal file now.
    uint64_t size() const { return journal_.size(); }

  private:
    Status append(const nlohmann::json& record);
    boost::asio::io_context& io_;
    Journal journal_;
    SnapshotSource snapshot_;
    Log log_;
    uint64_t compact_at_;
    bool compaction_posted_ = false;
    std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);

  public:
    ~SessionJournal() { *alive_ = false; }
};

}  // namespace corral
