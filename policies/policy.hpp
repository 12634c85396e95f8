#pragma once
// The policy model: what one session is allowed to do. A Policy is produced by the parser
// (policy_parser.hpp) from YAML, after `extends:` is resolved, and is immutable afterwards.
// Pure data: nothing here touches the kernel.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace corral {

using Millis = std::chrono::milliseconds;

/// Whether a session shares the host's network or gets its own namespace with only `lo`.
enum class NetworkMode { host, isolated };
/// What a seccomp rule does to a matching syscall.
enum class SeccompAction { errno_code, kill_process, log };
/// Whether a limit the host cannot enforce refuses the session (strict) or is only reported.
enum class Enforcement { strict, best_effort };

/// Which user the session's processes run as. `inherit` keeps the caller's ids.
struct UserSpec {
    bool inherit = true;
    uid_t uid = 0;
    gid_t gid = 0;
    std::vector<gid_t> groups;  ///< supplementary groups; empty clears them (unless inherit)

    bool operator==(const UserSpec&) const = default;  ///< field-wise
};

/// The environment given to processes: optionally cleared, then `pass` copied from the
/// caller's environment, then `set` applied.
struct EnvSpec {
    bool clear = true;
    std::map<std::string, std::string> set;
    std::vector<std::string> pass;

    bool operator==(const EnvSpec&) const = default;  ///< field-wise
};

/// What `corral run` makes of the job's directory (the current one, or --cwd). Daemon sessions
/// always get a scratch workdir (or the request's `workdir` bind) and ignore this.
enum class WorkdirFrom {
    cwd,   ///< bound writable at its own path; the command runs there; writes land in it
    copy,  ///< copied into a fresh tmpfs (of `size`) at `mount`; the command runs there; only
           ///< `outputs` are copied back, everything else it wrote is gone with the tmpfs
};

/// The session's working directory (the file API's root; the cwd of its processes).
struct WorkdirSpec {
    std::optional<uint64_t> size;   ///< bytes; a tmpfs of this size when set
    std::string mount = "/workspace";  ///< where processes see it when the mount namespace is on
    WorkdirFrom from = WorkdirFrom::cwd;  ///< corral run only
    std::vector<std::string> outputs;     ///< corral run, from copy: relative paths copied back

    bool operator==(const WorkdirSpec&) const = default;  ///< field-wise
};

/// Resource limits. Unset optionals mean "no limit".
struct Limits {
    std::optional<uint64_t> memory;      ///< bytes (memory.max / memory.limit_in_bytes)
    std::optional<uint64_t> swap;        ///< bytes of swap; 0 (the default when memory is set) = off
    std::optional<uint64_t> pids;        ///< max tasks in the session
    std::optional<double> cpu;           ///< fraction of cores, e.g. 1.5
    std::optional<uint64_t> io_weight;   ///< 1..10000 (io.weight / blkio.weight scaled)
    std::optional<uint64_t> open_files;  ///< RLIMIT_NOFILE
    std::optional<uint64_t> core;        ///< RLIMIT_CORE bytes (default 0: no core dumps)
    std::optional<uint64_t> file_size;   ///< RLIMIT_FSIZE bytes
    std::optional<uint64_t> processes;   ///< RLIMIT_NPROC per uid
    std::optional<uint64_t> stack;       ///< RLIMIT_STACK bytes
    uint64_t output = 16ull << 20;       ///< bytes of stdout/stderr kept per process stream
    bool oom_group = false;              ///< an OOM kill ends every process of the session
    /// Hybrid hosts: v1 memory and pids cgroups even without a limit, so usage has memory and
    /// pids peaks (unified hosts measure them anyway). Costs two cgroups per session.
    bool accounting = false;

    bool operator==(const Limits&) const = default;  ///< field-wise
};

/// Time limits. Unset = none.
struct Timeouts {
    std::optional<Millis> command;  ///< per command run in the session
    std::optional<Millis> session;  ///< absolute lifetime of the session
    std::optional<Millis> idle;     ///< no API activity and no running process for this long
    Millis grace{5000};             ///< SIGTERM -> grace -> cgroup.kill

    bool operator==(const Timeouts&) const = default;  ///< field-wise
};

/// Which namespaces the session gets. All of a session's processes share them.
struct NamespaceSpec {
    bool pid = false;
    bool mount = false;
    bool ipc = false;
    bool uts = false;
    bool user = false;
    NetworkMode network = NetworkMode::host;

