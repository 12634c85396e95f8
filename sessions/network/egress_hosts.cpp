#include "sessions/network/egress_hosts.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <sstream>

#include "base/unique_fd.hpp"

namespace corral {
namespace {

std::string normal_name(std::string name) {
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (!name.empty() && name.back() == '.') name.pop_back();
    return name;
}

}  // namespace

const std::vector<IpAddress>* EgressHosts::find(std::string name) const {
    auto found = names.find(normal_name(std::move(name)));
    return found == names.end() ? nullptr : &found->second;
}

Result<EgressHosts> parse_egress_hosts(const std::string& text) {
    EgressHosts hosts;
    std::istringstream in(text);
    std::string line;
    for (size_t number = 1; std::getline(in, line); ++number) {
        if (const size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
        std::istringstream words(line);
        std::string address_text, name;
        if (!(words >> address_text)) continue;
        const std::string where = "line " + std::to_string(number) + ": ";
        auto address = IpAddress::parse(address_text);
        if (!address) return sys_error(EINVAL, where + "`" + address_text + "` is not an address");
        bool any = false;
        while (words >> name) {
            if (name.starts_with("*") || !check_host_pattern(name).empty())
                return sys_error(EINVAL, where + "`" + name + "` is not a host name");
            hosts.names[normal_name(name)].push_back(*address);
            any = true;
        }
        if (!any) return sys_error(EINVAL, where + "an address without a name");
    }
    return hosts;
}

Result<EgressHosts> load_egress_hosts(const std::string& path) {
    // O_NONBLOCK and the type check: a FIFO or a device named by mistake must not hang the
    // daemon's start nor feed it forever.
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
    if (!fd) return sys_error("open egress hosts file `" + path + "`");
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) return sys_error("stat `" + path + "`");
    if (!S_ISREG(st.st_mode))
        return sys_error(EINVAL, "egress hosts file `" + path + "` is not a regular file");
    if (st.st_size > static_cast<off_t>(kMaxHostsFileBytes))
        return sys_error(EFBIG, "egress hosts file `" + path + "` is larger than " +
                                    std::to_string(kMaxHostsFileBytes) + " bytes");
    std::string text(static_cast<size_t>(st.st_size), '\0');
    size_t done = 0;
    while (done < text.size()) {
        const ssize_t n = ::read(fd.get(), text.data() + done, text.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return sys_error("read `" + path + "`");
        if (n == 0) break;
        done += static_cast<size_t>(n);
    }
    text.resize(done);
    auto hosts = parse_egress_hosts(text);
    if (!hosts) return std::move(hosts.error().context("egress hosts file `" + path + "`"));
    return hosts;
}

}  // namespace corral
