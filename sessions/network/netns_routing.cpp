#include "sessions/network/netns_routing.hpp"

#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <nftables/libnftables.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "base/unique_fd.hpp"
#include "sessions/network/netns_visit.hpp"

namespace corral {
namespace {

const Cidr& loopback_v4() {
    static const Cidr cidr = *parse_cidr("127.0.0.0/8");
    return cidr;
}

bool same(const Cidr& a, const Cidr& b) {
    return a.base == b.base && a.prefix == b.prefix;
}

/// An anonymous nftables set of `cidrs`, leaving out those inside another one (and repeats):
/// nftables refuses overlapping intervals in a set.
std::string set_of(const std::vector<Cidr>& cidrs) {
    std::string out;
    for (size_t i = 0; i < cidrs.size(); ++i) {
        bool covered = false;
        for (size_t j = 0; j < cidrs.size() && !covered; ++j)
            covered = j != i && cidrs[i].inside(cidrs[j]) && (!cidrs[j].inside(cidrs[i]) || j < i);
        if (covered) continue;
        out += (out.empty() ? "" : ", ") + cidrs[i].base.to_string() + "/" +
               std::to_string(cidrs[i].prefix);
    }
    return "{ " + out + " }";
}

/// RTM_NEWROUTE / RTM_DELROUTE of `local <cidr> dev lo` in the local table, acknowledged.
Status change_local_route(const Cidr& cidr, bool add) {
    UniqueFd fd(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE));
    if (!fd) return sys_error("netlink socket");
    struct {
        nlmsghdr header;
        rtmsg route;
        char attributes[64];
    } request{};
    request.header.nlmsg_len = NLMSG_LENGTH(sizeof(rtmsg));
    request.header.nlmsg_type = add ? RTM_NEWROUTE : RTM_DELROUTE;
    request.header.nlmsg_flags =
        NLM_F_REQUEST | NLM_F_ACK | (add ? NLM_F_CREATE | NLM_F_REPLACE : 0);
    request.header.nlmsg_seq = 1;
    request.route.rtm_family = AF_INET;
    request.route.rtm_dst_len = static_cast<unsigned char>(cidr.prefix);
    request.route.rtm_table = RT_TABLE_LOCAL;
    request.route.rtm_protocol = RTPROT_STATIC;
    request.route.rtm_scope = RT_SCOPE_HOST;
    request.route.rtm_type = RTN_LOCAL;
    auto add_attribute = [&](unsigned short type, const void* data, size_t length) {
        auto* attribute = reinterpret_cast<rtattr*>(reinterpret_cast<char*>(&request) +
                                                    NLMSG_ALIGN(request.header.nlmsg_len));
        attribute->rta_type = type;
        attribute->rta_len = static_cast<unsigned short>(RTA_LENGTH(length));
        std::memcpy(RTA_DATA(attribute), data, length);
        request.header.nlmsg_len =
            NLMSG_ALIGN(request.header.nlmsg_len) + RTA_ALIGN(attribute->rta_len);
    };
    if (cidr.prefix > 0) add_attribute(RTA_DST, cidr.base.bytes.data(), 4);
    const int loopback = static_cast<int>(::if_nametoindex("lo"));
    add_attribute(RTA_OIF, &loopback, sizeof loopback);
    sockaddr_nl kernel{};
    kernel.nl_family = AF_NETLINK;
    if (::sendto(fd.get(), &request, request.header.nlmsg_len, 0,
                 reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) < 0)
        return sys_error("netlink send");
    char answer[512];
    const ssize_t length = ::recv(fd.get(), answer, sizeof answer, 0);
    if (length < static_cast<ssize_t>(NLMSG_LENGTH(sizeof(nlmsgerr))))
        return sys_error("netlink answer");
    const auto* header = reinterpret_cast<const nlmsghdr*>(answer);
    if (header->nlmsg_type != NLMSG_ERROR) return sys_error(EPROTO, "netlink answer type");
    const int error = -reinterpret_cast<const nlmsgerr*>(NLMSG_DATA(header))->error;
    // Deleting a route the sandbox already removed is not an error worth failing for.
    if (error != 0 && !(error == ESRCH && !add))
        return sys_error(error, std::string(add ? "add" : "delete") + " route local " +
                                    cidr.text + " dev lo");
    return {};
}

/// Runs libnftables on a worker thread with a descriptor table of its own.
///
/// Why: libnftables waits for the kernel's answers with select(), whose fd_set holds only
/// descriptors below FD_SETSIZE (1024), and glibc's fortified FD_SET aborts the process on a
/// larger one ("bit out of range 0 - FD_SETSIZE on fd_set"). corrald raises RLIMIT_NOFILE and
/// holds over a thousand descriptors with ~60 sessions, so the netlink socket libnftables opens
/// got a number above 1024 and corrald died creating the next isolated session
/// (DaemonRobust.HundredsOfMixedSessionsEndedInParallelNeverHang). The worker unshares its
/// descriptor table (CLONE_FILES) and closes everything above stderr in its copy, so the
/// socket is always a low number there and nothing of corrald's is reachable from it.
///
/// One worker serves corrald: its callers run on the namespace thread (netns_runner.hpp), which
/// enters a session's namespace for each job, so the worker enters the caller's namespace for
/// each command (through /proc/self/task/<caller>/ns/net: the caller waits for the answer, so
/// it is in that namespace throughout) and returns to its own after it. A command whose
/// namespace the worker cannot enter fails without running: never in corrald's namespace.
/// Each command gets a context of its own, freed after the caller has its answer: freeing one
/// can cost (closing its netlink socket after a commit that deleted a table waits on the
/// kernel, 6 to 23 ms measured here), so the caller never waits for it; keeping one instead
/// held ~530 KiB (libnftables' cache and parser state) per isolated session for the session's
/// life, most of corrald's memory with many sessions (issue 18's density figures). A new
/// context costs 0.02-0.1 ms.
class NftWorker {
  public:
    NftWorker() : thread_([this] { serve(); }) {}
    ~NftWorker() {
        {
            std::lock_guard lock(mutex_);
            stopping_ = true;
        }
        wake_.notify_all();
        thread_.join();
    }
    NftWorker(const NftWorker&) = delete;
    NftWorker& operator=(const NftWorker&) = delete;

