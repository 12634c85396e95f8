#include "isolation/namespaces.hpp"

#include <fcntl.h>
#include <linux/sched.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "base/file_io.hpp"
#include "base/pipe.hpp"
#include "isolation/child_report.hpp"
#include "isolation/pid_ref.hpp"

namespace corral {

int namespace_clone_flags(const NamespaceSpec& spec) {
    int flags = 0;
    if (spec.pid) flags |= CLONE_NEWPID;
    if (spec.mount) flags |= CLONE_NEWNS;
    if (spec.ipc) flags |= CLONE_NEWIPC;
    if (spec.uts) flags |= CLONE_NEWUTS;
    if (spec.user) flags |= CLONE_NEWUSER;
    if (spec.network == NetworkMode::isolated) flags |= CLONE_NEWNET;
    return flags;
}

namespace {

std::string map_line(IdMapping m) {
    return std::to_string(m.inside) + " " + std::to_string(m.outside) + " " +
           std::to_string(m.count) + "\n";
}

}  // namespace

Status write_id_maps(pid_t child, IdMapping uid, IdMapping gid, bool deny_setgroups) {
    std::string proc = "/proc/" + std::to_string(child);
    if (deny_setgroups) CORRAL_TRY(write_file(proc + "/setgroups", "deny"), "user namespace");
    CORRAL_TRY(write_file(proc + "/uid_map", map_line(uid)), "user namespace: uid_map");
    CORRAL_TRY(write_file(proc + "/gid_map", map_line(gid)), "user namespace: gid_map");
    return {};
}

Result<UniqueFd> make_mapping_namespace(IdMapping uid, IdMapping gid) {
    auto hold = make_pipe();
    if (!hold) return std::move(hold.error());
    int pidfd = -1;
    pid_t pid = clone3_fork(CLONE_NEWUSER | CLONE_PIDFD, -1, &pidfd);
    if (pid < 0) return sys_error("clone a user namespace for an idmapped mount");
    if (pid == 0) {
        // Only waits until the parent has what it needs (EOF on the pipe), then exits.
        char byte;
        hold->write_end.reset();
        while (::read(hold->read_end.get(), &byte, 1) < 0 && errno == EINTR) {
        }
        ::_exit(0);
    }
    PidRef helper(pid, UniqueFd(pidfd));
    hold->read_end.reset();
    Result<UniqueFd> out = UniqueFd();
    auto mapped = write_id_maps(pid, uid, gid, false);
    if (!mapped) {
        out = std::move(mapped.error());
    } else {
        std::string path = "/proc/" + std::to_string(pid) + "/ns/user";
        UniqueFd ns(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
        if (ns)
            out = std::move(ns);
        else
            out = sys_error("open `" + path + "`");
    }
    hold->write_end.reset();  // the helper exits; its namespace lives on through our fd
    (void)helper.wait();
    return out;
}

bool become_namespace_root(bool drop_supplementary_groups) noexcept {
    if (drop_supplementary_groups && ::syscall(SYS_setgroups, 0, nullptr) != 0) return false;
    return ::syscall(SYS_setresgid, 0, 0, 0) == 0 && ::syscall(SYS_setresuid, 0, 0, 0) == 0;
}

bool bring_loopback_up() noexcept {
    int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    ifreq request{};
    const char name[] = "lo";
    for (size_t i = 0; i < sizeof name; ++i) request.ifr_name[i] = name[i];
    bool ok = ::ioctl(fd, SIOCGIFFLAGS, &request) == 0;
    if (ok) {
        request.ifr_flags |= IFF_UP;
        ok = ::ioctl(fd, SIOCSIFFLAGS, &request) == 0;
    }
    int saved = errno;
    ::close(fd);
    errno = saved;
    return ok;
}

bool set_hostname(const char* name, size_t length) noexcept {
    return ::sethostname(name, length) == 0;
}

}  // namespace corral
