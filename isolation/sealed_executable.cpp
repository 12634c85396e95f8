#include "isolation/sealed_executable.hpp"

#include <fcntl.h>
#include <linux/memfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <string>

namespace corral {
namespace {

#ifndef MFD_EXEC
constexpr unsigned kMfdExec = 0x0010U;  // Linux 6.3: ask for an executable memfd explicitly
#else
constexpr unsigned kMfdExec = MFD_EXEC;
#endif

}  // namespace

Result<UniqueFd> sealed_executable(std::span<const unsigned char> bytes, const char* name) {
    if (bytes.empty()) return sys_error(ENOEXEC, std::string("memfd `") + name + "`: no program");
    // From Linux 6.3 a memfd is executable only when asked (MFD_EXEC) where vm.memfd_noexec is 1;
    // an older kernel knows no such flag (EINVAL) and makes every memfd executable.
    int fd = static_cast<int>(
        ::memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING | kMfdExec));
    if (fd < 0 && errno == EINVAL) fd = ::memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) return sys_error(std::string("memfd_create `") + name + "`");
    UniqueFd memfd(fd);
    for (size_t done = 0; done < bytes.size();) {
        const ssize_t n = ::write(memfd.get(), bytes.data() + done, bytes.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return sys_error(std::string("write memfd `") + name + "`");
        done += static_cast<size_t>(n);
    }
    if (::fcntl(memfd.get(), F_ADD_SEALS,
                F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE) != 0)
        return sys_error(std::string("seal memfd `") + name + "`");
    return memfd;
}

}  // namespace corral
