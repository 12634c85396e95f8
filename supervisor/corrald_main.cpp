// corrald: the session daemon. Parses the command line, builds the session manager and the HTTP
// server on one io_context, and runs until SIGINT/SIGTERM, when it stops accepting, ends every
// stream truthfully, ends every session (kill trees, remove cgroups) and exits 0.

#include <malloc.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>

// clang-format off
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded
// clang-format on

#include <cstdio>
#include <cstring>
#include <filesystem>

#include "base/asio.hpp"
#include "isolation/cgroup.hpp"
#include "isolation/host_probe.hpp"
#include "isolation/launch_zygote.hpp"
#include "isolation/sealed_executable.hpp"
#include "isolation/systemd_scope.hpp"
#include "policies/policy_parser.hpp"
#include "sessions/network/egress_hosts.hpp"
#include "sessions/session_manager.hpp"
#include "supervisor/corrald_launch_image.hpp"
#include "supervisor/daemon/api.hpp"
#include "supervisor/daemon/daemon_options.hpp"
#include "supervisor/daemon/http_server.hpp"

namespace {

using namespace corral;
using namespace corral::daemon;

void log_line(const std::string& line) {
    std::fprintf(stderr, "corrald: %s\n", line.c_str());
}

int fail(const Error& error) {
    log_line(error.describe());
    return 1;
}

SessionManagerConfig manager_config(const DaemonOptions& options) {
    SessionManagerConfig config;
    config.state_dir = options.state_dir;
    config.policy_dir = options.policy_dir;
    config.instance_name = options.instance;
    config.port_first = options.port_first;
    config.port_last = options.port_last;
    config.max_finished_processes = options.max_process_records;
    config.workdir_roots = options.allow_workdir;
    config.egress.log = log_line;
    config.egress.tunnel_idle = options.egress_idle_timeout;
    config.egress.dns_ttl = options.egress_dns_ttl;
    config.egress.dns_grace = options.egress_dns_grace;
    config.move_self_to_supervisor_leaf = true;
    config.journal = true;
    config.adopt_sessions = options.recover_adopt;
    config.keep_output = options.keep_output;
    config.journal_sync = options.journal_sync_data ? JournalSync::data : JournalSync::none;
    config.log = log_line;
    // Sessions must never reach the daemon's socket: a request without a token has full rights.
    config.hidden_from_sessions.push_back(
        std::filesystem::absolute(options.socket_path).parent_path().string());
    return config;
}

/// What a previous run left (it crashed or was killed) and start-up removed.
void log_leftovers(const LeftoverReport& left) {
    if (!left.sessions.empty() || left.processes_killed != 0 || left.cgroups_removed != 0) {
        log_line("reaped what a previous run left: " + std::to_string(left.sessions.size()) +
                 " sessions, " + std::to_string(left.processes_killed) + " processes, " +
                 std::to_string(left.cgroups_removed) + " cgroups, " +
                 std::to_string(left.mounts_removed) + " mounts, " +
                 std::to_string(left.directories_removed) + " session directories");
    }
    for (const auto& what : left.left) log_line("could not remove: " + what);
}

/// What start-up took over from the journal, and what it did not and why.
void log_adoption(const AdoptionReport& adoption) {
    for (const auto& note : adoption.notes) log_line(note);
    for (const auto& refused : adoption.refused) log_line("not re-adopted: " + refused);
    if (!adoption.adopted.empty())
        log_line("re-adopted " + std::to_string(adoption.adopted.size()) + " sessions with " +
                 std::to_string(adoption.running_processes) + " running processes");
}

/// On SIGINT/SIGTERM: stop accepting, let every waiting stream send its final event, end all
/// sessions, then stop the loop. A second signal, or a stuck shutdown, stops the loop at once
/// (the manager's destructor still kills and removes what is left).
void on_stop_signal(asio::io_context& io, asio::signal_set& signals, HttpServer& server,
                    WaitRegistry& waits, SessionManager& sessions, asio::steady_timer& deadline) {
    signals.async_wait([&](const boost::system::error_code& ec, int signal) {
        if (ec) return;
        if (waits.stopping()) {
            log_line("second signal: stopping now");
            io.stop();
            return;
        }
        log_line(std::string("signal ") + ::strsignal(signal) + ": ending all sessions");
        server.stop_accepting();
        waits.interrupt_all();
        deadline.expires_after(std::chrono::seconds(60));
        deadline.async_wait([&](const boost::system::error_code& timer_ec) {
            if (timer_ec) return;
            log_line("shutdown took too long: stopping now");
            io.stop();
        });
        sessions.shutdown([&] {
            server.close_connections();
            deadline.cancel();
            io.stop();
        });
        on_stop_signal(io, signals, server, waits, sessions, deadline);
    });
}

/// Every connection and session holds descriptors (~9 per session): the soft limit of 1024
/// that most hosts give a process is reached at ~110 sessions. The hard limit is ours to take.
void raise_open_files_limit() {
    rlimit limit{};
    if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
    limit.rlim_cur = limit.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &limit) != 0)
        log_line(std::string("cannot raise RLIMIT_NOFILE: ") + std::strerror(errno));
}

