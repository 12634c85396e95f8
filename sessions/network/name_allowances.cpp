#include "sessions/network/name_allowances.hpp"

#include <algorithm>

namespace corral {

NameAllowances::Clock::time_point NameAllowances::last_expiry(
    const std::vector<NameAllowance>& names) {
    Clock::time_point last{};
    for (const auto& allowance : names) last = std::max(last, allowance.expires);
    return last;
}

NameAllowances::Change NameAllowances::grant(const IpAddress& address, const std::string& name,
                                             bool pinned, Clock::time_point expires) {
    Change change;
    auto found = table_.find(address);
    if (found != table_.end()) {
        auto& names = found->second;
        for (auto& allowance : names)
            if (allowance.name == name) {
                allowance = {name, pinned, expires};
                return change;
            }
        if (names.size() >= kMaxNamesPerAddress)
            names.erase(std::min_element(names.begin(), names.end(),
                                         [](const NameAllowance& a, const NameAllowance& b) {
                                             return a.expires < b.expires;
                                         }));
        names.push_back({name, pinned, expires});
        return change;
    }
    if (table_.size() >= max_) {
        auto soonest = table_.begin();
        for (auto it = table_.begin(); it != table_.end(); ++it)
            if (last_expiry(it->second) < last_expiry(soonest->second)) soonest = it;
        change.dropped.push_back(soonest->first);
        table_.erase(soonest);
    }
    table_.emplace(address, std::vector<NameAllowance>{{name, pinned, expires}});
    change.added.push_back(address);
    return change;
}

std::vector<const NameAllowance*> NameAllowances::find(const IpAddress& address,
                                                       Clock::time_point now) const {
    std::vector<const NameAllowance*> live;
    auto found = table_.find(address);
    if (found == table_.end()) return live;
    for (const auto& allowance : found->second)
        if (allowance.expires > now) live.push_back(&allowance);
    return live;
}

std::vector<IpAddress> NameAllowances::expire(Clock::time_point now) {
    return remove_if([now](const NameAllowance& allowance) { return allowance.expires <= now; });
}

std::vector<IpAddress> NameAllowances::remove_if(
    const std::function<bool(const NameAllowance&)>& drop) {
    std::vector<IpAddress> gone;
    for (auto it = table_.begin(); it != table_.end();) {
        std::erase_if(it->second, drop);
        if (it->second.empty()) {
            gone.push_back(it->first);
            it = table_.erase(it);
        } else {
            ++it;
        }
    }
    return gone;
}

std::optional<NameAllowances::Clock::time_point> NameAllowances::next_expiry() const {
    std::optional<Clock::time_point> next;
    for (const auto& [address, names] : table_)
        for (const auto& allowance : names)
            if (!next || allowance.expires < *next) next = allowance.expires;
    return next;
}

std::vector<IpAddress> NameAllowances::addresses() const {
    std::vector<IpAddress> out;
    for (const auto& [address, names] : table_) out.push_back(address);
    return out;
}

std::vector<IpAddress> NameAllowances::clear() {
    auto out = addresses();
    table_.clear();
    return out;
}

}  // namespace corral
