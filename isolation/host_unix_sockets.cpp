#include "isolation/host_unix_sockets.hpp"

#include <dirent.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <set>

#include "base/file_io.hpp"
#include "base/unique_fd.hpp"

namespace corral {
namespace {

/// A sock_diag dump of every unix socket with a name attribute, or nothing when the kernel
/// cannot answer one (no unix_diag, a refused netlink socket): the caller falls back to text.
///
/// Why not /proc/net/unix alone: its text prints a name's bytes as they are, so a socket bound at
/// "/var/tmp/x\nrest" was read as two lines and lost its mask (the sandbox connected to it: found
/// in round 2, stop 36), and formatting a line per socket is much of a session's start beside
/// 1,000 sessions (two socketpairs each: ~1 ms of seq_printf per creation, issue 18).
std::optional<std::vector<BoundUnixSocket>> dump_sock_diag() {
    UniqueFd fd(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG));
    if (!fd.valid()) return std::nullopt;
    struct {
        nlmsghdr header;
        unix_diag_req body;
    } request{};
    request.header.nlmsg_len = sizeof request;
    request.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    request.header.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    request.header.nlmsg_seq = 1;
    request.body.sdiag_family = AF_UNIX;
    request.body.udiag_states = ~0u;  // every state, as /proc/net/unix lists them
    request.body.udiag_show = UDIAG_SHOW_NAME | UDIAG_SHOW_VFS;
    sockaddr_nl kernel{};
    kernel.nl_family = AF_NETLINK;
    if (::sendto(fd.get(), &request, sizeof request, 0, reinterpret_cast<sockaddr*>(&kernel),
                 sizeof kernel) != static_cast<ssize_t>(sizeof request))
        return std::nullopt;

