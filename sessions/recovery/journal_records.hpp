#pragma once
// What the journal says about sessions and processes, and replaying it into the state a restart
// re-adopts. Records (field "t"):
//   session  the whole recoverable state of one session (written at creation and again when its
//            env or ports change; the last one wins)
//   process  one started process (pid and its start time, so a recycled pid is never taken)
//   exit     a process's final record
//   ending   the session began to end (its reason)
//   end      the session is gone
// Nothing in a record names a path: cgroups, directories and leaves are derived from the ids,
// which are checked ([A-Za-z0-9_-], p<N>), so a forged record cannot point the daemon outside
// its own instance.

#include <nlohmann/json.hpp>

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "policies/policy.hpp"

namespace corral {

/// A finished process as the journal keeps it.
struct JournalExit {
    std::string status;  ///< the API's status ("exited", "killed", ..., "unknown")
    std::optional<int> exit_code;
    std::optional<int> signal;
    uint64_t duration_ms = 0;
    std::string error;
    std::string note;
};

/// One process of a session.
struct JournalProcess {
    std::string id;  ///< p<N>
    pid_t pid = -1;
    uint64_t start_ticks = 0;  ///< /proc/<pid>/stat starttime: with pid, names one process
    std::vector<std::string> argv;
    std::string command;
    std::string cwd;
    bool terminal = false;
    std::chrono::system_clock::time_point started_at;
    std::optional<int64_t> timeout_ms;
    int64_t grace_ms = 5000;
    uint64_t output_cap = 16u << 20;
    /// The first slot of the session's holder that keeps its output descriptors (stdout, stderr;
    /// a terminal's pty master): isolation/descriptor_store.hpp. nullopt: not held.
    std::optional<int> held_slot;
    std::optional<JournalExit> exit;
};

/// One session.
struct JournalSession {
    std::string id;
    std::string policy;       ///< the name it was created with ("" when inline)
    std::string policy_yaml;  ///< the inline policy it was created with
    std::chrono::system_clock::time_point created_at;
    std::map<std::string, std::string> env;
    std::string cwd;
    std::optional<int64_t> command_timeout_ms;
    std::vector<uint16_t> ports;
    std::string full_token;
    std::string restricted_token;
    pid_t holder_pid = -1;  ///< -1: no namespaces
    uint64_t holder_start_ticks = 0;
    /// The holder is a keeper (no namespaces; it keeps output descriptors only): it alone does
    /// not make the session worth re-adopting.
    bool keeper = false;
    std::optional<std::pair<uid_t, gid_t>> identity;  ///< host ids of a user namespace's user
    unsigned next_process = 1;
    /// The egress rules in force (the policy's, or what PATCH .../network set): a restart must
    /// not fall back to the policy's rules after a client narrowed (or widened) them.
    std::optional<EgressSpec> egress;
    /// The egress proxy's port inside the namespace (its processes hold it in HTTP_PROXY); 0: none.
    uint16_t proxy_port = 0;
    std::string workdir;  ///< a host directory the session works in (request `workdir`), or ""
    std::optional<std::string> ending;  ///< the reason, once it began to end
    std::vector<JournalProcess> processes;  ///< in start order
};

/// Whether `id` may name a session ([A-Za-z0-9_-]{1,64}).
bool valid_journal_session_id(const std::string& id);
/// Whether `id` may name a process (p1, p2, ...).
bool valid_journal_process_id(const std::string& id);

/// The records of one session's state (its session record and one process/exit record each),
/// for a compaction snapshot.
std::vector<nlohmann::json> journal_snapshot(const JournalSession& session);
nlohmann::json session_record(const JournalSession& session);
nlohmann::json process_record(const std::string& sid, const JournalProcess& process);
nlohmann::json exit_record(const std::string& sid, const std::string& proc,
                           const JournalExit& exit);
nlohmann::json ending_record(const std::string& sid, const std::string& reason);
nlohmann::json end_record(const std::string& sid);

/// Replays records into the sessions that had not ended; a record that does not parse or does
/// not fit (bad ids, a process of an unknown session) is skipped with a note naming why.
std::map<std::string, JournalSession> replay_journal(const std::vector<nlohmann::json>& records,
                                                     std::vector<std::string>& notes);

}  // namespace corral
