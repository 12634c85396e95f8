#include "supervisor/daemon/daemon_options.hpp"

#include <algorithm>
#include <charconv>
#include <set>
#include <string>

#include "policies/units.hpp"

namespace corral::daemon {
namespace {

bool parse_port(std::string_view text, uint16_t* out) {
    unsigned value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size() || value == 0 || value > 65535)
        return false;
    *out = static_cast<uint16_t>(value);
    return true;
}

/// Instance names become cgroup directory names: keep them to a safe alphabet.
bool valid_instance(const std::string& name) {
    if (name.empty() || name.size() > 64 || name[0] == '.') return false;
    for (char c : name) {
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.')
            return false;
    }
    return true;
}

/// A timeout option: a duration with a unit ("10s", "500ms"), from 1 ms to 1 hour.
bool parse_timeout(const std::string& text, std::chrono::milliseconds* out) {
    auto value = parse_duration(text);
    if (!value || value->count() < 1 || *value > std::chrono::hours(1)) return false;
    *out = *value;
    return true;
}

/// A named policy, as POST /v1/sessions takes it: [A-Za-z0-9._-], no path, not hidden.
bool valid_policy_name(const std::string& name) {
    if (name.empty() || name.size() > 128 || name[0] == '.') return false;
    return std::all_of(name.begin(), name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
    });
}

}  // namespace

std::string daemon_usage() {
    return "usage: corrald [--socket PATH] [--listen 127.0.0.1:PORT] [--state-dir DIR]\n"
           "               [--policy-dir DIR] [--port-range FIRST-LAST] [--instance NAME]\n"
           "               [--max-connections N (512)] [--header-timeout DUR (10s)]\n"
           "               [--body-timeout DUR (30s)] [--idle-timeout DUR (60s)]\n"
           "               [--write-timeout DUR (30s)] [--min-write-rate SIZE (1Mi)]\n"
           "                                           (bytes a second a client must take of\n"
           "                                            a response of known size, on average)\n"
           "               [--max-process-records N (256)] [--recover=adopt|reap (adopt)]\n"
           "               [--keep-output=on|off (on)]\n"
           "               [--journal-sync=none|data (none)]\n"
           "               [--prepare POLICY=N]...  (keep N (1-64) sessions of named policy\n"
           "                                            POLICY prepared: creations that ask for\n"
           "                                            nothing else take one; off by default)\n"
           "               [--allow-workdir ROOT]...  (sessions may work in existing\n"
           "                                            directories beneath ROOT: {workdir})\n"
           "               [--egress-hosts-file FILE]  (hosts-file names for the egress proxy,\n"
           "                                            for tests and air-gapped hosts)\n"
           "               [--egress-idle-timeout DUR (10m)]  (egress tunnels idle this long\n"
           "                                            are closed)\n"
           "               [--egress-dns-ttl DUR (60s)] [--egress-dns-grace DUR (30s)]\n"
           "                                           (TTL of session DNS answers; an address\n"
           "                                            stays open for TTL + grace)\n"
           "               [--help] [--version]\n";
}

/// Every option that takes a value (all of corrald's but --help and --version).
const std::set<std::string> kValueOptions = {
    "--socket",          "--listen",          "--state-dir",          "--policy-dir",
    "--allow-workdir",   "--egress-hosts-file", "--egress-idle-timeout", "--egress-dns-ttl",
    "--egress-dns-grace", "--instance",       "--port-range",         "--max-connections",
    "--header-timeout",  "--body-timeout",    "--idle-timeout",       "--write-timeout",
    "--min-write-rate",  "--keep-output",     "--recover",            "--journal-sync",
    "--prepare",         "--max-process-records"};