    /// Runs `script` on the worker, inside the calling thread's network namespace, and returns
    /// its outcome.
    Status run(const std::string& script) {
        std::unique_lock lock(mutex_);
        caller_ = static_cast<pid_t>(::gettid());
        script_ = &script;
        done_ = false;
        wake_.notify_all();
        wake_.wait(lock, [&] { return done_; });
        return std::move(result_);
    }

  private:
    /// A descriptor table of its own, holding only where the worker returns after a command.
    Status own_descriptor_table() {
        if (::unshare(CLONE_FILES) != 0) return sys_error("unshare(CLONE_FILES) for nftables");
        if (::syscall(SYS_close_range, 3U, ~0U, 0U) != 0)
            return sys_error("close_range in the nftables worker");
        home_ = UniqueFd(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
        if (!home_) return sys_error("open the nftables worker's own network namespace");
        return {};
    }
    /// Enters the network namespace `caller` (a thread of ours, waiting for us) is in.
    Result<NetnsVisit> visit_namespace_of(pid_t caller) const {
        const std::string path = "/proc/self/task/" + std::to_string(caller) + "/ns/net";
        const UniqueFd netns(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
        if (!netns) return sys_error("open `" + path + "`");
        auto visit = NetnsVisit::enter(netns.get(), home_.get());
        if (!visit) return std::move(visit.error().context("nftables, the caller's namespace"));
        return visit;
    }
    static Status run_here(nft_ctx* context, const std::string& script) {
        const int failed = nft_run_cmd_from_buffer(context, script.c_str());
        // Read both buffers either way: reading rewinds them for the next command.
        (void)nft_ctx_get_output_buffer(context);
        std::string why = nft_ctx_get_error_buffer(context);
        if (failed == 0) return {};
        while (!why.empty() && why.back() == '\n') why.pop_back();
        return sys_error(EINVAL, "nftables: " + why.substr(0, 512));
    }
    using Context = std::unique_ptr<nft_ctx, void (*)(nft_ctx*)>;
    static Result<Context> new_context() {
        Context context(nft_ctx_new(NFT_CTX_DEFAULT), nft_ctx_free);
        if (!context) return sys_error(ENOMEM, "nftables context");
        nft_ctx_buffer_output(context.get());
        nft_ctx_buffer_error(context.get());
        return context;
    }
    /// The script in a new `context`, inside the caller's namespace (where `visit` keeps the
    /// worker until the caller resets it).
    Status run_for_caller(std::optional<NetnsVisit>& visit, Context& context) {
        auto entered = visit_namespace_of(caller_);
        if (!entered) return std::move(entered.error());
        visit.emplace(std::move(*entered));
        auto made = new_context();
        if (!made) return std::move(made.error());
        context = std::move(*made);
        return run_here(context.get(), *script_);
    }
    void serve() {
        const Status ready = own_descriptor_table();
        std::unique_lock lock(mutex_);
        for (;;) {
            wake_.wait(lock, [&] { return stopping_ || script_ != nullptr; });
            if (stopping_) return;
            std::optional<NetnsVisit> visit;
            Context context(nullptr, nft_ctx_free);
            result_ = ready ? run_for_caller(visit, context) : ready;
            script_ = nullptr;
            done_ = true;
            wake_.notify_all();
            // The caller has its answer; closing the context's socket may wait on the kernel.
            // It closes in the caller's namespace, then the worker goes home.
            lock.unlock();
            context.reset();
            visit.reset();
            lock.lock();
        }
    }

    std::mutex mutex_;
    std::condition_variable wake_;
    const std::string* script_ = nullptr;
    pid_t caller_ = 0;
    UniqueFd home_;  // in the worker's own descriptor table
    Status result_;
    bool done_ = false;
    bool stopping_ = false;
    std::thread thread_;  // last: started once everything it uses exists
};

/// corrald's nftables worker, made on first use and stopped when the calling thread (the
/// namespace thread, netns_runner.hpp) ends.
Status run_nft(const std::string& script) {
    thread_local std::unique_ptr<NftWorker> worker;
    if (!worker) worker = std::make_unique<NftWorker>();
    return worker->run(script);
}

}  // namespace

TransparentPlan plan_transparent_egress(const EgressSpec& spec, uint16_t relay_port) {
    TransparentPlan plan;
    plan.relay_port = relay_port;
    plan.routes.push_back(*parse_cidr("0.0.0.0/0"));
    if (spec.mode == EgressMode::deny_all) return plan;  // every SYN out gets a reset
    plan.named = spec.mode == EgressMode::allow_all || !spec.allowed_hosts.empty();
    std::vector<Cidr> allowed;
    for (const auto& text : spec.allowed_cidrs)
        if (auto cidr = parse_cidr(text); cidr && cidr->base.family == AF_INET)
            allowed.push_back(*cidr);
    const IpAddress own = *IpAddress::parse("127.0.0.1");
    for (const auto& cidr : allowed)
        if (cidr.inside(loopback_v4()) && !same(cidr, loopback_v4()) && !cidr.contains(own))
            plan.loopback_open.push_back(cidr);
    if (spec.mode == EgressMode::allow_all) {
        plan.open.push_back(*parse_cidr("0.0.0.0/0"));
    } else {
        // All of them: the session's own loopback returns before this set is consulted.
        plan.open = allowed;
    }
    for (const auto& text : spec.denied_cidrs)
        if (auto cidr = parse_cidr(text); cidr && cidr->base.family == AF_INET)
            plan.denied.push_back(*cidr);
    // The protected IPv4 ranges besides loopback (egress_rules.hpp), open only where named.
    for (const char* text : {"0.0.0.0/8", "169.254.0.0/16"}) {
        const Cidr range = *parse_cidr(text);
        plan.protected_ranges.push_back(range);
        for (const auto& cidr : allowed)
            if (cidr.inside(range)) plan.protected_open.push_back(cidr);
    }
    return plan;
}

std::string nft_script(const TransparentPlan& plan, bool replace) {
    // Declaring then deleting makes the replacement one atomic batch whether or not it existed.
    std::string script =
        replace ? "table ip corral_egress {}\ndelete table ip corral_egress\n" : "";
    if (plan.routes.empty()) return script;  // a plan for nothing (the relay's initial state)
    // The session's own loopback is left alone, but for the host addresses named explicitly and
    // the name-bound addresses DNS handed out.
    const std::string own_loopback =
        "    ip daddr != @name_bound " +
        (plan.loopback_open.empty() ? std::string()
                                    : "ip daddr != " + set_of(plan.loopback_open) + " ") +
        "ip daddr 127.0.0.0/8 return\n";
    const std::string syn = " tcp flags & (syn|ack) == syn" +
                            (plan.log_group ? " log group " + std::to_string(plan.log_group) +
                                                  " prefix \"corral-egress\""
                                            : std::string()) +
                            " reject with tcp reset\n";
    std::string elements;
    for (const auto& address : plan.named_addresses)
        if (address.family == AF_INET)
            elements += (elements.empty() ? "" : ", ") + address.to_string();
    script += "table ip corral_egress {\n  set name_bound {\n    type ipv4_addr;\n" +
              (elements.empty() ? std::string() : "    elements = { " + elements + " }\n") +
              "  }\n  chain refuse {\n"
              "    type filter hook output priority -150; policy accept;\n" +
              own_loopback;
    if (!plan.denied.empty()) script += "    ip daddr " + set_of(plan.denied) + syn;
    if (!plan.protected_open.empty())
        script += "    ip daddr " + set_of(plan.protected_open) + " return\n";
    if (!plan.protected_ranges.empty())
        script += "    ip daddr " + set_of(plan.protected_ranges) + syn;
    // Everything the rules do not open: refused here, where the daemon hears of it, rather than
    // relayed to be reset after connect() succeeded.
    const bool open_all = std::any_of(plan.open.begin(), plan.open.end(),
                                      [](const Cidr& cidr) { return cidr.prefix == 0; });
    if (!open_all)
        script += "    ip daddr != @name_bound" +
                  (plan.open.empty() ? std::string() : " ip daddr != " + set_of(plan.open)) + syn;
    script += "  }\n";
    // A nat chain turns on connection tracking for the whole namespace, and a sandbox fills
    // the conntrack table (host-wide memory its cgroup is not charged for) with any UDP it
    // sends: so the relay chain exists only where something can be relayed. Under deny-all,
    // or custom that opens nothing, the refuse chain above answers every SYN already.
    const bool relays = !plan.open.empty() || plan.named || !plan.loopback_open.empty();
    if (relays)
        script += "  chain relay {\n    type nat hook output priority -100; policy accept;\n" +
                  own_loopback + "    meta l4proto tcp redirect to :" +
                  std::to_string(plan.relay_port) + "\n  }\n";
    script += "}\n";
    return script;
}

Status apply_transparent_egress(const TransparentPlan& previous, const TransparentPlan& next) {
    // No plan before or after (the relay's initial state): nothing to ask the kernel.
    auto empty = [](const TransparentPlan& plan) { return plan.routes.empty(); };
    if (empty(previous) && empty(next)) return {};
    // Order: the redirect first (so a new route never leads to nothing), then routes.
    // A namespace that never had the table (a new session) creates it without the replacing
    // delete: a deleted table is freed by the kernel after an RCU grace period, and closing an
    // nftables socket while any such work is pending waits for it (7-13 ms measured).
    if (auto status = run_nft(nft_script(next, !empty(previous))); !status) return status;
    for (const auto& cidr : next.routes)
        if (auto status = change_local_route(cidr, true); !status) return status;
    for (const auto& old : previous.routes) {
        bool kept = false;
        for (const auto& cidr : next.routes) kept = kept || same(cidr, old);
        if (!kept)
            if (auto status = change_local_route(old, false); !status) return status;
    }
    return {};
}

Status change_named_addresses(const std::vector<IpAddress>& added,
                              const std::vector<IpAddress>& removed,
                              const std::vector<Cidr>& keep_routes) {
    auto route_of = [](const IpAddress& address) {
        return *parse_cidr(address.to_string() + "/32");
    };
    auto kept = [&](const Cidr& cidr) {
        for (const auto& route : keep_routes)
            if (same(route, cidr)) return true;
        return false;
    };
    std::string script;
    for (const auto& address : removed) {
        if (address.family != AF_INET) continue;
        script += "delete element ip corral_egress name_bound { " + address.to_string() + " }\n";
    }
    // Deleting what the sandbox already removed from its own table is not worth failing for;
    // the relay refuses whatever the rules do not allow anyway.
    if (!script.empty()) (void)run_nft(script);
    for (const auto& address : removed)
        if (address.family == AF_INET && !loopback_v4().contains(address) &&
            !kept(route_of(address)))
            (void)change_local_route(route_of(address), false);
    script.clear();
    for (const auto& address : added)
        if (address.family == AF_INET)
            script += "add element ip corral_egress name_bound { " + address.to_string() + " }\n";
    if (!script.empty())
        if (auto status = run_nft(script); !status) return status;
    for (const auto& address : added)
        if (address.family == AF_INET && !loopback_v4().contains(address))
            if (auto status = change_local_route(route_of(address), true); !status) return status;
    return {};
}

}  // namespace corral
