// Journal records to and from JSON, and replay.
#include "sessions/recovery/journal_records.hpp"

#include <algorithm>
#include <cctype>

#include "isolation/descriptor_store.hpp"
#include "policies/egress_rules.hpp"

namespace corral {
namespace {

using nlohmann::json;

int64_t to_ms(std::chrono::system_clock::time_point at) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(at.time_since_epoch()).count();
}

std::chrono::system_clock::time_point from_ms(int64_t ms) {
    return std::chrono::system_clock::time_point(std::chrono::milliseconds(ms));
}

template <typename T>
json optional_json(const std::optional<T>& value) {
    return value ? json(*value) : json(nullptr);
}

template <typename T>
std::optional<T> optional_from(const json& j, const char* key) {
    auto found = j.find(key);
    if (found == j.end() || found->is_null()) return std::nullopt;
    return found->get<T>();
}

JournalExit parse_exit(const json& j) {
    JournalExit exit;
    exit.status = j.at("status").get<std::string>();
    exit.exit_code = optional_from<int>(j, "exitCode");
    exit.signal = optional_from<int>(j, "signal");
    exit.duration_ms = j.value("durationMs", uint64_t{0});
    exit.error = j.value("error", "");
    exit.note = j.value("note", "");
    return exit;
}

JournalProcess parse_process(const json& j) {
    JournalProcess p;
    p.id = j.at("id").get<std::string>();
    if (!valid_journal_process_id(p.id))
        throw std::invalid_argument("bad process id `" + p.id + "`");
    p.pid = j.at("pid").get<pid_t>();
    p.start_ticks = j.value("start", uint64_t{0});
    p.argv = j.value("argv", std::vector<std::string>{});
    p.command = j.value("command", "");
    p.cwd = j.value("cwd", "");
    p.terminal = j.value("terminal", false);
    p.started_at = from_ms(j.value("startedAt", int64_t{0}));
    p.timeout_ms = optional_from<int64_t>(j, "timeoutMs");
    p.grace_ms = j.value("graceMs", int64_t{5000});
    p.output_cap = j.value("outputCap", uint64_t{16u << 20});
    // Only a slot the holder could have been asked to fill: a forged one below (the holder's own
    // descriptors: its store channel) or out of range is dropped, and the output not resumed.
    if (auto slot = optional_from<int64_t>(j, "heldSlot");
        slot && *slot >= kFirstStoreSlot && *slot <= kLastStoreSlot - 1)
        p.held_slot = static_cast<int>(*slot);
    return p;
}

void parse_session(const json& j, JournalSession& s) {
    s.policy = j.value("policy", "");
    s.policy_yaml = j.value("policyYaml", "");
    s.created_at = from_ms(j.value("createdAt", int64_t{0}));
    s.env = j.value("env", std::map<std::string, std::string>{});
    s.cwd = j.value("cwd", "");
    s.command_timeout_ms = optional_from<int64_t>(j, "commandTimeoutMs");
    s.ports = j.value("ports", std::vector<uint16_t>{});
    s.full_token = j.at("fullToken").get<std::string>();
    s.restricted_token = j.at("restrictedToken").get<std::string>();
    s.holder_pid = j.value("holderPid", pid_t{-1});
    s.holder_start_ticks = j.value("holderStart", uint64_t{0});
    s.keeper = j.value("keeper", false);
    if (auto identity = j.find("identity"); identity != j.end() && identity->is_object())
        s.identity = std::pair<uid_t, gid_t>{identity->at("uid").get<uid_t>(),
                                             identity->at("gid").get<gid_t>()};
    s.next_process = j.value("nextProcess", 1u);
    s.workdir = j.value("workdir", "");
    if (auto egress = j.find("egress"); egress != j.end() && egress->is_object()) {
        EgressSpec spec;
        auto mode = egress_mode_from(egress->at("mode").get<std::string>());
        if (!mode) throw std::invalid_argument("bad egress mode");
        spec.mode = *mode;
        spec.allowed_hosts = egress->value("allowedHosts", std::vector<std::string>{});
        spec.allowed_cidrs = egress->value("allowedCIDRs", std::vector<std::string>{});
        spec.denied_cidrs = egress->value("deniedCIDRs", std::vector<std::string>{});
        s.egress = std::move(spec);
        s.proxy_port = egress->value("proxyPort", uint16_t{0});
    }
    if (s.full_token.size() < 16 || s.restricted_token.size() < 16)
        throw std::invalid_argument("tokens too short");
}

}  // namespace

bool valid_journal_session_id(const std::string& id) {
    if (id.empty() || id.size() > 64) return false;
    return std::all_of(id.begin(), id.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
    });
}

bool valid_journal_process_id(const std::string& id) {
    return id.size() >= 2 && id.size() <= 10 && id[0] == 'p' && id[1] != '0' &&
           std::all_of(id.begin() + 1, id.end(), [](char c) { return c >= '0' && c <= '9'; });
}

