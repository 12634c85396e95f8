#include "sessions/shell_context.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>

#include "base/pipe.hpp"

namespace corral {
namespace {

constexpr std::string_view kMagic = "corral-shell-state-1";

// The wrapper every command of a context runs as ($1 definitions, $2 cwd, $3 the command).
// - fd 3 (the daemon's state pipe) moves to a free high fd, so a command that uses fd 3 itself
//   cannot clobber it and children do not find it where they might write by accident.
// - definitions are evaluated before the command and with expand_aliases on, so aliases work in
//   this non-interactive shell as in a terminal.
// - the EXIT trap runs however the shell exits on its own (end of the command, `exit N`, `set -e`
//   failure) and keeps the command's status; it writes NUL-separated fields (no value of a shell
//   variable can hold a NUL, so the framing cannot be forged by a value).
constexpr std::string_view kWrapper = R"CORRAL(exec {__corral_fd}>&3 3>&-
__corral_defs=$1 __corral_cwd=$2 __corral_cmd=$3
set --
shopt -s expand_aliases
eval "$__corral_defs"
cd -- "$__corral_cwd" 2>/dev/null || printf 'corral: the shell context directory %s is gone; running in %s\n' "$__corral_cwd" "$PWD" >&2
unset __corral_defs __corral_cwd
trap '__corral_status=$?
set +eu
IFS=$'"'"' \t\n'"'"'
{ printf "%s\0" corral-shell-state-1 cwd "$PWD"
for __corral_n in $(compgen -e); do printf "env\0%s=%s\0" "$__corral_n" "${!__corral_n}"; done
for __corral_n in $(compgen -A function); do printf "fn\0%s\0" "$__corral_n"; done
for __corral_n in $(compgen -a); do printf "alias\0%s\0" "$__corral_n"; done
printf "defs\0%s\n%s\0end\0" "$(declare -f)" "$(alias -p)"
} >&$__corral_fd 2>/dev/null
exit $__corral_status' EXIT
eval "$__corral_cmd"
)CORRAL";

bool is_identifier(std::string_view name) {
    if (name.empty() || name.size() > 255) return false;
    auto alpha = [](char c) {
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
    };
    if (!alpha(name.front())) return false;
    return std::all_of(name.begin(), name.end(),
                       [&](char c) { return alpha(c) || (c >= '0' && c <= '9'); });
}

/// Alias names may hold more than identifiers (`ll`, `g.`, `..`), but never quotes, `=`, `/`,
/// blanks or shell metacharacters.
bool is_alias_name(std::string_view name) {
    if (name.empty() || name.size() > 255) return false;
    return std::all_of(name.begin(), name.end(), [](char c) {
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
               c == '_' || c == '-' || c == '.' || c == ':' || c == '+' || c == '@' || c == '%';
    });
}

/// Variables bash maintains itself: carrying them over would be wrong (SHLVL would grow by one
/// per command; PWD is the cwd field).
bool bash_own_variable(std::string_view name) {
    return name == "SHLVL" || name == "PWD" || name == "OLDPWD" || name == "_";
}

Error bad_dump(const std::string& what) {
    return Error{EINVAL, "shell state dump refused: " + what};
}

}  // namespace