    std::vector<BoundUnixSocket> out;
    alignas(nlmsghdr) static thread_local char buffer[64 * 1024];
    for (;;) {
        const ssize_t got = ::recv(fd.get(), buffer, sizeof buffer, 0);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return std::nullopt;
        size_t left = static_cast<size_t>(got);
        for (auto* header = reinterpret_cast<nlmsghdr*>(buffer); NLMSG_OK(header, left);
             header = NLMSG_NEXT(header, left)) {
            if (header->nlmsg_seq != request.header.nlmsg_seq) continue;
            if (header->nlmsg_type == NLMSG_DONE) return out;
            // An error (no unix_diag in this kernel: ENOENT) or anything unexpected: the text.
            if (header->nlmsg_type != SOCK_DIAG_BY_FAMILY) return std::nullopt;
            if (header->nlmsg_len < NLMSG_LENGTH(sizeof(unix_diag_msg))) return std::nullopt;
            const auto* message = static_cast<const unix_diag_msg*>(NLMSG_DATA(header));
            BoundUnixSocket socket;
            socket.socket_inode = message->udiag_ino;
            size_t attributes = header->nlmsg_len - NLMSG_LENGTH(sizeof *message);
            for (auto* attribute = reinterpret_cast<rtattr*>(
                     const_cast<unix_diag_msg*>(message) + 1);
                 RTA_OK(attribute, attributes); attribute = RTA_NEXT(attribute, attributes)) {
                const char* data = static_cast<const char*>(RTA_DATA(attribute));
                const size_t size = RTA_PAYLOAD(attribute);
                if (attribute->rta_type == UNIX_DIAG_NAME) {
                    // sun_path's bytes: an abstract name starts with NUL (none here: no file),
                    // a path may end in the NUL its binder counted.
                    socket.name.assign(data, strnlen(data, size));
                } else if (attribute->rta_type == UNIX_DIAG_VFS && size >= sizeof(unix_diag_vfs)) {
                    unix_diag_vfs vfs;
                    std::memcpy(&vfs, data, sizeof vfs);
                    // The kernel's dev_t (12-bit major above a 20-bit minor), not st_dev's.
                    socket.device = ::makedev(vfs.udiag_vfs_dev >> 20, vfs.udiag_vfs_dev & 0xfffff);
                    socket.inode = vfs.udiag_vfs_ino;
                }
            }
            if (!socket.name.empty()) out.push_back(std::move(socket));
        }
    }
}

/// /proc/net/unix's names, where sock_diag cannot answer. "Num RefCount Protocol Flags Type St
/// Inode Path": the path is what follows field 7 (a path's spaces stay; a newline ends it).
std::vector<BoundUnixSocket> read_proc_net_unix() {
    std::vector<BoundUnixSocket> out;
    auto text = read_file("/proc/net/unix");
    if (!text) return out;
    size_t pos = text->find('\n');  // header line
    while (pos != std::string::npos && pos + 1 < text->size()) {
        size_t end = text->find('\n', pos + 1);
        std::string line = text->substr(pos + 1, end == std::string::npos ? end : end - pos - 1);
        pos = end;
        size_t field = 0, i = 0;
        while (i < line.size() && field < 7) {
            while (i < line.size() && line[i] == ' ') ++i;
            while (i < line.size() && line[i] != ' ') ++i;
            ++field;
        }
        while (i < line.size() && line[i] == ' ') ++i;
        if (i < line.size() && line[i] == '/') out.push_back({line.substr(i), 0, 0});
    }
    return out;
}

/// Whether `st` may be `socket`'s file by its inode number. The device is not compared, and
/// cannot be: on overlayfs (a container's root, CI runners) stat() says the upper layer's device
/// for a file while the kernel names the socket by the overlay's. An inode match among sockets
/// errs only toward masking one more.
bool same_inode(const BoundUnixSocket& socket, const struct stat& st) {
    return static_cast<uint32_t>(st.st_ino) == static_cast<uint32_t>(socket.inode);
}

/// The socket files of one directory by (32-bit) inode number, read once per call of
/// host_unix_socket_files however many renamed sockets name it.
class DirectorySockets {
  public:
    std::optional<std::string> find(const std::string& dir, const BoundUnixSocket& socket) {
        auto [it, fresh] = dirs_.try_emplace(dir);
        if (fresh) it->second = read(dir);
        auto entry = it->second.find(static_cast<uint32_t>(socket.inode));
        if (entry == it->second.end()) return std::nullopt;
        const std::string path = dir == "/" ? "/" + entry->second : dir + "/" + entry->second;
        struct stat st;
        if (::lstat(path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode) || !same_inode(socket, st))
            return std::nullopt;
        return path;
    }