    bool operator==(const NamespaceSpec&) const = default;  ///< field-wise
};

/// Filesystem view (needs the mount namespace). Paths are absolute host paths.
struct FilesystemSpec {
    std::vector<std::string> read_only;    ///< bind-mounted read-only (recursively)
    std::vector<std::string> read_write;   ///< kept (or made) writable, applied after read_only
    std::vector<std::string> hidden;       ///< replaced by an empty, read-only directory
    std::map<std::string, uint64_t> tmpfs; ///< path -> size in bytes; fresh and writable
    std::string hostname = "corral";       ///< with the uts namespace

    bool operator==(const FilesystemSpec&) const = default;  ///< field-wise
};

/// The egress modes of an isolated session, one to one with the AI SDK's setNetworkPolicy.
enum class EgressMode {
    deny_all,   ///< nothing outside (the default of `network: isolated`)
    allow_all,  ///< every destination except denied CIDRs and the protected ranges
    custom,     ///< allowedHosts and allowedCIDRs, minus deniedCIDRs
};

/// `network.egress` (and PATCH /v1/sessions/{sid}/network): which destinations the daemon
/// connects a session to. Entries are kept as written; policies/egress_rules.hpp checks and
/// compiles them.
struct EgressSpec {
    EgressMode mode = EgressMode::deny_all;
    std::vector<std::string> allowed_hosts;  ///< "registry.npmjs.org", "*.example.com"
    std::vector<std::string> allowed_cidrs;  ///< "10.0.0.0/8", "2001:db8::/32", "192.0.2.7"
    std::vector<std::string> denied_cidrs;   ///< win over both allow lists

    bool operator==(const EgressSpec&) const = default;  ///< field-wise
};

/// Network: leased host ports, the host loopback allow-list (host:port) and the egress policy.
struct NetworkSpec {
    unsigned ports = 0;
    std::vector<std::string> allow;
    EgressSpec egress;

    bool operator==(const NetworkSpec&) const = default;  ///< field-wise
};

/// seccomp filter. `preset` is "default", "strict" or "none"; deny/allow hold syscall names and
/// "@group" names (policies/syscall_groups.hpp). deny wins over allow.
struct SeccompSpec {
    std::string preset = "none";
    std::vector<std::string> deny;
    std::vector<std::string> allow;
    SeccompAction action = SeccompAction::errno_code;
    int errno_value = 1;  ///< EPERM; returned with action errno_code
    /// `ptrace: own`: the job may trace its own processes (gdb, strace, ASan/LSan): ptrace,
    /// process_vm_readv/writev and personality(ADDR_NO_RANDOMIZE) are allowed. Only with a pid
    /// namespace of the session's own, so nothing outside the session can even be named.
    bool ptrace_own = false;

    bool operator==(const SeccompSpec&) const = default;  ///< field-wise
};

/// Capabilities kept (names like "CAP_NET_BIND_SERVICE" or "net_bind_service"); all others are
/// cleared from every set, including the bounding set.
struct CapabilitySpec {
    bool inherit = false;  ///< keep whatever the caller has (preset `none`)
    std::vector<std::string> keep;

    bool operator==(const CapabilitySpec&) const = default;  ///< field-wise
};

/// Landlock: paths readable and writable; everything else denied. Empty = Landlock off.
struct LandlockSpec {
    std::vector<std::string> read;
    std::vector<std::string> write;
    bool enabled() const { return !read.empty() || !write.empty(); }

    bool operator==(const LandlockSpec&) const = default;  ///< field-wise
};

/// A whole, resolved policy.
struct Policy {
    std::string name;
    std::vector<std::string> extends_chain;  ///< presets/files this was built from, outermost last
    UserSpec user;
    EnvSpec env;
    WorkdirSpec workdir;
    Limits limits;
    Timeouts timeouts;
    NamespaceSpec namespaces;
    FilesystemSpec filesystem;
    NetworkSpec network;
    SeccompSpec seccomp;
    CapabilitySpec capabilities;
    LandlockSpec landlock;
    Enforcement enforcement = Enforcement::strict;
    /// Runs `command` strings as `shell -c COMMAND` (absolute path inside the sandbox); "" =
    /// /bin/bash where the sandbox has it, else /bin/sh.
    std::string shell;
    bool no_new_privs = true;  ///< always true; kept here so reports can show it

    bool operator==(const Policy&) const = default;  ///< field-wise
};

}  // namespace corral