/// Our pages of `bytes` (part of our binary, read once to copy it elsewhere) leave our resident
/// memory; a later read would fault them in from the file again. Without it corrald's RSS held the
/// 2.7 MB of corrald-launch it copied into the zygote's memfd.
void drop_resident_copy(std::span<const unsigned char> bytes) {
    const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    const auto begin = reinterpret_cast<uintptr_t>(bytes.data()) & ~(page - 1);
    const auto end = reinterpret_cast<uintptr_t>(bytes.data() + bytes.size());
    (void)::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

int run(const DaemonOptions& options) {
    ::signal(SIGPIPE, SIG_IGN);  // a vanished client must not kill the daemon
    raise_open_files_limit();
    // Validated before anything is created (cgroups, socket dir): a bad --listen leaves nothing.
    if (!options.listen.empty())
        if (auto endpoint = parse_loopback_endpoint(options.listen); !endpoint)
            return fail(endpoint.error());
    if (unix_socket_in_use(options.socket_path))
        return fail(
            sys_error(EADDRINUSE, "another daemon answers on `" + options.socket_path + "`"));
    std::error_code fs_error;
    const auto socket_dir = std::filesystem::path(options.socket_path).parent_path();
    if (!socket_dir.empty()) std::filesystem::create_directories(socket_dir, fs_error);
    if (fs_error) return fail(sys_error(fs_error.value(), "create `" + socket_dir.string() + "`"));

    // Probed before any thread exists: the namespace probes fork.
    // Placement for real: a daemon started from a login shell's scope gets a delegated one.
    const HostProbe host_probe =
        probe_host(PlacementOptions{true, "corrald", scope_requester()});
    if (!host_probe.cgroups)
        return fail(plain_error(host_probe.cgroup_error).context("discover cgroups"));
    const CgroupHost* host = &*host_probe.cgroups;
    // Declared before the io_context: coroutine frames the io_context still holds when it is
    // destroyed unregister their waits from it.
    WaitRegistry waits;
    asio::io_context io;
    // Caught from here on, before the instance cgroups and the socket exist: a stop signal that
    // comes while they are being made waits (asio keeps it) and then takes the orderly way out,
    // which removes them. Caught only after the socket existed, a SIGTERM soon after the socket
    // appeared killed corrald and left the socket behind (seen on the pure-v2 VM).
    asio::signal_set signals(io, SIGINT, SIGTERM);
    SessionManagerConfig config = manager_config(options);
    if (!options.egress_hosts_file.empty()) {
        auto hosts = load_egress_hosts(options.egress_hosts_file);
        if (!hosts) return fail(hosts.error());
        config.egress.hosts = std::make_shared<const EgressHosts>(std::move(*hosts));
        log_line("egress names from `" + options.egress_hosts_file + "` (" +
                 std::to_string(config.egress.hosts->names.size()) + " names)");
    }
    // --prepare names a policy as POST /v1/sessions would: one that does not resolve (no such
    // preset or file, or a file with errors) stops the start with the flag named.
    for (const auto& [name, count] : options.prepare) {
        PolicyParseResult parsed = load_named_policy(name, options.policy_dir);
        if (!parsed.ok())
            return fail(plain_error("--prepare " + name + "=" + std::to_string(count) +
                                    ": policy `" + name + "`: " + parsed.format_errors()));
        log_line("keeping " + std::to_string(count) + " session(s) of policy `" + name +
                 "` prepared");
    }
    config.prepared = options.prepare;
    // The launch zygote runs the program corrald carries (launch_zygote.hpp), set before the
    // session manager starts it; without it, a fork of corrald serves as the zygote.
    if (auto image = sealed_executable(corrald_launch_image(), "corrald-launch")) {
        LaunchZygote::set_image(std::move(*image));
        drop_resident_copy(corrald_launch_image());
    } else
        log_line("launch zygote: a fork of corrald, not corrald-launch: " +
                 image.error().describe());
    auto sessions = SessionManager::create(io, std::move(config), *host);
    if (!sessions) return fail(sessions.error().context("start session manager"));
    log_adoption((*sessions)->adoption());
    log_leftovers((*sessions)->leftovers());

    Api api(**sessions, waits, ApiOptions{options.policy_dir, options.instance, host_probe});
    HttpServer server(io, api, options.connections);
    server.set_error_log(log_line);
    if (auto status = server.listen_unix(options.socket_path); !status) return fail(status.error());
    log_line("listening on unix:" + options.socket_path);
    if (!options.listen.empty()) {
        if (auto status = server.listen_tcp(options.listen); !status) return fail(status.error());
        log_line("listening on tcp port " + std::to_string(server.tcp_port()));
    }

    asio::steady_timer deadline(io);
    on_stop_signal(io, signals, server, waits, **sessions, deadline);
    io.run();
    server.stop_accepting();
    server.close_connections();
    // Let the connection coroutines see their sockets closed and unwind (bounded).
    io.restart();
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (server.connection_count() > 0 && std::chrono::steady_clock::now() < until)
        io.run_one_for(std::chrono::milliseconds(100));
    log_line("stopped");
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    // Non-dumpable from the start: every process corrald forks (command children, the session's
    // PID 1 holder) is a copy of its memory (tokens, other sessions' output, its environment)
    // until execve, and fork keeps the flag, so nothing in a session can open /proc/<copy>/mem,
    // environ or exe (issue 10.1; CVE-2019-5736, CVE-2016-9962). execve resets it for the command.
    if (::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) {
        std::perror("corrald: prctl(PR_SET_DUMPABLE, 0)");
        return 1;
    }
    // glibc gives each thread that allocates an arena of its own, up to 8 per CPU, and an arena
    // keeps its pages while anything in it lives. corrald's work is on its loop thread; the
    // others (the launch worker, the namespace thread and its nftables worker; until issue 18 two
    // per isolated session) allocate little and seldom, so they share: with 100 `default`
    // sessions and two threads each corrald held 32.7 MB with an arena per thread, 26.8 MB with
    // two arenas.
    (void)::mallopt(M_ARENA_MAX, 2);
    auto options = parse_daemon_options(std::vector<std::string>(argv + 1, argv + argc));
    if (!options) {
        std::fprintf(stderr, "corrald: %s\n%s", options.error().describe().c_str(),
                     corral::daemon::daemon_usage().c_str());
        return 2;
    }
    if (options->help) {
        std::fputs(corral::daemon::daemon_usage().c_str(), stdout);
        return 0;
    }
    if (options->version) {
        std::printf("corrald %s\n", CORRAL_VERSION);
        return 0;
    }
    return run(*options);
}