  private:
    static std::multimap<uint32_t, std::string> read(const std::string& dir) {
        std::multimap<uint32_t, std::string> found;
        DIR* listing = ::opendir(dir.c_str());
        if (listing == nullptr) return found;
        while (const dirent* entry = ::readdir(listing))
            if (entry->d_type == DT_SOCK || entry->d_type == DT_UNKNOWN)
                found.emplace(static_cast<uint32_t>(entry->d_ino), entry->d_name);
        ::closedir(listing);
        return found;
    }
    std::map<std::string, std::multimap<uint32_t, std::string>> dirs_;
};

/// The working directories of the processes holding each of `wanted` (socket inode numbers):
/// every /proc/<pid>/fd entry read once, its link compared with "socket:[N]".
std::map<ino_t, std::set<std::string>> holder_directories(const std::set<ino_t>& wanted) {
    std::map<ino_t, std::set<std::string>> found;
    DIR* processes = ::opendir("/proc");
    if (processes == nullptr) return found;
    while (const dirent* process = ::readdir(processes)) {
        if (process->d_name[0] < '1' || process->d_name[0] > '9') continue;
        const std::string pid_dir = std::string("/proc/") + process->d_name;
        DIR* fds = ::opendir((pid_dir + "/fd").c_str());
        if (fds == nullptr) continue;  // gone, or not ours to read
        std::set<ino_t> held;
        while (const dirent* fd = ::readdir(fds)) {
            if (fd->d_name[0] == '.') continue;
            char link[64];
            const ssize_t n = ::readlinkat(::dirfd(fds), fd->d_name, link, sizeof link - 1);
            if (n <= 8 || std::memcmp(link, "socket:[", 8) != 0) continue;
            link[n] = '\0';
            const ino_t inode = std::strtoull(link + 8, nullptr, 10);
            if (wanted.count(inode) != 0) held.insert(inode);
        }
        ::closedir(fds);
        if (held.empty()) continue;
        char cwd[PATH_MAX];
        const ssize_t n = ::readlink((pid_dir + "/cwd").c_str(), cwd, sizeof cwd - 1);
        if (n <= 0 || cwd[0] != '/') continue;
        for (ino_t inode : held) found[inode].insert(std::string(cwd, static_cast<size_t>(n)));
    }
    ::closedir(processes);
    return found;
}

/// Where relatively named sockets were found (or not: nullopt), by socket inode, for as long as
/// they are listed: finding one reads every process's descriptors, which a host with one such
/// socket must not pay at every session's start.
class RelativeNames {
  public:
    /// The absolute names to try for each relatively named socket of `listed`.
    std::map<ino_t, std::set<std::string>> resolve(const std::vector<BoundUnixSocket>& listed) {
        std::lock_guard lock(mutex_);
        std::set<ino_t> present, unknown;
        for (const auto& socket : listed) {
            if (socket.name.front() == '/' || socket.socket_inode == 0) continue;
            present.insert(socket.socket_inode);
            if (known_.count(socket.socket_inode) == 0) unknown.insert(socket.socket_inode);
        }
        std::erase_if(known_, [&](const auto& entry) { return present.count(entry.first) == 0; });
        if (!unknown.empty()) {
            auto directories = holder_directories(unknown);
            for (ino_t inode : unknown) known_[inode] = std::move(directories[inode]);
        }
        std::map<ino_t, std::set<std::string>> names;
        for (const auto& socket : listed) {
            auto it = known_.find(socket.socket_inode);
            if (socket.name.front() == '/' || it == known_.end()) continue;
            for (const auto& dir : it->second)
                names[socket.socket_inode].insert(dir == "/" ? "/" + socket.name
                                                             : dir + "/" + socket.name);
        }
        return names;
    }

  private:
    std::mutex mutex_;
    std::map<ino_t, std::set<std::string>> known_;  // socket inode -> its holders' directories
};

}  // namespace

std::vector<BoundUnixSocket> bound_unix_sockets() {
    if (auto dumped = dump_sock_diag()) return std::move(*dumped);
    return read_proc_net_unix();
}

std::vector<std::string> host_unix_socket_files() {
    static RelativeNames relative_names;
    std::vector<std::string> out;
    DirectorySockets renamed;
    // Whatever socket file is at `name` (it, or one bound there since: both are masked, as
    // before sock_diag), and, unless that is it, its file renamed within `name`'s directory.
    auto locate = [&](const BoundUnixSocket& socket, const std::string& name) {
        struct stat st;
        bool found_it = false;
        if (::stat(name.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) {
            // Maybe through symbolic links: where it really is.
            auto host = real_path(name);
            if (host && ::lstat(host->c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) {
                found_it = same_inode(socket, st);
                out.push_back(std::move(*host));
            }
        }
        if (found_it || socket.inode == 0) return;
        const size_t slash = name.rfind('/');
        auto dir = real_path(slash == 0 ? "/" : name.substr(0, slash));
        if (!dir) return;
        if (auto found = renamed.find(*dir, socket)) out.push_back(std::move(*found));
    };
    const std::vector<BoundUnixSocket> listed = bound_unix_sockets();
    const auto relative = relative_names.resolve(listed);
    for (const auto& socket : listed) {
        if (socket.name.front() == '/') {
            locate(socket, socket.name);
        } else if (auto names = relative.find(socket.socket_inode); names != relative.end()) {
            for (const auto& name : names->second) locate(socket, name);
        }
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

}  // namespace corral