Result<ShellState> parse_shell_state(std::string_view dump) {
    if (dump.size() > kShellDumpLimit) return bad_dump("larger than 1 MiB");
    std::vector<std::string_view> fields;
    size_t pos = 0;
    while (pos < dump.size()) {
        const size_t nul = dump.find('\0', pos);
        if (nul == std::string_view::npos) return bad_dump("a field is not NUL-terminated");
        fields.push_back(dump.substr(pos, nul - pos));
        pos = nul + 1;
    }
    if (fields.empty() || fields.front() != kMagic)
        return bad_dump("it does not start with the marker");
    ShellState state;
    bool have_cwd = false, have_defs = false, ended = false;
    size_t env_bytes = 0;
    for (size_t i = 1; i < fields.size(); ++i) {
        const std::string_view key = fields[i];
        if (ended) return bad_dump("data after `end`");
        if (key == "end") {
            ended = true;
            continue;
        }
        if (i + 1 >= fields.size())
            return bad_dump("field `" + std::string(key.substr(0, 32)) + "` has no value");
        const std::string_view value = fields[++i];
        if (key == "cwd") {
            if (have_cwd) return bad_dump("two `cwd` fields");
            if (value.empty() || value.front() != '/' || value.size() > 4096)
                return bad_dump("cwd is not an absolute path");
            state.cwd = value;
            have_cwd = true;
        } else if (key == "env") {
            const size_t eq = value.find('=');
            if (eq == std::string_view::npos) return bad_dump("an env entry has no `=`");
            const std::string_view name = value.substr(0, eq);
            // Only shell identifiers: this refuses BASH_FUNC_x%% imports (Shellshock,
            // CVE-2014-6271, rode on function definitions in variables).
            if (!is_identifier(name)) return bad_dump("env name is not a shell identifier");
            env_bytes += value.size() + 1;
            if (env_bytes > kShellEnvLimit) return bad_dump("env larger than 512 KiB");
            if (state.env.size() >= 4096) return bad_dump("more than 4096 variables");
            if (!bash_own_variable(name)) state.env[std::string(name)] = value.substr(eq + 1);
        } else if (key == "fn") {
            if (!is_identifier(value) && !is_alias_name(value))
                return bad_dump("a function name holds characters names cannot have");
            if (state.functions.size() >= 4096) return bad_dump("more than 4096 functions");
            state.functions.emplace_back(value);
        } else if (key == "alias") {
            if (!is_alias_name(value))
                return bad_dump("an alias name holds characters names cannot have");
            if (state.aliases.size() >= 4096) return bad_dump("more than 4096 aliases");
            state.aliases.emplace_back(value);
        } else if (key == "defs") {
            if (have_defs) return bad_dump("two `defs` fields");
            if (value.size() > kShellDefinitionsLimit)
                return bad_dump("functions and aliases larger than 96 KiB");
            state.definitions = value;
            have_defs = true;
        } else {
            return bad_dump("unknown field `" + std::string(key.substr(0, 32)) + "`");
        }
    }
    if (!ended) return bad_dump("it was cut short (no `end`)");
    if (!have_cwd || !have_defs) return bad_dump("`cwd` or `defs` is missing");
    return state;
}

std::vector<std::string> shell_context_argv(const std::string& shell, const ShellState& state,
                                            const std::string& command) {
    return {shell, "-c", std::string(kWrapper), "corral-shell", state.definitions, state.cwd,
            command};
}

std::string quote_command(const std::vector<std::string>& argv) {
    std::string out;
    for (const auto& word : argv) {
        if (!out.empty()) out += ' ';
        out += '\'';
        for (char c : word) {
            if (c == '\'') {
                out += "'\\''";
            } else {
                out += c;
            }
        }
        out += '\'';
    }
    return out;
}

ShellContext::ShellContext(boost::asio::io_context& io, std::string id, std::string shell,
                           ShellState state, Launch launch)
    : io_(io),
      id_(std::move(id)),
      shell_(std::move(shell)),
      state_(std::move(state)),
      launch_(std::move(launch)),
      state_pipe_(io) {}

ShellContext::~ShellContext() {
    fail_queued("its session is gone");
    boost::system::error_code ignored;
    state_pipe_.close(ignored);
}

ShellInfo ShellContext::info() const {
    ShellInfo info;
    info.id = id_;
    info.cwd = state_.cwd;
    info.env = state_.env;
    info.functions = state_.functions;
    info.aliases = state_.aliases;
    info.running = running_ ? running_->id() : "";
    info.queued = static_cast<size_t>(
        std::count_if(queue_.begin(), queue_.end(), [](const Pending& p) { return *p.alive; }));
    info.commands = commands_;
    info.last_state_error = last_state_error_;
    return info;
}

void ShellContext::enqueue(ProcessRequest request, std::shared_ptr<bool> alive, Started started) {
    queue_.push_back(Pending{alive, std::move(request), std::move(started)});
    if (!running_) {
        // Posted, so the caller's handler never runs inline from this call.
        boost::asio::post(io_, [weak = weak_from_this()] {
            if (auto self = weak.lock(); self && !self->running_) self->start_next();
        });
    }
}

void ShellContext::close() {
    closed_ = true;
    fail_queued("it was deleted");
    if (running_) (void)running_->kill();
}

void ShellContext::fail_queued(const std::string& why) {
    auto queued = std::move(queue_);
    queue_.clear();
    for (auto& pending : queued) {
        if (!*pending.alive) continue;
        std::string message = "shell context `" + id_ + "`: " + why;
        boost::asio::post(io_, [pending = std::move(pending), message = std::move(message)] {
            if (*pending.alive) pending.started(Error{ESHUTDOWN, message});
        });
    }
}

