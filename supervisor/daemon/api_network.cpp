// PATCH /v1/sessions/{sid}/network: the AI SDK's setNetworkPolicy. The body is the SDK's shape,
// {mode, allowedHosts?, allowedCIDRs?, deniedCIDRs?}; it replaces the session's egress rules for
// every new connection (open ones keep going) and answers with the session's egress record.

#include "policies/egress_rules.hpp"
#include "supervisor/daemon/api.hpp"
#include "supervisor/daemon/api_json.hpp"
#include "supervisor/daemon/json_fields.hpp"

namespace corral::daemon {
namespace {

EgressSpec parse_network_patch(std::string_view body) {
    const auto json = parse_json_object(body);
    ObjectReader r(json);
    EgressSpec spec;
    const auto mode = r.string("mode");
    if (!mode)
        throw ApiFailure(bad_request("missing_field",
                                     "field `mode` is required: allow-all, deny-all or custom"));
    const auto parsed_mode = egress_mode_from(*mode);
    if (!parsed_mode)
        throw ApiFailure(bad_request("invalid", "field `mode` must be allow-all, deny-all or "
                                                "custom, not `" + mode->substr(0, 64) + "`"));
    spec.mode = *parsed_mode;
    spec.allowed_hosts = r.string_list("allowedHosts").value_or(std::vector<std::string>{});
    spec.allowed_cidrs = r.string_list("allowedCIDRs").value_or(std::vector<std::string>{});
    spec.denied_cidrs = r.string_list("deniedCIDRs").value_or(std::vector<std::string>{});
    r.finish();
    // Each list is bounded so that judging a connection stays cheap whatever a caller sends.
    for (const auto* list : {&spec.allowed_hosts, &spec.allowed_cidrs, &spec.denied_cidrs})
        if (list->size() > kMaxEgressEntries)
            throw ApiFailure(bad_request("invalid", "at most " + std::to_string(kMaxEgressEntries) +
                                                        " entries per list"));
    if (auto checked = check_egress_spec(spec); !checked)
        throw ApiFailure(bad_request("invalid", checked.error().message));
    return spec;
}

}  // namespace

asio::awaitable<void> Api::patch_network(Exchange& ex, const RouteParams& params, const Caller&) {
    const std::string body = co_await ex.read_body(kJsonBodyLimit);
    const EgressSpec spec = parse_network_patch(body);
    auto egress = sessions_.set_egress(params.at("sid"), spec);
    if (!egress && egress.error().code == ENOTSUP)
        throw ApiFailure({409, "not_isolated", egress.error().describe(), nullptr});
    const nlohmann::json reply = {{"egress", egress_json(take(std::move(egress)))}};
    co_await ex.send_json(200, reply);
}

}  // namespace corral::daemon
