#include "isolation/namespaces.hpp"

#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "base/file_io.hpp"

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

Status write_id_maps(pid_t child, uid_t outside_uid, gid_t outside_gid) {
    std::string proc = "/proc/" + std::to_string(child);
    CORRAL_TRY(write_file(proc + "/setgroups", "deny"), "user namespace");
    CORRAL_TRY(write_file(proc + "/uid_map", "0 " + std::to_string(outside_uid) + " 1\n"),
               "user namespace");
    CORRAL_TRY(write_file(proc + "/gid_map", "0 " + std::to_string(outside_gid) + " 1\n"),
               "user namespace");
    return {};
}

bool become_namespace_root() noexcept {
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
