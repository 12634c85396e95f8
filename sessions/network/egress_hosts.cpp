#include "sessions/network/egress_hosts.hpp"

#include <cctype>
#include <fstream>
#include <sstream>

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
    std::ifstream in(path);
    if (!in) return sys_error("open `" + path + "`");
    std::stringstream text;
    text << in.rdbuf();
    auto hosts = parse_egress_hosts(text.str());
    if (!hosts) return std::move(hosts.error().context("egress hosts file `" + path + "`"));
    return hosts;
}

}  // namespace corral
