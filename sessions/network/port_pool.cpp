#include "sessions/network/port_pool.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "base/unique_fd.hpp"

namespace corral {

bool loopback_port_is_free(uint16_t port) {
    UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd) return false;
    int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return ::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0;
}

Result<std::unique_ptr<PortPool>> PortPool::create(uint16_t first, uint16_t last) {
    if (first == 0 || first > last) {
        return sys_error(EINVAL, "port range " + std::to_string(first) + "-" +
                                     std::to_string(last) + " is empty or starts at 0");
    }
    return std::unique_ptr<PortPool>(new PortPool(first, last));
}

PortPool::PortPool(uint16_t first, uint16_t last) : first_(first), last_(last), cursor_(first) {}

Status PortPool::claim(uint16_t port, const std::string& owner) {
    std::lock_guard lock(mutex_);
    if (port < first_ || port > last_)
        return sys_error(EINVAL, "port " + std::to_string(port) + " is outside the pool's range " +
                                     std::to_string(first_) + "-" + std::to_string(last_));
    if (leases_.count(port) != 0)
        return sys_error(EBUSY, "port " + std::to_string(port) + " is leased to " +
                                    leases_.at(port));
    leases_[port] = owner;
    return {};
}

Result<uint16_t> PortPool::lease(const std::string& owner) {
    std::lock_guard lock(mutex_);
    const uint32_t span = uint32_t{last_} - first_ + 1;
    uint32_t busy_elsewhere = 0;
    for (uint32_t tried = 0; tried < span; ++tried) {
        uint16_t port = static_cast<uint16_t>(cursor_);
        cursor_ = cursor_ == last_ ? first_ : cursor_ + 1;
        if (leases_.count(port)) continue;
        // The probe runs under the lock: it is one socket+bind, and holding the lock keeps two
        // threads from probing and taking the same port.
        if (!loopback_port_is_free(port)) {
            ++busy_elsewhere;
            continue;
        }
        leases_.emplace(port, owner);
        return port;
    }
    return sys_error(EADDRNOTAVAIL, "no free loopback port in range " + std::to_string(first_) +
                                        "-" + std::to_string(last_) + " (" +
                                        std::to_string(leases_.size()) + " leased, " +
                                        std::to_string(busy_elsewhere) +
                                        " in use by other programs)");
}

bool PortPool::release(uint16_t port) {
    std::lock_guard lock(mutex_);
    return leases_.erase(port) > 0;
}

std::vector<uint16_t> PortPool::release_all(const std::string& owner) {
    std::lock_guard lock(mutex_);
    std::vector<uint16_t> released;
    for (auto it = leases_.begin(); it != leases_.end();) {
        if (it->second == owner) {
            released.push_back(it->first);
            it = leases_.erase(it);
        } else {
            ++it;
        }
    }
    return released;
}

std::vector<uint16_t> PortPool::leases_of(const std::string& owner) const {
    std::lock_guard lock(mutex_);
    std::vector<uint16_t> ports;
    for (const auto& [port, who] : leases_) {
        if (who == owner) ports.push_back(port);
    }
    return ports;
}

std::optional<std::string> PortPool::owner_of(uint16_t port) const {
    std::lock_guard lock(mutex_);
    auto it = leases_.find(port);
    if (it == leases_.end()) return std::nullopt;
    return it->second;
}

std::size_t PortPool::leased_count() const {
    std::lock_guard lock(mutex_);
    return leases_.size();
}

}  // namespace corral
