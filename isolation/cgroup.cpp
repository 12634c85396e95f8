// The v2 cgroup handle: create, watch, measure, kill and remove a subtree.
#include "isolation/cgroup.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sstream>

#include "base/file_io.hpp"

namespace corral {
namespace {

using Clock = std::chrono::steady_clock;

/// Subdirectory names of a directory (each subdirectory of a cgroup is a child cgroup).
Result<std::vector<std::string>> child_names(int parent_fd, const std::string& shown_path) {
    int fd = ::openat(parent_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return sys_error("open `" + shown_path + "`");
    DIR* dir = ::fdopendir(fd);
    if (!dir) {
        ::close(fd);
        return sys_error("fdopendir `" + shown_path + "`");
    }
    std::vector<std::string> names;
    while (dirent* entry = ::readdir(dir)) {
        std::string name = entry->d_name;
        if (entry->d_type == DT_DIR && name != "." && name != "..") names.push_back(name);
    }
    ::closedir(dir);
    return names;
}

/// Appends every pid of the subtree at `dir_fd` (cgroup.procs of it and each descendant).
/// A child that vanishes while we walk (ENOENT) is skipped: it was being removed.
Status collect_pids(int dir_fd, const std::string& shown_path, std::vector<pid_t>& out) {
    auto procs = read_file(dir_fd, "cgroup.procs");
    if (!procs) return std::move(procs.error().context(shown_path));
    std::istringstream lines(*procs);
    for (pid_t pid; lines >> pid;) out.push_back(pid);
    auto children = child_names(dir_fd, shown_path);
    if (!children) return std::move(children.error());
    for (const auto& name : *children) {
        UniqueFd child(::openat(dir_fd, name.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
        if (!child) {
            if (errno == ENOENT) continue;
            return sys_error("open `" + shown_path + "/" + name + "`");
        }
        auto status = collect_pids(child.get(), shown_path + "/" + name, out);
        if (!status && status.error().code != ENOENT) return status;
    }
    return {};
}

/// rmdir of every descendant, deepest first, then of `name` itself (relative to parent_fd).
Status remove_tree(int parent_fd, const std::string& name, const std::string& shown_path) {
    UniqueFd dir(::openat(parent_fd, name.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!dir) return errno == ENOENT ? Status{} : sys_error("open `" + shown_path + "`");
    auto children = child_names(dir.get(), shown_path);
    if (!children) return std::move(children.error());
    for (const auto& child : *children) {
        auto status = remove_tree(dir.get(), child, shown_path + "/" + child);
        if (!status) return status;
    }
    if (::unlinkat(parent_fd, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT)
        return sys_error("rmdir `" + shown_path + "`");
    return {};
}

std::string base_name(const std::string& path) {
    return path.substr(path.find_last_of('/') + 1);
}

std::optional<uint64_t> parse_number(const Result<std::string>& text) {
    if (!text) return std::nullopt;
    try {
        return std::stoull(*text);
    } catch (...) {
        return std::nullopt;  // "max" or empty
    }
}

std::optional<uint64_t> read_number(int dir_fd, const char* name) {
    return parse_number(read_file(dir_fd, name));
}

std::map<std::string, uint64_t> read_keyed(int dir_fd, const char* name) {
    auto text = read_file(dir_fd, name);
    return text ? parse_keyed_values(*text) : std::map<std::string, uint64_t>{};
}

/// Sums rbytes=/wbytes= over the devices of io.stat.
void add_io_stat(int dir_fd, ResourceUsage& usage) {
    auto text = read_file(dir_fd, "io.stat");
    if (!text) return;
    uint64_t read_bytes = 0, write_bytes = 0;
    std::istringstream words(*text);
    for (std::string word; words >> word;) {
        if (word.rfind("rbytes=", 0) == 0) read_bytes += std::stoull(word.substr(7));
        if (word.rfind("wbytes=", 0) == 0) write_bytes += std::stoull(word.substr(7));
    }
    usage.io_read_bytes = read_bytes;
    usage.io_write_bytes = write_bytes;
}

/// SIGKILL each pid; ESRCH (already gone) is not an error. Returns how many were signalled.
size_t signal_pids(const std::vector<pid_t>& pids, int signal) {
    size_t count = 0;
    for (pid_t pid : pids)
        if (pid > 0 && ::kill(pid, signal) == 0) ++count;
    return count;
}

}  // namespace

Cgroup& Cgroup::operator=(Cgroup&& other) noexcept {
    if (this != &other) {
        if (owned_ && valid()) (void)remove();
        path_ = std::move(other.path_);
        dir_ = std::move(other.dir_);
        owned_ = std::exchange(other.owned_, false);
    }
    return *this;
}

Cgroup::~Cgroup() {
    if (owned_ && valid()) (void)remove();
}

Result<Cgroup> Cgroup::open_dir(const std::string& dir, bool owned) {
    Cgroup cgroup;
    cgroup.dir_.reset(::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!cgroup.dir_) return sys_error("open cgroup `" + dir + "`");
    cgroup.path_ = dir;
    cgroup.owned_ = owned;
    return cgroup;
}

Result<Cgroup> Cgroup::create(const std::string& parent_dir, const std::string& name) {
    if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..")
        return plain_error("invalid cgroup name `" + name + "`");
    std::string dir = parent_dir + "/" + name;
    if (::mkdir(dir.c_str(), 0755) != 0) return sys_error("mkdir `" + dir + "`");
    auto cgroup = open_dir(dir, true);
    if (!cgroup) ::rmdir(dir.c_str());  // just created and empty: undo
    return cgroup;
}

Status Cgroup::remove_empty_tree(const std::string& parent_dir, const std::string& name) {
    UniqueFd parent(::open(parent_dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!parent) return sys_error("open `" + parent_dir + "`");
    return remove_tree(parent.get(), name, parent_dir + "/" + name);
}

Result<Cgroup> Cgroup::open_unowned(const std::string& dir) {
    return open_dir(dir, false);
}

Result<Cgroup> Cgroup::adopt(const std::string& dir) {
    return open_dir(dir, true);
}

Result<Cgroup> Cgroup::unowned_view() const {
    Cgroup view;
    view.dir_.reset(::fcntl(dir_.get(), F_DUPFD_CLOEXEC, 0));
    if (!view.dir_) return sys_error("duplicate the descriptor of cgroup `" + path_ + "`");
    view.path_ = path_;
    return view;
}

// Relative to our directory's descriptor: no walk of the absolute path (one per component,
// five or six deep under a session) for the mkdir and again for the open, at every launch.
Result<Cgroup> Cgroup::create_child(const std::string& name) const {
    if (!valid()) return create(path_, name);
    if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..")
        return plain_error("invalid cgroup name `" + name + "`");
    const std::string dir = path_ + "/" + name;
    if (::mkdirat(dir_.get(), name.c_str(), 0755) != 0) return sys_error("mkdir `" + dir + "`");
    Cgroup child;
    child.dir_.reset(::openat(dir_.get(), name.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!child.dir_) {
        Error error = sys_error("open cgroup `" + dir + "`");
        ::unlinkat(dir_.get(), name.c_str(), AT_REMOVEDIR);  // just created and empty: undo
        return error;
    }
    child.path_ = dir;
    child.owned_ = true;
    return child;
}

Result<std::vector<pid_t>> Cgroup::pids() const {
    std::vector<pid_t> out;
    auto status = collect_pids(dir_.get(), path_, out);
    if (!status) return std::move(status.error().context("list pids"));
    return out;
}

Result<std::vector<pid_t>> pids_in_subtree(int dir_fd) {
    std::vector<pid_t> out;
    auto status = collect_pids(dir_fd, "cgroup fd " + std::to_string(dir_fd), out);
    if (!status) return std::move(status.error().context("list pids"));
    return out;
}

Result<bool> Cgroup::populated() const {
    auto text = read_file(dir_.get(), "cgroup.events");
    if (!text) return std::move(text.error().context(path_));
    auto values = parse_keyed_values(*text);
    auto it = values.find("populated");
    if (it == values.end()) return plain_error("no `populated` in `" + path_ + "/cgroup.events`");
    return it->second != 0;
}

namespace {

/// cgroup.events read through `fd` from its start. Reading through the watched descriptor is
/// what re-arms it: kernfs raises POLLPRI while the file changed since this descriptor's last read.
Result<std::map<std::string, uint64_t>> read_events(int fd, const std::string& path) {
    char buf[256];
    ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
    if (n < 0) return sys_error("read `" + path + "/cgroup.events`");
    return parse_keyed_values(std::string(buf, static_cast<size_t>(n)));
}

}  // namespace

// poll(POLLPRI) on cgroup.events itself rather than inotify: an inotify instance costs an RCU
// grace period when closed (~20 ms on the machines we measure on), once per wait.
Result<UniqueFd> Cgroup::watch_events() const {
    UniqueFd fd(::openat(dir_.get(), "cgroup.events", O_RDONLY | O_NONBLOCK | O_CLOEXEC));
    if (!fd) return sys_error("open `" + path_ + "/cgroup.events`");
    auto current = read_events(fd.get(), path_);
    if (!current) return std::move(current.error());
    return fd;
}

Status Cgroup::wait_for_event(const std::string& key, uint64_t value,
                              std::chrono::milliseconds timeout) const {
    auto watch = watch_events();
    if (!watch) return std::move(watch.error());
    auto deadline = Clock::now() + timeout;
    for (;;) {
        // Read (and re-arm) first, then poll: a change after the read still raises POLLPRI.
        auto values = read_events(watch->get(), path_);
        if (!values) return std::move(values.error());
        if (values->count(key) && values->at(key) == value) return {};
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        if (left.count() <= 0)
            return sys_error(ETIMEDOUT, "waiting for `" + key + " " + std::to_string(value) +
                                            "` in `" + path_ + "/cgroup.events`");
        pollfd pfd{watch->get(), POLLPRI, 0};
        int n = ::poll(&pfd, 1, static_cast<int>(left.count()) + 1);
        if (n < 0 && errno != EINTR) return sys_error("poll `" + path_ + "/cgroup.events`");
    }
}

Status Cgroup::wait_until_empty(std::chrono::milliseconds timeout) const {
    return wait_for_event("populated", 0, timeout);
}

Result<size_t> Cgroup::signal_all(int signal) {
    auto list = pids();
    if (!list) return std::move(list.error().context("signal cgroup"));
    return signal_pids(*list, signal);
}

Result<size_t> Cgroup::kill_all(KillMethod method, std::chrono::milliseconds fallback_bound) {
    auto seen = pids();
    size_t count = seen ? seen->size() : 0;
    if (method != KillMethod::freeze_and_signal) {
        auto status = write_file(dir_.get(), "cgroup.kill", "1");
        if (status) return count;
        if (status.error().code != ENOENT || method == KillMethod::kill_file)
            return std::move(status.error().context(path_));
    }
    auto killed = kill_by_freezing(fallback_bound);
    if (!killed) return std::move(killed.error());
    return std::max(count, *killed);
}

// Without cgroup.kill, a tree that forks in a loop would always have a new child we have not
// signalled yet. Freezing the subtree first stops every task (new children are born frozen), so
// one pass over cgroup.procs sees them all and the pids cannot be recycled under us (frozen
// tasks do not exit). SIGKILL is delivered on thaw. Repeat until the kernel says empty, within
// `bound` of waiting in all: a task in uninterruptible sleep delays "frozen 1" and its exit, and
// on corrald's loop nothing may wait for it (issue 12; it used to be up to 100 rounds of 1.2 s).
Result<size_t> Cgroup::kill_by_freezing(std::chrono::milliseconds bound) {
    const auto deadline = Clock::now() + bound;
    auto remaining = [&deadline] {
        return std::max(
            std::chrono::milliseconds(0),
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
    };
    constexpr int max_rounds = 100;
    size_t total = 0;
    for (int round = 0; round < max_rounds; ++round) {
        auto state = populated();
        if (!state) return std::move(state.error().context("kill by freezing"));
        if (!*state) return total;
        if (round > 0 && remaining().count() == 0) break;
        CORRAL_TRY(write_file(dir_.get(), "cgroup.freeze", "1"), "kill by freezing " + path_);
        // Frozen or not by then, what is listed is killed.
        (void)wait_for_event("frozen", 1, std::min(remaining(), std::chrono::milliseconds(1000)));
        auto list = pids();
        if (list) total += signal_pids(*list, SIGKILL);
        CORRAL_TRY(write_file(dir_.get(), "cgroup.freeze", "0"), "thaw " + path_);
        (void)wait_until_empty(std::min(remaining(), std::chrono::milliseconds(200)));
    }
    auto state = populated();
    if (state && !*state) return total;
    return sys_error(EBUSY, "cgroup `" + path_ + "` still populated after freeze-and-kill rounds");
}

Result<ResourceUsage> Cgroup::usage() const {
    ResourceUsage usage;
    auto cpu = read_keyed(dir_.get(), "cpu.stat");
    usage.cpu_total_usec = cpu["usage_usec"];
    usage.cpu_user_usec = cpu["user_usec"];
    usage.cpu_system_usec = cpu["system_usec"];
    // A controller's files are there only where it is enabled for this cgroup: without
    // memory.current there is no memory.peak or memory.events either, and without pids.current
    // no pids file anywhere in the subtree (a child can only have what its parent has). So one
    // failed open per absent controller, not one per file (hybrid hosts, whose v2 tree has no
    // controllers, looked for eight missing files after every run).
    auto memory_current = read_file(dir_.get(), "memory.current");
    if (memory_current || memory_current.error().code != ENOENT) {
        usage.memory_current = parse_number(memory_current);
        usage.memory_peak = read_number(dir_.get(), "memory.peak");
        usage.oom_kills = read_keyed(dir_.get(), "memory.events")["oom_kill"];
    }
    auto pids_current = read_file(dir_.get(), "pids.current");
    if (pids_current || pids_current.error().code != ENOENT) {
        usage.pids_current = parse_number(pids_current);
        usage.pids_peak = read_number(dir_.get(), "pids.peak");
        // Counted where the kernel counts it: the forking task's cgroup (old kernels) or the
        // one whose limit was hit (6.12+), anywhere in this subtree.
        if (auto hits = pids_limit_hits_in_subtree(dir_.get())) usage.pids_limit_hits = *hits;
    }
    add_io_stat(dir_.get(), usage);
    return usage;
}

Status Cgroup::attach(pid_t pid) const {
    CORRAL_TRY(write_file(dir_.get(), "cgroup.procs", std::to_string(pid)),
               "move pid " + std::to_string(pid) + " into cgroup");
    return {};
}

Status Cgroup::remove(std::chrono::milliseconds timeout) {
    if (!valid()) return {};
    if (!owned_) return plain_error("refusing to remove cgroup `" + path_ + "`: not created by us");
    // The common case, a cgroup already empty and without children, is one rmdir; the kernel
    // refuses it (EBUSY) while any process or child cgroup is left, and then we end the subtree.
    if (auto gone = remove_if_empty(); gone && *gone) return {};
    UniqueFd parent(::open(parent_of(path_).c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!parent && errno == ENOENT) {
        dir_.reset();  // removed with its parent
        return {};
    }
    if (!parent) return sys_error("open `" + parent_of(path_) + "`");
    (void)kill_all(KillMethod::automatic, timeout);  // the wait below says whether it worked
    CORRAL_TRY(wait_until_empty(timeout), "remove cgroup");
    CORRAL_TRY(remove_tree(parent.get(), base_name(path_), path_), "remove cgroup");
    dir_.reset();
    return {};
}

Result<bool> Cgroup::remove_if_empty() {
    if (!valid()) return true;
    if (!owned_) return plain_error("refusing to remove cgroup `" + path_ + "`: not created by us");
    if (::rmdir(path_.c_str()) == 0 || errno == ENOENT) {
        dir_.reset();  // removed now, or already (e.g. with its parent)
        return true;
    }
    if (errno == EBUSY) return false;
    return sys_error("rmdir `" + path_ + "`");
}

Result<Cgroup> enter_supervisor_leaf(const CgroupHost& host, const std::string& instance_dir) {
    const std::string& own = host.v2_own;
    bool below = instance_dir.size() > own.size() + 1 &&
                 instance_dir.compare(0, own.size(), own) == 0 && instance_dir[own.size()] == '/';
    if (!below)
        return plain_error("supervisor cgroup `" + instance_dir + "` is not below our cgroup `" +
                           own + "`");
    // mkdir -p below our own cgroup only.
    for (size_t slash = instance_dir.find('/', own.size() + 1);;
         slash = instance_dir.find('/', slash + 1)) {
        std::string dir = instance_dir.substr(0, slash);
        if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
            return sys_error("mkdir `" + dir + "`");
        if (slash == std::string::npos) break;
    }
    std::string leaf = instance_dir + "/supervisor";
    if (::mkdir(leaf.c_str(), 0755) != 0 && errno != EEXIST)
        return sys_error("mkdir `" + leaf + "`");
    auto cgroup = Cgroup::open_unowned(leaf);
    if (!cgroup) return std::move(cgroup.error());
    // "0" moves the writing process with all its threads.
    CORRAL_TRY(write_file(cgroup->dir_fd(), "cgroup.procs", "0"),
               "enter supervisor leaf `" + leaf + "`");
    return cgroup;
}

bool cgroup_kill_supported(const Cgroup& any) {
    return ::faccessat(any.dir_fd(), "cgroup.kill", F_OK, 0) == 0;
}

}  // namespace corral
