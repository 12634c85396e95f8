// Taking over a session a previous run of the daemon left running (DESIGN.md "Surviving the
// daemon"), and what the journal records of a session. Everything is found from the session's id
// beneath this instance's own cgroup and state dir — never from a path in the journal — and
// every process is verified before it is taken (open_verified_process: alive, same start time, in
// the right cgroup), so a journal cannot make the daemon adopt or kill what is not its own.
#include <sys/stat.h>

#include <algorithm>
#include <set>

#include "base/directory_listing.hpp"
#include "sessions/child_reaper.hpp"
#include "sessions/network/session_network.hpp"
#include "sessions/session.hpp"
#include "sessions/recovery/session_journal.hpp"

namespace corral {
namespace {

// Bound for killing a leaf no record owns (a task stuck in the kernel is reported, not waited).
constexpr std::chrono::seconds kKillBound{10};

std::optional<Millis> millis(const std::optional<int64_t>& ms) {
    if (!ms) return std::nullopt;
    return Millis(*ms);
}

}  // namespace

void Session::set_policy_source(std::string name, std::string yaml) {
    policy_name_ = std::move(name);
    policy_yaml_ = std::move(yaml);
}

JournalSession Session::journal_state() const {
    JournalSession state;
    state.id = id_;
    state.policy = policy_name_;
    state.policy_yaml = policy_yaml_;
    state.created_at = created_at_;
    state.env = env_;
    state.cwd = cwd_;
    if (command_timeout_) state.command_timeout_ms = command_timeout_->count();
    state.ports = leased_;
    state.full_token = full_token_;
    state.restricted_token = restricted_token_;
    if (sandbox_.active()) {
        state.holder_pid = sandbox_.holder_pid();
        state.holder_start_ticks = holder_start_ticks_;
        state.keeper = sandbox_.namespace_flags() == 0;
    }
    if (auto identity = sandbox_.host_identity())
        state.identity = std::pair<uid_t, gid_t>{identity->uid, identity->gid};
    state.next_process = next_process_;
    if (works_in_host_dir_) state.workdir = workdir_.host_path;
    if (network_) {
        state.egress = network_->egress_info().policy;
        state.proxy_port = network_->proxy_port();
    }
    if (state_ == SessionState::ending) state.ending = end_reason_;
    for (const auto& process : processes()) {
        const ProcessInfo info = process->info();
        JournalProcess record;
        record.id = info.id;
        record.pid = info.pid;
        record.start_ticks = process->setup().start_ticks;
        record.argv = info.argv;
        record.command = info.command;
        record.cwd = info.cwd;
        record.terminal = info.terminal;
        record.started_at = info.started_at;
        if (info.timeout) record.timeout_ms = info.timeout->count();
        record.grace_ms = process->setup().grace.count();
        record.output_cap = process->setup().output_cap;
        record.held_slot = process->setup().held_slot;
        if (!info.running) {
            record.exit = JournalExit{info.status(), info.exit_code, info.signal,
                                      info.duration_ms, info.error, info.note};
        }
        state.processes.push_back(std::move(record));
    }
    return state;
}

Status Session::journal_session() const {
    if (!context_.journal) return {};
    return context_.journal->session_changed(journal_state());
}

void Session::journal_process_started(const Process& process) const {
    if (!context_.journal) return;
    const ProcessInfo info = process.info(/*read_usage=*/false);  // the record has no usage
    JournalProcess record;
    record.id = info.id;
    record.pid = info.pid;
    record.start_ticks = process.setup().start_ticks;
    record.argv = info.argv;
    record.command = info.command;
    record.cwd = info.cwd;
    record.terminal = info.terminal;
    record.started_at = info.started_at;
    if (info.timeout) record.timeout_ms = info.timeout->count();
    record.grace_ms = process.setup().grace.count();
    record.output_cap = process.setup().output_cap;
    record.held_slot = process.setup().held_slot;
    (void)context_.journal->process_started(id_, record);
}

void Session::journal_process_ended(const Process& process) const {
    if (!context_.journal) return;
    const ProcessInfo info = process.info();
    (void)context_.journal->process_ended(
        id_, info.id,
        JournalExit{info.status(), info.exit_code, info.signal, info.duration_ms, info.error,
                    info.note});
}

Result<std::shared_ptr<Session>> Session::adopt(SessionContext context,
                                                const JournalSession& record, Policy policy,
                                                EndedCallback on_ended,
                                                std::vector<std::string>& notes) {
    std::shared_ptr<Session> session(
        new Session(context, record.id, std::move(policy), std::move(on_ended)));
    session->set_policy_source(record.policy, record.policy_yaml);
    session->created_at_ = record.created_at;
    session->journalled_ = true;  // its end is recorded, whether it is taken or not
    // On failure ~Session ends what was taken (kill, remove), as a failed create does.
    CORRAL_TRY(session->rebuild(record, notes), "adopt session " + record.id);
    session->arm_session_timer();  // what is left of timeouts.session, from its creation
    session->arm_idle_timer();
    return session;
}

Status Session::rebuild(const JournalSession& record, std::vector<std::string>& notes) {
    // Its directory was bound from a descriptor that died with the old daemon; re-resolving the
    // path again could follow a link swapped in meanwhile. Not taken back (yet): it is reaped.
    if (!record.workdir.empty())
        return sys_error(ENOTSUP, "it works in the host directory `" + record.workdir +
                                      "`, which a restart does not take back yet");
    auto confinement = compile_confinement(policy_, policy_.namespaces.mount);
    if (!confinement) return std::move(confinement.error().context("policy"));
    confinement_ = std::move(*confinement);
    auto directory = SessionDirectory::adopt(context_.sessions_dir, id_, context_.remover);
    if (!directory) return std::move(directory.error());
    directory_ = std::move(*directory);
    workdir_.host_path = directory_.root();
    workdir_.inside_path = policy_.namespaces.mount ? policy_.workdir.mount : directory_.root();
    workdir_.idmap_to_owner = false;

    auto cgroup = Cgroup::adopt(context_.sessions_cgroup.path() + "/" + id_);
    if (!cgroup) return std::move(cgroup.error().context("session cgroup"));
    cgroup_ = std::move(*cgroup);
    auto limits = context_.limits.apply(cgroup_, context_.instance_name + "-" + id_,
                                        policy_.limits, policy_.enforcement, true);
    if (!limits) return std::move(limits.error().context("limits"));
    limits_ = std::move(*limits);
    if (Sandbox::needed(policy_)) {
        auto holder = Cgroup::adopt(cgroup_.path() + "/holder");
        if (!holder) return std::move(holder.error().context("holder cgroup"));
        holder_cgroup_ = std::move(*holder);
        std::optional<HostIdentity> identity;
        if (record.identity)
            identity = HostIdentity{record.identity->first, record.identity->second};
        auto sandbox = Sandbox::adopt(record.holder_pid, record.holder_start_ticks, policy_,
                                      holder_cgroup_, identity, &notes);
        if (!sandbox) return std::move(sandbox.error());
        sandbox_ = std::move(*sandbox);
        holder_start_ticks_ = record.holder_start_ticks;
    } else if (record.holder_pid > 0) {
        adopt_keeper(record, notes);
    }
    CORRAL_TRY(root_landlock_in_sandbox(), "policy");
    // The proxy comes back where the session's processes were told it is, and what the previous
    // run programmed into the namespace is replaced.
    NetworkLeftovers leftovers;
    leftovers.proxy_port = record.proxy_port;
    leftovers.egress = record.egress ? record.egress : policy_.network.egress;
    CORRAL_TRY(start_network(&leftovers), "network");
    // The rules a client set with PATCH .../network, not the policy file's.
    if (network_ && record.egress) CORRAL_TRY(network_->set_egress(*record.egress), "egress");
    watch_oom_group();

    std::optional<FileOwner> owner;
    if (auto identity = sandbox_.host_identity()) {
        owner = FileOwner{identity->uid, identity->gid};
    } else if (!policy_.user.inherit) {
        owner = FileOwner{policy_.user.uid, policy_.user.gid};
    }
    choose_command_shell();
    auto files = FileService::open(directory_.root(), FileServiceOptions{owner, false});
    if (!files) return std::move(files.error().context("file service"));
    files_ = std::make_shared<FileService>(std::move(*files));
    CORRAL_TRY(open_path_space(owner, owner), "file service");  // no bound workdir here

    // The same ports come back (clients hold their URLs); forwarders are made anew.
    for (uint16_t port : record.ports) {
        if (Status claimed = context_.ports.claim(port, id_); !claimed) {
            notes.push_back("session " + id_ + ": port " + std::to_string(port) +
                            " not taken back: " + claimed.error().describe());
            continue;
        }
        leased_.push_back(port);
        if (Status forwarded = forward_port(port); !forwarded)
            notes.push_back("session " + id_ + ": port " + std::to_string(port) +
                            " is leased but not forwarded: " + forwarded.error().describe());
    }
    set_env(record.env);
    cwd_ = record.cwd.empty() ? workdir_.inside_path : record.cwd;
    command_timeout_ = millis(record.command_timeout_ms);
    full_token_ = record.full_token;
    restricted_token_ = record.restricted_token;
    // Ids go on after the last one given out (the session record is not rewritten per process).
    next_process_ = std::max(record.next_process, 1u);
    for (const auto& process : record.processes)
        next_process_ = std::max(next_process_,
                                 static_cast<unsigned>(std::stoul(process.id.substr(1))) + 1);
    adopt_processes(record, notes);
    reap_unowned_leaves(notes);
    // Records that had finished before the restart, oldest started first, for the output budget
    // (those that ended while corrald was down were added as they were found ended).
    for (const auto& id : process_order_) {
        auto found = processes_.find(id);
        if (found == processes_.end() || !found->second->finished() ||
            std::find(finish_order_.begin(), finish_order_.end(), id) != finish_order_.end())
            continue;
        finish_order_.push_back(id);
        finished_output_ += found->second->output_memory();
    }
    prune_finished_processes();  // the journal may hold more finished records than the cap
    return {};
}

// A session without namespaces may have a keeper (it holds output descriptors only): unlike a
// namespace holder, the session's processes do not need it, so a keeper that is gone (or not
// the one journalled) costs their output, not the session.
void Session::adopt_keeper(const JournalSession& record, std::vector<std::string>& notes) {
    auto holder = Cgroup::adopt(cgroup_.path() + "/holder");
    if (!holder) {
        notes.push_back("session " + id_ + ": no keeper: " + holder.error().describe());
        return;
    }
    holder_cgroup_ = std::move(*holder);
    auto keeper = Sandbox::adopt(record.holder_pid, record.holder_start_ticks, policy_,
                                 holder_cgroup_, std::nullopt, &notes);
    if (!keeper) {
        notes.push_back("session " + id_ + ": keeper not taken: " + keeper.error().describe());
        return;
    }
    sandbox_ = std::move(*keeper);
    holder_start_ticks_ = record.holder_start_ticks;
}

// A process whose leaf still holds processes is taken over (running); one whose leaf is empty or
// gone ended while the daemon was down; one the journal saw end is restored as it ended.
void Session::adopt_processes(const JournalSession& record, std::vector<std::string>& notes) {
    for (const auto& journalled : record.processes) {
        ProcessSetup setup;
        setup.id = journalled.id;
        setup.argv = journalled.argv;
        setup.command = journalled.command;
        setup.cwd = journalled.cwd;
        setup.timeout = millis(journalled.timeout_ms);
        setup.grace = Millis(journalled.grace_ms);
        setup.output_cap = static_cast<size_t>(std::min<uint64_t>(
            journalled.output_cap, static_cast<uint64_t>(policy_.limits.output)));
        setup.start_ticks = journalled.start_ticks;
        wire_setup(setup);
        std::shared_ptr<Process> process;
        const std::string leaf_path = cgroup_.path() + "/" + journalled.id;
        auto populated = [&]() -> bool {
            auto leaf = Cgroup::open_unowned(leaf_path);
            if (!leaf) return false;
            auto is = leaf->populated();
            return is && *is;
        };
        if (journalled.exit) {
            Process::RestoredEnd end;
            end.reason = parse_exit_reason(journalled.exit->status).value_or(ExitReason::unknown);
            end.exit_code = journalled.exit->exit_code;
            end.signal = journalled.exit->signal;
            end.duration_ms = journalled.exit->duration_ms;
            end.error = journalled.exit->error;
            end.note = journalled.exit->note;
            process = Process::restore(context_.io, context_.reaper, std::move(setup),
                                       journalled.started_at, journalled.pid, std::move(end));
            // Its descendants may still run in its leaf (`cmd &`): they are the session's.
            if (populated())
                notes.push_back("session " + id_ + ": " + journalled.id +
                                " had ended; what it left in its leaf is killed");
        } else if (populated()) {
            PidRef main;
            if (auto verified =
                    open_verified_process(journalled.pid, journalled.start_ticks, leaf_path)) {
                main = std::move(*verified);
            } else {
                notes.push_back("session " + id_ + ": " + journalled.id +
                                ": main process not taken: " + verified.error().describe());
            }
            auto leaf = Cgroup::adopt(leaf_path);
            if (!leaf) {
                notes.push_back("session " + id_ + ": " + journalled.id + ": " +
                                leaf.error().describe());
                continue;
            }
            ResumedOutput resumed = take_output(journalled, notes);
            if (resumed.any()) {
                setup.held_slot = journalled.held_slot;  // still held there: the next restart's
            } else {
                setup.held_slot.reset();
            }
            process = Process::adopt(context_.io, context_.reaper, std::move(setup),
                                     journalled.started_at, std::move(main), std::move(*leaf),
                                     finish_callback(), std::move(resumed));
        } else {
            Process::RestoredEnd end;
            ResumedOutput resumed = take_output(journalled, notes);
            end.note = resumed.any() ? kEndedWhileDownResumedNote : kEndedWhileDownNote;
            end.duration_ms = 0;
            process = Process::restore(context_.io, context_.reaper, std::move(setup),
                                       journalled.started_at, journalled.pid, std::move(end),
                                       std::move(resumed));
            release_slots(journalled);         // read: the holder may let them go
            (void)::rmdir(leaf_path.c_str());  // an empty leaf the old daemon did not remove
            journal_process_ended(*process);
        }
        processes_[process->id()] = process;
        process_order_.push_back(process->id());
    }
}

// Leaves of this session that no record owns running (a process launched just before the crash,
// whose record never reached the journal; descendants of a finished one): nobody can name them,
// so they are killed and removed, as start-up does with everything unowned.
void Session::reap_unowned_leaves(std::vector<std::string>& notes) {
    for (const auto& name : subdirectory_names(cgroup_.path())) {
        if (name == "holder" && sandbox_.active()) continue;
        auto owner = processes_.find(name);
        if (owner != processes_.end() && owner->second->leaf().valid()) continue;
        auto leaf = Cgroup::adopt(cgroup_.path() + "/" + name);
        if (!leaf) continue;
        size_t count = 0;
        if (auto pids = leaf->pids()) count = pids->size();
        if (Status removed = leaf->remove(kKillBound); !removed) {
            notes.push_back("session " + id_ + ": leaf `" + name +
                            "`: " + removed.error().describe());
            leaf->leave();
        } else if (count != 0) {
            notes.push_back("session " + id_ + ": killed " + std::to_string(count) +
                            " processes in leaf `" + name + "` that no journal record owns");
        }
    }
}

}  // namespace corral