void ShellContext::start_next() {
    while (!running_ && !queue_.empty()) {
        Pending next = std::move(queue_.front());
        queue_.pop_front();
        if (!*next.alive || closed_) continue;
        auto pipe = make_pipe();
        if (!pipe) {
            next.started(std::move(pipe.error().context("shell context state pipe")));
            continue;
        }
        ProcessRequest& request = next.request;
        std::string command =
            request.command.empty() ? quote_command(request.argv) : request.command;
        ShellState launch_state = state_;
        if (!request.cwd.empty()) {
            launch_state.cwd =
                request.cwd.front() == '/' ? request.cwd : state_.cwd + "/" + request.cwd;
        }
        std::map<std::string, std::string> env = state_.env;
        for (const auto& [key, value] : request.env) env[key] = value;
        std::vector<std::string> env_list;
        for (const auto& [key, value] : env) env_list.push_back(key + "=" + value);
        auto process = launch_(request, shell_context_argv(shell_, launch_state, command),
                               std::move(env_list), pipe->write_end.get());
        pipe->write_end.reset();  // only the command holds the write end now
        if (!process) {
            next.started(std::move(process.error()));
            continue;
        }
        ++commands_;
        running_ = *process;
        dump_.clear();
        dump_overflow_ = false;
        last_state_error_.clear();
        boost::system::error_code ignored;
        state_pipe_.close(ignored);
        const int flags = ::fcntl(pipe->read_end.get(), F_GETFL);
        ::fcntl(pipe->read_end.get(), F_SETFL, flags | O_NONBLOCK);
        state_pipe_.assign(pipe->read_end.release());
        read_state();
        std::weak_ptr<ShellContext> weak = weak_from_this();
        (void)running_->wait_exit(std::nullopt, [weak, request = next.request](bool) {
            if (auto self = weak.lock()) self->on_finished(request);
        });
        next.started(*process);
    }
}

// Read while the command runs: a dump larger than the pipe would otherwise block the shell's
// EXIT trap forever. Beyond the limit the bytes are read and dropped, and the dump refused.
void ShellContext::read_state() {
    drain_state();
    if (!state_pipe_.is_open()) return;
    state_pipe_.async_wait(boost::asio::posix::descriptor_base::wait_read,
                           [weak = weak_from_this()](const boost::system::error_code& error) {
                               if (error) return;
                               if (auto self = weak.lock()) self->read_state();
                           });
}

void ShellContext::drain_state() {
    std::array<char, 16384> buffer;
    while (state_pipe_.is_open()) {
        const ssize_t n = ::read(state_pipe_.native_handle(), buffer.data(), buffer.size());
        if (n > 0) {
            if (dump_.size() + static_cast<size_t>(n) > kShellDumpLimit) {
                dump_overflow_ = true;
            } else {
                dump_.append(buffer.data(), static_cast<size_t>(n));
            }
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) return;
        boost::system::error_code ignored;
        state_pipe_.close(ignored);  // EOF: every writer is gone
        return;
    }
}

void ShellContext::on_finished(const ProcessRequest& request) {
    if (!running_) return;
    // The record is final, so the shell has exited: whatever its trap wrote is in the pipe.
    drain_state();
    boost::system::error_code ignored;
    state_pipe_.close(ignored);
    const ProcessInfo info = running_->info();
    running_.reset();
    if (info.reason != ExitReason::exited) {
        last_state_error_ = "command " + info.id + " did not exit on its own (" + info.status() +
                            "); the context keeps its state from before it";
    } else if (dump_overflow_) {
        last_state_error_ = "the state dump of " + info.id + " was larger than 1 MiB";
    } else if (dump_.empty()) {
        last_state_error_ = "command " + info.id +
                            " left no state (it replaced the shell with exec, or reset the EXIT "
                            "trap); the context keeps its state from before it";
    } else if (auto next = parse_shell_state(dump_); !next) {
        last_state_error_ = "command " + info.id + ": " + next.error().message;
    } else {
        commit(std::move(*next), request);
    }
    dump_.clear();
    start_next();
}

// Per-command cwd and env are for that command only: they do not stick to the context.
void ShellContext::commit(ShellState next, const ProcessRequest& request) {
    if (!request.cwd.empty()) next.cwd = state_.cwd;
    for (const auto& [key, value] : request.env) {
        auto found = next.env.find(key);
        if (found == next.env.end() || found->second != value) continue;  // the command changed it
        auto before = state_.env.find(key);
        if (before == state_.env.end()) {
            next.env.erase(found);
        } else {
            found->second = before->second;
        }
    }
    state_ = std::move(next);
}

}  // namespace corral
