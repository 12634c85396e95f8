#pragma once
// The data the session manager hands out: requests in, records out. Plain values (snapshots), so
// the HTTP layer can turn them into JSON without holding any reference into the manager.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "isolation/cgroup.hpp"
#include "isolation/exit_reason.hpp"
#include "isolation/seccomp_listener.hpp"
#include "policies/policy.hpp"
#include "sessions/network/egress_gate.hpp"
#include "sessions/terminal_pty.hpp"

namespace corral {

// ExitReason and to_string(ExitReason) come from isolation/exit_reason.hpp (one type for
// `corral run`, the daemon's records and the API).

/// "TERM", "SIGTERM", "term" or "15" -> 15; nullopt for anything else.
std::optional<int> parse_signal(std::string_view text);
/// 15 -> "SIGTERM"; "SIG<n>" for numbers without a name.
std::string signal_name(int signal);

/// stdout or stderr of a process.
enum class OutputStream { out, err };

/// What a token may do. A restricted token may run, spawn, read and write files and use ports,
/// but not end the session, change its env or lease/release ports.
enum class TokenRights { full, restricted };

/// What a valid token grants.
struct TokenGrant {
    std::string session_id;
    TokenRights rights = TokenRights::full;
};

/// POST /v1/sessions.
struct CreateSessionRequest {
    std::string policy;       ///< preset name or name in the policy dir (no paths); "" = "default"
    std::string policy_yaml;  ///< inline YAML; wins over `policy` when non-empty
    std::string id;           ///< requested id ([A-Za-z0-9_-]{1,64}); "" = generated
    std::map<std::string, std::string> env;  ///< session env on top of the policy's
    std::string cwd;  ///< default cwd of commands: relative = inside the session root
    std::optional<Millis> command_timeout;  ///< overrides policy timeouts.command; 0 = none
    /// The policy already resolved from `policy`/`policy_yaml` (corrald parses off its event
    /// loop); when set, the manager uses it instead of parsing again.
    std::optional<Policy> resolved_policy;
    std::optional<unsigned> ports;          ///< ports leased at creation; overrides network.ports
    /// A host directory to work in instead of a scratch workspace (session_workdir.hpp); the
    /// manager resolves it beneath its workdir roots into `bound_workdir`.
    std::string workdir;
    std::shared_ptr<const struct BoundWorkdir> bound_workdir;
};

/// PATCH /v1/sessions/{sid}/env.
struct EnvPatch {
    std::map<std::string, std::string> set;
    std::vector<std::string> unset;
};

/// POST run/exec/processes: one process to start.
struct ProcessRequest {
    std::string command;            ///< run as /bin/sh -c COMMAND (exclusive with argv)
    std::vector<std::string> argv;  ///< run directly
    std::string cwd;                ///< "" = session cwd; relative = against the session cwd
    std::map<std::string, std::string> env;  ///< on top of policy env + session env
    std::optional<Millis> timeout;           ///< nullopt = session default; 0 = none
    std::optional<std::string> stdin_data;   ///< written to stdin, then stdin is closed...
    bool stdin_open = false;                 ///< ...unless this keeps it open for write_stdin
    std::string shell;  ///< a shell context id: run in that context's state, after its queue
    /// POST processes: a background process has only its own timeout, not the session's
    /// command timeout (a dev server must not die at it).
    bool background = false;
    /// The API's: keep the command running when the client of run/exec disconnects.
    bool detach_on_disconnect = false;
    /// Run on a new pty of this size (terminal_pty.hpp): stdin/stdout/stderr are its slave, stdout
    /// records what the terminal shows, write_stdin types into it (issue 14).
    std::optional<TerminalSize> terminal;
};

/// POST /v1/sessions/{sid}/shells: a new shell context.
struct ShellRequest {
    std::string id;   ///< [A-Za-z0-9_-]{1,64}; "" = generated ("s1", "s2", ...)
    std::string cwd;  ///< "" = session cwd; relative = against the session cwd
    std::map<std::string, std::string> env;  ///< on top of policy env + session env
};

/// A shell context record (snapshot): the state its next command starts from.
struct ShellInfo {
    std::string id;
    std::string cwd;                         ///< as the processes see it
    std::map<std::string, std::string> env;  ///< exported variables
    std::vector<std::string> functions;      ///< names of the shell functions it holds
    std::vector<std::string> aliases;        ///< names of the aliases it holds
    std::string running;                     ///< id of the command running now, "" when idle
    size_t queued = 0;                       ///< commands waiting for their turn
    uint64_t commands = 0;                   ///< commands that ran in it
    std::string last_state_error;  ///< why the last command's state was not taken ("" = it was)
};

/// Accounting of one output stream. Offsets count every byte the process wrote.
struct StreamStats {
    uint64_t total_bytes = 0;    ///< bytes the process wrote
    uint64_t dropped_bytes = 0;  ///< bytes not kept because of the output cap
    bool truncated = false;      ///< dropped_bytes > 0
    bool eof = false;            ///< the pipe is closed: no more output will come
};

/// A process record (snapshot).
struct ProcessInfo {
    std::string id;  ///< "p1", "p2", ... (also its leaf cgroup's name)
    pid_t pid = -1;  ///< host pid (-1 after setup failure)
    std::vector<std::string> argv;
    std::string command;               ///< the shell command, when started with one
    std::string cwd;                   ///< as the process sees it
    bool terminal = false;             ///< runs on a pty (POST /terminals)
    bool running = true;               ///< false once the record is final
    std::optional<ExitReason> reason;  ///< set when !running
    std::optional<int> exit_code;      ///< with reason exited (or pids-limit)
    std::optional<int> signal;         ///< the terminating signal, when killed by one
    std::string error;                 ///< setup failure message ("chdir `/x`: ENOENT ...")
    /// Why the record is less than whole: a process a previous run of the daemon started
    /// (exit status unknown, output written while the daemon was down not kept).
    std::string note;
    bool output_lost = false;  ///< its output pipes did not survive a daemon restart
    /// Adopted after a daemon restart with the output pipes the session's holder kept: reading
    /// went on from them (offsets start at 0 again; what the old daemon had read is gone).
    bool output_resumed = false;
    std::chrono::system_clock::time_point started_at;
    uint64_t duration_ms = 0;       ///< until exit (or until now while running)
    std::optional<Millis> timeout;  ///< the effective command timeout
    ResourceUsage usage;            ///< from its leaf cgroup (final after exit)
    StreamStats stdout_stats;
    StreamStats stderr_stats;
    bool stdin_open = false;
    /// What its seccomp filter refused, counted while the daemon ran (issue 17.6); nullopt when
    /// it has no filter or was started by a previous run of the daemon.
    std::optional<RefusalCounts> seccomp;
    /// "running" or to_string(*reason): the API's `status` field.
    std::string status() const;
};

/// A slice of a process's output.
struct OutputChunk {
    uint64_t offset = 0;  ///< stream offset of data[0] (> requested when bytes were dropped)
    std::string data;
    uint64_t next_offset = 0;  ///< offset + data.size(): where the next read continues
    uint64_t skipped = 0;      ///< bytes between the requested offset and `offset` (dropped)
    bool eof = false;          ///< true when next_offset is the end and the stream is closed
};

/// A slice of a process's output left where the process keeps it (SessionManager::view_output):
/// the bytes are valid only until the event loop runs on (the next read of the pipe may write
/// over them), so they are used, or copied, at once.
struct OutputView {
    uint64_t offset = 0;        ///< as OutputChunk
    uint64_t next_offset = 0;   ///< offset + size()
    uint64_t skipped = 0;       ///< as OutputChunk
    bool eof = false;           ///< as OutputChunk
    std::string_view parts[2];  ///< the bytes, in order (two where they wrap around the ring)
    size_t size() const { return parts[0].size() + parts[1].size(); }
};

/// One leased port.
struct PortLeaseInfo {
    uint16_t port = 0;
    std::string url;  ///< http://127.0.0.1:PORT
};

/// Lifecycle of a session. `starting`: its namespace holder has not reported its setup yet
/// (SessionManager::async_create_session); such a session is not in the registry, takes no work
/// and its id is reserved.
enum class SessionState { starting, active, ending, ended };
/// "starting", "active", "ending", "ended".
std::string_view to_string(SessionState state);

/// A session record (snapshot).
struct SessionInfo {
    std::string id;
    std::string policy_name;
    SessionState state = SessionState::active;
    std::string end_reason;  ///< "api", "timeout", "idle", "shutdown", "" while active
    std::chrono::system_clock::time_point created_at;
    std::optional<std::chrono::system_clock::time_point> ended_at;
    std::string root;                        ///< host path of the session's working directory
    std::string workdir;                     ///< where its processes see it
    /// A bound host workdir that could not be idmapped to its owner: why, and what that means
    /// for writes (empty when it was, or when there is no such workdir).
    std::string workdir_warning;
    std::string cwd;                         ///< default cwd of commands (as processes see it)
    std::map<std::string, std::string> env;  ///< session env (creation + PATCH), not policy env
    std::optional<Millis> command_timeout;   ///< effective default
    std::vector<std::string> namespaces;     ///< "pid", "mount", "net", ... the holder owns
    std::vector<PortLeaseInfo> ports;
    std::vector<ProcessInfo> processes;
    ResourceUsage usage;          ///< whole session subtree (final once ended)
    size_t processes_killed = 0;  ///< set when ended
    /// Limits the policy asked for that this host does not enforce (best-effort), with reasons.
    std::vector<std::string> not_enforced;
    std::optional<EgressInfo> egress;  ///< isolated network only
};

/// A new session with its two tokens (returned only once, at creation).
struct CreatedSession {
    SessionInfo info;
    std::string full_token;
    std::string restricted_token;
};

/// What end_session did.
struct EndSessionReport {
    std::string id;
    bool already_ended = false;   ///< ending an ended (or ending) session is not an error
    size_t processes_killed = 0;  ///< processes still alive when the session ended
    std::vector<std::string> killed_process_ids;  ///< API processes that were running
    std::string end_reason;
    uint64_t duration_ms = 0;  ///< how long ending took
};

}  // namespace corral
