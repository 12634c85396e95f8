// A session's shell contexts (shell_context.hpp) and the shell its `command` strings run under.
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>

#include "sessions/session.hpp"
#include "base/openat2.hpp"

namespace corral {
namespace {

bool valid_shell_id(const std::string& id) {
    if (id.empty() || id.size() > 64) return false;
    return std::all_of(id.begin(), id.end(), [](unsigned char c) {
        return std::isalnum(c) || c == '-' || c == '_';
    });
}

}  // namespace

// A session with a mount namespace sees the root its holder pivoted into: /proc/<holder>/root
// is that directory (the walk below it follows the mounts of the holder's namespace). Without
// one, the processes see the host's root.
Result<UniqueFd> Session::open_sandbox_root() const {
    std::string path = "/";
    if (sandbox_.active() && policy_.namespaces.mount)
        path = "/proc/" + std::to_string(sandbox_.holder_pid()) + "/root";
    const int fd = ::open(path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return sys_error("open the session's root `" + path + "`");
    return UniqueFd(fd);
}

bool Session::sandbox_has_executable(const std::string& path) const {
    auto root = open_sandbox_root();
    if (!root) return false;
    struct open_how how {};
    how.flags = O_PATH | O_CLOEXEC;
    how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
    const int fd = openat2_retrying(root->get(), path.c_str(), how);
    if (fd < 0) return false;
    UniqueFd file(fd);
    struct stat st {};
    return ::fstat(file.get(), &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111) != 0;
}

// bash where the sandbox has it: agent SDKs run `/bin/bash -c`, and under dash `[[ ]]` fails
// with 127. A policy `shell` wins (it is the policy's word, checked when a command runs).
void Session::choose_command_shell() {
    context_shell_ = sandbox_has_executable("/bin/bash") ? "/bin/bash" : "";
    if (!policy_.shell.empty()) {
        command_shell_ = policy_.shell;
    } else {
        command_shell_ = context_shell_.empty() ? "/bin/sh" : context_shell_;
    }
}

Status Session::open_path_space(const std::optional<FileOwner>& workspace_owner,
                                const std::optional<FileOwner>& owner) {
    FileServiceOptions workspace_options;
    workspace_options.owner = workspace_owner;
    workspace_options.mount_point = workdir_.inside_path;
    auto workspace_fd = open_workspace();
    if (!workspace_fd) return std::move(workspace_fd.error());
    auto workspace =
        std::optional<FileService>(FileService(std::move(*workspace_fd), workspace_options));
    std::shared_ptr<FileService> sandbox;
    if (sandbox_.active() && policy_.namespaces.mount) {
        auto root = open_sandbox_root();
        if (!root) return std::move(root.error());
        FileServiceOptions sandbox_options;
        // The sandbox's user as the host sees it (a user namespace's range, else the policy's
        // user), else nobody: what an unprivileged process of the session may do.
        sandbox_options.act_as = owner.value_or(FileOwner{65534, 65534});
        sandbox = std::make_shared<FileService>(std::move(*root), sandbox_options);
    }
    paths_ = PathSpace(workdir_.inside_path,
                       std::make_shared<FileService>(std::move(*workspace)), std::move(sandbox));
    return {};
}

Result<FileTarget> Session::file_target(std::string_view path, const std::string& shell) const {
    std::string cwd = cwd_;
    if (!shell.empty()) {
        auto found = shells_.find(shell);
        if (found == shells_.end())
            return sys_error(ENOENT, "session " + id_ + " has no shell context `" + shell + "`");
        cwd = found->second->info().cwd;
    }
    return paths_.resolve(path, cwd);
}

Result<ShellInfo> Session::create_shell(const ShellRequest& request) {
    if (state_ != SessionState::active) {
        return sys_error(ESHUTDOWN, "session " + id_ + " is " + std::string(to_string(state_)));
    }
    if (context_shell_.empty()) {
        return sys_error(ENOTSUP, "shell contexts need bash, and session " + id_ +
                                      " has no /bin/bash in its sandbox");
    }
    std::string id = request.id;
    if (id.empty()) {
        do {
            id = "s" + std::to_string(next_shell_++);
        } while (shells_.count(id));
    } else if (!valid_shell_id(id)) {
        return sys_error(EINVAL, "shell id `" + id + "` must be 1-64 of [A-Za-z0-9_-]");
    } else if (shells_.count(id)) {
        return sys_error(EEXIST, "session " + id_ + " already has shell context `" + id + "`");
    }
    ShellState state;
    state.cwd = resolve_cwd(request.cwd, cwd_);
    for (const std::string& entry : process_env(request.env)) {
        const size_t eq = entry.find('=');
        if (eq != std::string::npos && eq > 0)
            state.env[entry.substr(0, eq)] = entry.substr(eq + 1);
    }
    std::weak_ptr<Session> weak = weak_from_this();
    auto launch = [weak](const ProcessRequest& command, std::vector<std::string> argv,
                         std::vector<std::string> env,
                         int state_fd) -> Result<std::shared_ptr<Process>> {
        auto self = weak.lock();
        if (!self) return sys_error(ESHUTDOWN, "the session is gone");
        if (self->state_ != SessionState::active) {
            return sys_error(ESHUTDOWN, "session " + self->id_ + " is " +
                                            std::string(to_string(self->state_)));
        }
        ProcessRequest at_root = command;
        at_root.cwd.clear();
        ProcessSetup setup = self->base_setup(at_root);
        // The wrapper changes into the context's directory itself, so a directory that is gone
        // is a message on stderr, not a context that can never run again.
        setup.cwd = self->workdir_.inside_path;
        setup.command = command.command.empty() ? quote_command(command.argv) : command.command;
        setup.argv = std::move(argv);
        setup.env = std::move(env);
        setup.extra_fd = state_fd;
        return self->launch(std::move(setup));
    };
    auto context = std::make_shared<ShellContext>(context_.io, id, context_shell_, std::move(state),
                                                  std::move(launch));
    shells_[id] = context;
    return context->info();
}

std::vector<ShellInfo> Session::shells() const {
    std::vector<ShellInfo> list;
    for (const auto& [id, context] : shells_) list.push_back(context->info());
    return list;
}

Result<ShellInfo> Session::shell(const std::string& id) const {
    auto found = shells_.find(id);
    if (found == shells_.end())
        return sys_error(ENOENT, "session " + id_ + " has no shell context `" + id + "`");
    return found->second->info();
}

Status Session::delete_shell(const std::string& id) {
    auto found = shells_.find(id);
    if (found == shells_.end())
        return sys_error(ENOENT, "session " + id_ + " has no shell context `" + id + "`");
    found->second->close();
    shells_.erase(found);
    return {};
}

Status Session::enqueue_shell_command(const ProcessRequest& request, std::shared_ptr<bool> alive,
                                      ShellContext::Started started) {
    if (state_ != SessionState::active) {
        return sys_error(ESHUTDOWN, "session " + id_ + " is " + std::string(to_string(state_)));
    }
    if (request.command.empty() == request.argv.empty()) {
        return sys_error(EINVAL, "give exactly one of `command` and `argv`");
    }
    if (request.stdin_open) {
        return sys_error(EINVAL, "`stdinOpen` cannot be used with `shell`: a context's commands "
                                 "run one after another");
    }
    auto found = shells_.find(request.shell);
    if (found == shells_.end())
        return sys_error(ENOENT,
                         "session " + id_ + " has no shell context `" + request.shell + "`");
    idle_timer_.cancel();
    found->second->enqueue(request, std::move(alive), std::move(started));
    return {};
}

}  // namespace corral