Result<DaemonOptions> parse_daemon_options(const std::vector<std::string>& args) {
    DaemonOptions options;
    for (size_t i = 0; i < args.size(); ++i) {
        std::string name = args[i];
        std::string value;
        bool has_value = false;
        if (auto eq = name.find('='); name.rfind("--", 0) == 0 && eq != std::string::npos) {
            value = name.substr(eq + 1);
            name = name.substr(0, eq);
            has_value = true;
        }
        if (name == "--help" || name == "-h") {
            options.help = true;
            continue;
        }
        if (name == "--version") {
            options.version = true;
            continue;
        }
        // An unknown name is said as such, not as an option missing its value (stop 44's
        // operator probe: `corrald --bogus` said "needs a value").
        if (!kValueOptions.count(name)) return sys_error(EINVAL, "unknown option `" + name + "`");
        if (!has_value) {
            if (i + 1 >= args.size())
                return sys_error(EINVAL, "option `" + name + "` needs a value");
            value = args[++i];
        }
        if (name == "--socket") {
            options.socket_path = value;
        } else if (name == "--listen") {
            options.listen = value;
        } else if (name == "--state-dir") {
            options.state_dir = value;
        } else if (name == "--policy-dir") {
            options.policy_dir = value;
        } else if (name == "--allow-workdir") {
            if (value.empty() || value.front() != '/' || value.find('\0') != std::string::npos)
                return sys_error(EINVAL,
                                 "--allow-workdir `" + value + "`: expected an absolute path");
            options.allow_workdir.push_back(value);
        } else if (name == "--egress-hosts-file") {
            options.egress_hosts_file = value;
        } else if (name == "--egress-idle-timeout") {
            auto value_ms = parse_duration(value);
            if (!value_ms || value_ms->count() < 1 || *value_ms > std::chrono::hours(24))
                return sys_error(EINVAL, "--egress-idle-timeout `" + value +
                                             "`: expected a duration from 1ms to 24h, e.g. 10m");
            options.egress_idle_timeout = *value_ms;
        } else if (name == "--egress-dns-ttl" || name == "--egress-dns-grace") {
            // Whole seconds: a DNS TTL has no finer unit. Grace may be 0, a TTL may not.
            auto value_ms = parse_duration(value);
            const bool ttl = name == "--egress-dns-ttl";
            if (!value_ms || value_ms->count() % 1000 != 0 || *value_ms > std::chrono::hours(24) ||
                (ttl && value_ms->count() < 1000))
                return sys_error(EINVAL, name + " `" + value + "`: expected whole seconds " +
                                             (ttl ? "from 1s" : "from 0s") + " to 24h, e.g. 60s");
            (ttl ? options.egress_dns_ttl : options.egress_dns_grace) =
                std::chrono::duration_cast<std::chrono::seconds>(*value_ms);
        } else if (name == "--instance") {
            if (!valid_instance(value))
                return sys_error(EINVAL, "--instance `" + value + "`: use [A-Za-z0-9._-]{1,64}");
            options.instance = value;
        } else if (name == "--port-range") {
            const size_t dash = value.find('-');
            if (dash == std::string::npos ||
                !parse_port(std::string_view(value).substr(0, dash), &options.port_first) ||
                !parse_port(std::string_view(value).substr(dash + 1), &options.port_last) ||
                options.port_first > options.port_last)
                return sys_error(EINVAL, "--port-range `" + value + "`: expected FIRST-LAST");
        } else if (name == "--max-connections") {
            size_t count = 0;
            auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), count);
            if (ec != std::errc() || end != value.data() + value.size() || count < 1 ||
                count > 1000000)
                return sys_error(EINVAL,
                                 "--max-connections `" + value + "`: expected 1 to 1000000");
            options.connections.max_connections = count;
        } else if (name == "--header-timeout" || name == "--body-timeout" ||
                   name == "--idle-timeout" || name == "--write-timeout") {
            auto* field = name == "--header-timeout"  ? &options.connections.header_timeout
                          : name == "--body-timeout"  ? &options.connections.body_timeout
                          : name == "--write-timeout" ? &options.connections.write_timeout
                                                      : &options.connections.idle_timeout;
            if (!parse_timeout(value, field))
                return sys_error(EINVAL, name + " `" + value +
                                             "`: expected a duration from 1ms to 1h, e.g. 10s");
        } else if (name == "--min-write-rate") {
            auto rate = parse_size(value);
            if (!rate || *rate < 1024 || *rate > (uint64_t{1} << 40))
                return sys_error(EINVAL,
                                 "--min-write-rate `" + value +
                                     "`: expected bytes a second from 1Ki to 1Ti, e.g. 1Mi");
            options.connections.min_write_rate = static_cast<size_t>(*rate);
        } else if (name == "--keep-output") {
            if (value != "on" && value != "off")
                return sys_error(EINVAL, "--keep-output `" + value + "`: expected on or off");
            options.keep_output = value == "on";
        } else if (name == "--recover") {
            if (value != "adopt" && value != "reap")
                return sys_error(EINVAL, "--recover `" + value + "`: expected adopt or reap");
            options.recover_adopt = value == "adopt";
        } else if (name == "--journal-sync") {
            if (value != "none" && value != "data")
                return sys_error(EINVAL, "--journal-sync `" + value + "`: expected none or data");
            options.journal_sync_data = value == "data";
        } else if (name == "--prepare") {
            const size_t eq = value.rfind('=');
            const std::string policy = eq == std::string::npos ? "" : value.substr(0, eq);
            const std::string number = eq == std::string::npos ? "" : value.substr(eq + 1);
            size_t count = 0;
            auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), count);
            if (!valid_policy_name(policy) || number.empty() || ec != std::errc() ||
                end != number.data() + number.size() || count < 1 || count > kMaxPrepared)
                return sys_error(EINVAL, "--prepare `" + value +
                                             "`: expected POLICY=N, a policy name (a preset or a "
                                             "file of --policy-dir, no path) and N from 1 to " +
                                             std::to_string(kMaxPrepared));
            if (options.prepare.count(policy) != 0)
                return sys_error(
                    EINVAL, "--prepare `" + value + "`: policy `" + policy + "` is given twice");
            options.prepare[policy] = count;
        } else if (name == "--max-process-records") {
            size_t count = 0;
            auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), count);
            if (ec != std::errc() || end != value.data() + value.size() || count == 0 ||
                count > 1000000)
                return sys_error(EINVAL,
                                 "--max-process-records `" + value + "`: expected 1-1000000");
            options.max_process_records = count;
        } else {
            return sys_error(EINVAL, "unknown option `" + name + "`");
        }
    }
    if (options.socket_path.empty() || options.state_dir.empty())
        return sys_error(EINVAL, "--socket and --state-dir must not be empty");
    return options;
}

}  // namespace corral::daemon
