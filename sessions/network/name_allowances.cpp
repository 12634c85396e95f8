#include "sessions/network/name_allowances.hpp"

namespace corral {

NameAllowances::Change NameAllowances::grant(const IpAddress& address, const std::string& name,
                                             bool pinned, Clock::time_point expires) {
    Change change;
    auto found = table_.find(address);
    if (found != table_.end()) {
        found->second = {name, pinned, expires};
        return change;
    }
    if (table_.size() >= max_) {
        auto soonest = table_.begin();
        for (auto it = table_.begin(); it != table_.end(); ++it)
            if (it->second.expires < soonest->second.expires) soonest = it;
        change.dropped.push_back(soonest->first);
        table_.erase(soonest);
    }
    table_.emplace(address, NameAllowance{name, pinned, expires});
    change.added.push_back(address);
    return change;
}

const NameAllowance* NameAllowances::find(const IpAddress& address, Clock::time_point now) const {
    auto found = table_.find(address);
    if (found == table_.end() || found->second.expires <= now) return nullptr;
    return &found->second;
}

std::vector<IpAddress> NameAllowances::expire(Clock::time_point now) {
    return remove_if([now](const NameAllowance& allowance) { return allowance.expires <= now; });
}

std::vector<IpAddress> NameAllowances::remove_if(
    const std::function<bool(const NameAllowance&)>& drop) {
    std::vector<IpAddress> gone;
    for (auto it = table_.begin(); it != table_.end();) {
        if (drop(it->second)) {
            gone.push_back(it->first);
            it = table_.erase(it);
        } else {
            ++it;
        }
    }
    return gone;
}

std::vector<IpAddress> NameAllowances::addresses() const {
    std::vector<IpAddress> out;
    for (const auto& [address, allowance] : table_) out.push_back(address);
    return out;
}

std::vector<IpAddress> NameAllowances::clear() {
    auto out = addresses();
    table_.clear();
    return out;
}

}  // namespace corral
