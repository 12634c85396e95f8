// Port endpoints: lease, list, release, endpoint URL, wait until something inside accepts.

#include <charconv>

#include "supervisor/daemon/api.hpp"
#include "supervisor/daemon/api_json.hpp"

namespace corral::daemon {
namespace {

/// The {port} path parameter; anything but 1..65535 is a port nobody holds (404).
uint16_t port_param(const RouteParams& params) {
    const std::string& text = params.at("port");
    unsigned value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size() || value == 0 || value > 65535)
        throw ApiFailure({404, "not_found", "no such port `" + text + "`", nullptr});
    return static_cast<uint16_t>(value);
}

}  // namespace

asio::awaitable<void> Api::lease_port(Exchange& ex, const RouteParams& params, const Caller&) {
    // No body fields today; still refuse a malformed or unknown one.
    const std::string body = co_await ex.read_body(kJsonBodyLimit);
    ObjectReader(parse_json_object(body)).finish();
    auto lease = take(sessions_.lease_port(params.at("sid")));
    const nlohmann::json reply = port_json(lease);
    co_await ex.send_json(201, reply);
}

asio::awaitable<void> Api::list_ports(Exchange& ex, const RouteParams& params, const Caller&) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& lease : take(sessions_.list_ports(params.at("sid"))))
        list.push_back(port_json(lease));
    nlohmann::json reply = {{"ports", std::move(list)}};
    co_await ex.send_json(200, reply);
}

asio::awaitable<void> Api::release_port(Exchange& ex, const RouteParams& params, const Caller&) {
    const uint16_t port = port_param(params);
    check(sessions_.release_port(params.at("sid"), port));
    nlohmann::json reply = {{"released", port}};
    co_await ex.send_json(200, reply);
}

asio::awaitable<void> Api::port_endpoint(Exchange& ex, const RouteParams& params, const Caller&) {
    const uint16_t port = port_param(params);
    auto it = ex.query().find("protocol");
    const std::string protocol = it == ex.query().end() ? "http" : it->second;
    auto url = take(sessions_.port_endpoint(params.at("sid"), port, protocol));
    nlohmann::json reply = {{"port", port}, {"protocol", protocol}, {"url", url}};
    co_await ex.send_json(200, reply);
}

asio::awaitable<void> Api::wait_port(Exchange& ex, const RouteParams& params, const Caller&) {
    const uint16_t port = port_param(params);
    Millis timeout{30000};
    if (auto ms = query_millis(ex, "timeoutMs")) timeout = *ms;
    auto event = std::make_shared<AsyncEvent<Status>>(co_await asio::this_coro::executor, waits_);
    WaitHandle handle = sessions_.async_wait_port(
        params.at("sid"), port, timeout, [weak = std::weak_ptr(event)](Status status) {
            if (auto e = weak.lock()) e->set(std::move(status));
        });
    auto outcome = co_await event->wait();
    if (!outcome)
        throw ApiFailure({503, "shutting_down", "the daemon is shutting down", nullptr});
    check(*outcome);
    nlohmann::json reply = {{"port", port}, {"ready", true}};
    co_await ex.send_json(200, reply);
}

}  // namespace corral::daemon