json session_record(const JournalSession& s) {
    json j = {{"t", "session"},
              {"sid", s.id},
              {"policy", s.policy},
              {"createdAt", to_ms(s.created_at)},
              {"env", s.env},
              {"cwd", s.cwd},
              {"commandTimeoutMs", optional_json(s.command_timeout_ms)},
              {"ports", s.ports},
              {"fullToken", s.full_token},
              {"restrictedToken", s.restricted_token},
              {"holderPid", s.holder_pid},
              {"holderStart", s.holder_start_ticks},
              {"keeper", s.keeper},
              {"nextProcess", s.next_process}};
    if (!s.policy_yaml.empty()) j["policyYaml"] = s.policy_yaml;
    if (!s.workdir.empty()) j["workdir"] = s.workdir;
    if (s.identity) j["identity"] = {{"uid", s.identity->first}, {"gid", s.identity->second}};
    if (s.egress)
        j["egress"] = {{"mode", std::string(to_string(s.egress->mode))},
                       {"allowedHosts", s.egress->allowed_hosts},
                       {"allowedCIDRs", s.egress->allowed_cidrs},
                       {"deniedCIDRs", s.egress->denied_cidrs}};
    if (s.egress && s.proxy_port != 0) j["egress"]["proxyPort"] = s.proxy_port;
    return j;
}

json process_record(const std::string& sid, const JournalProcess& p) {
    return {{"t", "process"},
            {"sid", sid},
            {"id", p.id},
            {"pid", p.pid},
            {"start", p.start_ticks},
            {"argv", p.argv},
            {"command", p.command},
            {"cwd", p.cwd},
            {"terminal", p.terminal},
            {"startedAt", to_ms(p.started_at)},
            {"timeoutMs", optional_json(p.timeout_ms)},
            {"graceMs", p.grace_ms},
            {"outputCap", p.output_cap},
            {"heldSlot", optional_json(p.held_slot)}};
}

json exit_record(const std::string& sid, const std::string& proc, const JournalExit& e) {
    json j = {{"t", "exit"},
              {"sid", sid},
              {"id", proc},
              {"status", e.status},
              {"exitCode", optional_json(e.exit_code)},
              {"signal", optional_json(e.signal)},
              {"durationMs", e.duration_ms}};
    if (!e.error.empty()) j["error"] = e.error;
    if (!e.note.empty()) j["note"] = e.note;
    return j;
}

json ending_record(const std::string& sid, const std::string& reason) {
    return {{"t", "ending"}, {"sid", sid}, {"reason", reason}};
}

json end_record(const std::string& sid) {
    return {{"t", "end"}, {"sid", sid}};
}

std::vector<json> journal_snapshot(const JournalSession& s) {
    std::vector<json> records{session_record(s)};
    for (const auto& p : s.processes) {
        records.push_back(process_record(s.id, p));
        if (p.exit) records.push_back(exit_record(s.id, p.id, *p.exit));
    }
    if (s.ending) records.push_back(ending_record(s.id, *s.ending));
    return records;
}

std::map<std::string, JournalSession> replay_journal(const std::vector<json>& records,
                                                     std::vector<std::string>& notes) {
    std::map<std::string, JournalSession> sessions;
    size_t index = 0;
    for (const auto& record : records) {
        ++index;
        const std::string type = record.value("t", "");
        const std::string sid = record.value("sid", "");
        auto skip = [&](const std::string& why) {
            notes.push_back("journal record " + std::to_string(index) + " (" + type +
                            "): skipped, " + why);
        };
        try {
            if (type != "session" && type != "process" && type != "exit" && type != "ending" &&
                type != "end")
                continue;  // a later version's record: not ours to understand
            if (!valid_journal_session_id(sid)) {
                skip("bad session id `" + sid.substr(0, 80) + "`");
                continue;
            }
            if (type == "session") {
                JournalSession parsed;
                parsed.id = sid;
                parse_session(record, parsed);
                auto found = sessions.find(sid);
                if (found != sessions.end()) {
                    parsed.processes = std::move(found->second.processes);
                    parsed.ending = found->second.ending;
                }
                sessions[sid] = std::move(parsed);
                continue;
            }
            auto found = sessions.find(sid);
            if (found == sessions.end()) {
                if (type != "end") skip("no session `" + sid + "` before it");
                continue;
            }
            JournalSession& session = found->second;
            if (type == "end") {
                sessions.erase(found);
            } else if (type == "ending") {
                session.ending = record.value("reason", "api");
            } else if (type == "process") {
                JournalProcess process = parse_process(record);
                auto same = std::find_if(session.processes.begin(), session.processes.end(),
                                         [&](const auto& p) { return p.id == process.id; });
                if (same != session.processes.end()) {
                    skip("process `" + process.id + "` recorded twice");
                    continue;
                }
                session.processes.push_back(std::move(process));
            } else if (type == "exit") {
                const std::string proc = record.value("id", "");
                auto p = std::find_if(session.processes.begin(), session.processes.end(),
                                      [&](const auto& q) { return q.id == proc; });
                if (p == session.processes.end()) {
                    skip("no process `" + proc.substr(0, 20) + "` in session `" + sid + "`");
                    continue;
                }
                p->exit = parse_exit(record);
            }
        } catch (const std::exception& error) {
            skip(error.what());
        }
    }
    return sessions;
}

}  // namespace corral
