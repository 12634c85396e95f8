#include "supervisor/cli/commands.hpp"

#include <linux/filter.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "isolation/confinement.hpp"
#include "isolation/seccomp_listing.hpp"
#include "policies/compiled/compiled_presets.hpp"
#include "policies/policy_parser.hpp"
#include "supervisor/cli/client_commands.hpp"
#include "supervisor/cli/doctor.hpp"
#include "supervisor/cli/one_shot_session.hpp"
#include "supervisor/cli/report_target.hpp"
#include "supervisor/cli/run_network.hpp"
#include "supervisor/cli/run_options.hpp"
#include "supervisor/cli/run_workdir.hpp"

extern char** environ;

namespace corral::cli {
namespace {

void print_usage() {
    std::printf(
        "corral %s — a containerless sandbox supervisor\n\n"
        "usage:\n"
        "  corral run [--policy FILE|NAME] [--timeout DUR] [--report FILE|-] [--cwd DIR]\n"
        "             [--env NAME[=VALUE]]... [--] CMD...\n"
        "  corral policy check FILE|NAME      validate; print the resolved policy\n"
        "  corral policy seccomp FILE|NAME    the compiled seccomp filter (raw BPF) on stdout\n"
        "  corral policy seccomp FILE|NAME --list   what that filter answers, syscall by name\n"
        "  corral doctor [--json]             what this host can enforce\n"
        "%s"
        "  corral version\n",
        CORRAL_VERSION, client_commands_usage().c_str());
}

}  // namespace

/// A run is its session's only command, so both bounds apply: the command's (`--timeout`, else
/// timeouts.command) and the session's lifetime (timeouts.session), whichever is shorter. The
/// operator probe of stop 44 found timeouts.session shown by `policy check` and never enforced.
Millis run_timeout(std::optional<Millis> flag, const Timeouts& timeouts) {
    const Millis command = flag.value_or(timeouts.command.value_or(Millis{0}));
    if (!timeouts.session || timeouts.session->count() <= 0) return command;
    if (command.count() <= 0) return *timeouts.session;
    return std::min(command, *timeouts.session);
}

namespace {

/// The job directory, the workdir plan and the environment of a `corral run`: everything that
/// depends on the caller's view (current directory, environment), settled before anything runs.
Result<OneShotRequest> prepare_run(const RunOptions& options, const Policy& policy) {
    OneShotRequest request;
    request.command = options.command;
    request.timeout = run_timeout(options.timeout, policy.timeouts);
    request.measure_usage = options.report.has_value();
    auto job_dir = resolve_job_directory(options.cwd);
    if (!job_dir) return std::move(job_dir.error());
    auto workdir = plan_run_workdir(policy, *job_dir);
    if (!workdir) return std::move(workdir.error().context("policy `" + options.policy + "`"));
    request.workdir = std::move(*workdir);
    resolve_env_arguments(options.env, environ, request.env_set, request.env_unset);
    return request;
}

void warn_about_outputs(const OutputsCopied& outputs) {
    for (const auto& path : outputs.missing)
        std::fprintf(stderr, "corral run: workdir.outputs: `%s` was not created by the job\n",
                     path.c_str());
    for (const auto& path : outputs.skipped)
        std::fprintf(stderr, "corral run: workdir.outputs: not copied back: %s\n", path.c_str());
    if (!outputs.error.empty())
        std::fprintf(stderr, "corral run: workdir.outputs: %s\n", outputs.error.c_str());
}

int run_command(const std::vector<std::string>& args) {
    auto options = parse_run_options(args);
    if (!options) {
        std::fprintf(stderr, "corral run: %s\n%s", options.error().describe().c_str(), run_usage());
        return 2;
    }
    // Opened before anything runs, in our own view of the path (issue 10, item 5).
    std::optional<ReportTarget> report_target;
    if (options->report) {
        auto target = ReportTarget::open(*options->report);
        if (!target) {
            std::fprintf(stderr, "corral run: %s\n", target.error().describe().c_str());
            return 125;
        }
        report_target.emplace(std::move(*target));
    }
    RunReport report;
    // A preset comes compiled (policies/compiled/compiled_presets.hpp): no YAML parse per launch.
    auto parsed = load_policy_compiled(options->policy);
    if (!parsed.ok()) {
        report.error = "policy `" + options->policy + "`:\n" + parsed.format_errors();
    } else if (auto request = prepare_run(*options, *parsed.policy); !request) {
        report.policy = parsed.policy->name;
        report.error = request.error().describe();
    } else {
        for (const auto& note : request->workdir.notes)
            std::fprintf(stderr, "corral run: note: %s\n", note.c_str());
        if (const std::string note = describe_run_network(*parsed.policy); !note.empty())
            std::fprintf(stderr, "corral run: note: %s",
                         note.substr(std::string("# corral run: ").size()).c_str());
        report = run_one_shot(*parsed.policy, *request);
    }
    if (report.status == ExitReason::setup_failed && report.exit_code)
        std::fprintf(stderr, "corral run: %s\n", report.error.c_str());
    else if (report.status == ExitReason::setup_failed)
        std::fprintf(stderr, "corral run: setup failed: %s\n", report.error.c_str());
    else if (report.status == ExitReason::timeout)
        std::fprintf(stderr, "corral run: timed out; the session was ended\n");
    if (report.outputs) warn_about_outputs(*report.outputs);
    if (report_target) {
        if (auto written = report_target->write(to_json(report).dump(2) + "\n"); !written)
            std::fprintf(stderr, "corral run: %s\n", written.error().describe().c_str());
    }
    return report.process_exit_code();
}

/// The one policy a `corral policy` subcommand names, or the exit code after saying what is
/// wrong: 2 for a usage error, 1 for a policy that does not load.
std::variant<Policy, int> policy_argument(const std::vector<std::string>& args, const char* usage) {
    if (args.size() != 1) {
        std::fprintf(stderr, "usage: %s\n", usage);
        return 2;
    }
    auto parsed = load_policy_compiled(args[0]);  // what `corral run` uses, also for a preset
    if (!parsed.ok()) {
        std::fputs(parsed.format_errors().c_str(), stderr);
        return 1;
    }
    return std::move(*parsed.policy);
}

int policy_check_command(const std::vector<std::string>& args) {
    auto policy = policy_argument(args, "corral policy check FILE|NAME");
    if (const int* code = std::get_if<int>(&policy)) return *code;
    std::fputs(policy_to_yaml(std::get<Policy>(policy)).c_str(), stdout);
    std::fputs(describe_run_workdir(std::get<Policy>(policy)).c_str(), stdout);
    std::fputs(describe_run_network(std::get<Policy>(policy)).c_str(), stdout);
    return 0;
}

/// The policy's seccomp filter as compiled for the kernel: the raw struct sock_filter array that
/// prctl(PR_SET_SECCOMP) and `bwrap --seccomp FD` take. For inspection (seccomp-tools, bpf_dbg)
/// and for giving another tool exactly corral's filter.
/// `--list`: one line per x86_64 syscall, "NAME ANSWER", read off the compiled program itself
/// (answers that depend on arguments say so: "chmod allow, EPERM for some arguments").
int print_seccomp_listing(const Policy& policy, const std::vector<sock_filter>& program) {
    std::printf("# seccomp of policy `%s`: preset %s; what each syscall gets\n",
                policy.name.c_str(), policy.seccomp.preset.c_str());
    size_t allowed = 0, refused = 0, mixed = 0;
    for (const SyscallAnswer& a : list_seccomp(program)) {
        if (a.otherwise.empty()) {
            std::printf("%-26s %s\n", a.name.c_str(), a.answer.c_str());
        } else {
            std::printf("%-26s %s, %s for some arguments\n", a.name.c_str(), a.answer.c_str(),
                        a.otherwise.c_str());
            ++mixed;
        }
        ++(a.answer == "allow" ? allowed : refused);
    }
    std::printf(
        "# %zu allowed, %zu refused (all arguments 0); %zu answer otherwise for some "
        "arguments\n",
        allowed, refused, mixed);
    return std::fflush(stdout) == 0 ? 0 : 1;
}

int policy_seccomp_command(std::vector<std::string> args) {
    bool list = false;
    if (auto at = std::find(args.begin(), args.end(), "--list"); at != args.end()) {
        list = true;
        args.erase(at);
    }
    auto loaded = policy_argument(
        args, "corral policy seccomp FILE|NAME [--list]  (without --list: > filter.bpf)");
    if (const int* code = std::get_if<int>(&loaded)) return *code;
    const Policy& policy = std::get<Policy>(loaded);
    auto program = compile_seccomp(policy.seccomp);
    if (!program) {
        std::fprintf(stderr, "corral policy seccomp: %s\n", program.error().describe().c_str());
        return 1;
    }
    if (program->empty()) {
        std::fprintf(stderr, "corral policy seccomp: policy `%s` has no seccomp filter\n",
                     policy.name.c_str());
        return 1;
    }
    if (list) return print_seccomp_listing(policy, *program);
    if (::isatty(STDOUT_FILENO)) {
        std::fprintf(stderr, "corral policy seccomp: the filter is binary; redirect stdout\n");
        return 2;
    }
    const size_t bytes = program->size() * sizeof(sock_filter);
    if (std::fwrite(program->data(), 1, bytes, stdout) != bytes || std::fflush(stdout) != 0) {
        std::perror("corral policy seccomp: write");
        return 1;
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    std::vector<std::string> args(argv + 1, argv + argc);
    if (args.empty() || args[0] == "help" || args[0] == "--help" || args[0] == "-h") {
        print_usage();
        return args.empty() ? 2 : 0;
    }
    const std::string command = args[0];
    std::vector<std::string> rest(args.begin() + 1, args.end());
    if (command == "run") return run_command(rest);
    if (command == "policy") {
        if (!rest.empty() && rest[0] == "check")
            return policy_check_command({rest.begin() + 1, rest.end()});
        if (!rest.empty() && rest[0] == "seccomp")
            return policy_seccomp_command({rest.begin() + 1, rest.end()});
        std::fprintf(stderr, "usage: corral policy check|seccomp FILE|NAME\n");
        return 2;
    }
    if (command == "doctor") return doctor_command(!rest.empty() && rest[0] == "--json");
    if (command == "version" || command == "--version") {
        std::printf("corral %s\n", CORRAL_VERSION);
        return 0;
    }
    int code = run_client_command(args);
    if (code != -1) return code;
    std::fprintf(stderr, "corral: unknown command `%s`\n", command.c_str());
    print_usage();
    return 2;
}

}  // namespace corral::cli
