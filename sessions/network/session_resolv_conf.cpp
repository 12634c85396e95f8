#include "sessions/network/session_resolv_conf.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/unique_fd.hpp"
#include "sessions/network/dns_resolver.hpp"

namespace corral {

std::string session_resolv_conf_text() {
    // No `search`: a bare name is asked as it is, once. attempts/timeout: a dropped UDP answer
    // (only under a flood, see dns_resolver.hpp) costs two seconds, not the default five.
    return "# corral: this session's own resolver; it answers the names the session's egress\n"
           "# policy allows (docs/EGRESS.md).\n"
           "nameserver " +
           std::string(kSessionResolverAddress) +
           "\n"
           "options timeout:2 attempts:2\n";
}

Result<std::string> write_session_resolv_conf(const std::string& state_dir) {
    const std::string path = state_dir + "/resolv.conf";
    const std::string temporary = path + ".new";
    ::unlink(temporary.c_str());
    UniqueFd fd(
        ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0444));
    if (!fd) return sys_error("create `" + temporary + "`");
    const std::string text = session_resolv_conf_text();
    if (::write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size()))
        return sys_error("write `" + temporary + "`");
    if (::fchmod(fd.get(), 0444) != 0) return sys_error("chmod `" + temporary + "`");
    fd.reset();
    if (::rename(temporary.c_str(), path.c_str()) != 0)
        return sys_error("rename to `" + path + "`");
    return path;
}

}  // namespace corral
