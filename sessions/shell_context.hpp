#pragma once
// Shell contexts (DESIGN.md "Shell contexts"): a persistent shell state inside a session — working
// directory, exported variables, functions and aliases — that carries from one command to the
// next, while every command is still its own process in its own leaf cgroup.
//
// How the state carries over without a long-lived shell: each command runs as `bash -c WRAPPER`
// (shell_context_argv). The wrapper restores the state (functions and aliases by `eval` of the
// text the previous command dumped, the cwd by `cd`; the env is the process environment), runs
// the command with `eval`, and an EXIT trap writes the new state to fd 3, a pipe the daemon reads.
// The daemon never evaluates anything from that dump: it parses it strictly (parse_shell_state:
// NUL-separated fields, names checked, sizes bounded) and only ever hands the text back to the
// next command of the same context, inside the same sandbox. A command that does not exit on its
// own (killed, timed out, setup failure) leaves no dump behind: the context keeps the state it had
// before it.
//
// Commands of one context run one after another in the order they arrived (a queue); the record
// of a queued command exists only once it starts.

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/asio.hpp"
#include "base/error.hpp"
#include "sessions/process.hpp"
#include "sessions/session_types.hpp"

namespace corral {

/// What a context carries from one command to the next.
struct ShellState {
    std::string cwd;                         ///< absolute, as the processes see it
    std::map<std::string, std::string> env;  ///< exported variables
    std::vector<std::string> functions;      ///< names (for the record)
    std::vector<std::string> aliases;        ///< names (for the record)
    std::string definitions;  ///< `declare -f` + `alias -p` text, only ever run in the sandbox
};

/// Bounds of a state a context accepts (the definitions travel in argv: MAX_ARG_STRLEN is 128 KiB).
inline constexpr size_t kShellDumpLimit = 1u << 20;
inline constexpr size_t kShellDefinitionsLimit = 96u << 10;
inline constexpr size_t kShellEnvLimit = 512u << 10;

/// Parses the dump the wrapper's EXIT trap wrote. Refuses anything not exactly of its form:
/// "corral-shell-state-1", then fields `cwd` (absolute), `env` (NAME=VALUE with NAME a shell
/// identifier), `fn`, `alias`, `defs`, each a key and a value terminated by NUL, then `end` and
/// nothing after it. Variables bash sets for itself (SHLVL, PWD, OLDPWD, _) are dropped.
Result<ShellState> parse_shell_state(std::string_view dump);

/// `shell -c WRAPPER corral-shell DEFINITIONS CWD COMMAND`: restores `state`, runs `command`,
/// dumps the new state to fd 3 on exit.
std::vector<std::string> shell_context_argv(const std::string& shell, const ShellState& state,
                                            const std::string& command);

/// `argv` as one shell command line (each word single-quoted).
std::string quote_command(const std::vector<std::string>& argv);

/// One shell context of a session. Event-loop thread only.
class ShellContext : public std::enable_shared_from_this<ShellContext> {
  public:
    /// Starts one command of this context: argv, env ("K=V") and fd 3 are the context's.
    using Launch = std::function<Result<std::shared_ptr<Process>>(
        const ProcessRequest& request, std::vector<std::string> argv, std::vector<std::string> env,
        int state_fd)>;
    /// Called (posted) when a queued command started, or could not.
    using Started = std::function<void(Result<std::shared_ptr<Process>>)>;

    ShellContext(boost::asio::io_context& io, std::string id, std::string shell, ShellState state,
                 Launch launch);
    ~ShellContext();

    const std::string& id() const { return id_; }
    /// Snapshot for the API.
    ShellInfo info() const;
    /// Queues a command (its `shell` names this context); `started` runs when it started. Setting
    /// `*alive` to false drops it from the queue (the client went away).
    void enqueue(ProcessRequest request, std::shared_ptr<bool> alive, Started started);
    /// The context is deleted: queued commands fail, the running one is killed (its whole tree).
    void close();

  private:
    struct Pending {
        std::shared_ptr<bool> alive;
        ProcessRequest request;
        Started started;
    };
    void start_next();
    void fail_queued(const std::string& why);
    void read_state();
    void drain_state();
    void on_finished(const ProcessRequest& request);
    void commit(ShellState next, const ProcessRequest& request);

    boost::asio::io_context& io_;
    std::string id_;
    std::string shell_;
    ShellState state_;
    Launch launch_;
    std::deque<Pending> queue_;
    std::shared_ptr<Process> running_;
    boost::asio::posix::stream_descriptor state_pipe_;
    std::string dump_;
    bool dump_overflow_ = false;
    uint64_t commands_ = 0;
    std::string last_state_error_;
    bool closed_ = false;
};

}  // namespace corral
