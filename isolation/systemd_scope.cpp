// StartTransientUnit over sd-bus; see the header.
#include "isolation/systemd_scope.hpp"

#include <systemd/sd-bus.h>
#include <time.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <map>

namespace corral {
namespace {

struct BusUnref {
    void operator()(sd_bus* bus) const { sd_bus_flush_close_unref(bus); }
};
struct MessageUnref {
    void operator()(sd_bus_message* message) const { sd_bus_message_unref(message); }
};
struct SlotUnref {
    void operator()(sd_bus_slot* slot) const { sd_bus_slot_unref(slot); }
};
using Bus = std::unique_ptr<sd_bus, BusUnref>;
using Message = std::unique_ptr<sd_bus_message, MessageUnref>;
using Slot = std::unique_ptr<sd_bus_slot, SlotUnref>;

/// sd-bus returns -errno.
Error bus_error(int negative_errno, const std::string& what) {
    return sys_error(-negative_errno, what);
}

/// Job paths systemd reported finished, with the result of each ("done", "failed", ...): the
/// JobRemoved of our job may be read before we know its path.
struct JobWatch {
    std::map<std::string, std::string> finished;
    std::string wanted;
};

int on_job_removed(sd_bus_message* message, void* userdata, sd_bus_error*) {
    auto* watch = static_cast<JobWatch*>(userdata);
    uint32_t id = 0;
    const char* path = nullptr;
    const char* unit = nullptr;
    const char* result = nullptr;
    if (sd_bus_message_read(message, "uoss", &id, &path, &unit, &result) < 0) return 0;
    watch->finished[path] = result;
    return 0;
}

Status append_properties(sd_bus_message* call, const std::string& unit) {
    int r = sd_bus_message_append(call, "ss", unit.c_str(), "fail");
    if (r >= 0) r = sd_bus_message_open_container(call, 'a', "(sv)");
    if (r >= 0)
        r = sd_bus_message_append(call, "(sv)", "Description", "s",
                                  "corral: delegated cgroup for sandbox sessions");
    if (r >= 0) r = sd_bus_message_append(call, "(sv)", "Delegate", "b", 1);
    if (r >= 0)
        r = sd_bus_message_append(call, "(sv)", "PIDs", "au", 1,
                                  static_cast<uint32_t>(::getpid()));
    // Gone once empty, even after a failure: nothing of corral's stays listed in systemd.
    if (r >= 0) r = sd_bus_message_append(call, "(sv)", "CollectMode", "s", "inactive-or-failed");
    if (r >= 0) r = sd_bus_message_close_container(call);
    if (r >= 0) r = sd_bus_message_append(call, "a(sa(sv))", 0);
    if (r < 0) return bus_error(r, "build StartTransientUnit(" + unit + ")");
    return {};
}

/// Processes bus traffic until `watch` has its job's result, for at most `seconds`.
Status wait_for_job(sd_bus* bus, JobWatch& watch, const std::string& unit, int seconds) {
    timespec start{};
    ::clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        if (watch.finished.count(watch.wanted)) break;
        int r = sd_bus_process(bus, nullptr);
        if (r < 0) return bus_error(r, "wait for the start job of " + unit);
        if (r > 0) continue;
        timespec now{};
        ::clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - start.tv_sec >= seconds)
            return sys_error(ETIMEDOUT, "the start job of " + unit + " did not finish");
        r = sd_bus_wait(bus, 1000000);  // 1 s, then check the bound again
        if (r < 0) return bus_error(r, "wait for the start job of " + unit);
    }
    const std::string& result = watch.finished[watch.wanted];
    if (result != "done")
        return plain_error("the start job of " + unit + " ended `" + result + "`");
    return {};
}

}  // namespace

Status request_delegated_scope(const std::string& unit) {
    sd_bus* raw = nullptr;
    int r = ::geteuid() == 0 ? sd_bus_open_system(&raw) : sd_bus_open_user(&raw);
    if (r < 0) return bus_error(r, "connect to systemd's D-Bus");
    Bus bus(raw);
    JobWatch watch;
    sd_bus_slot* slot_raw = nullptr;
    r = sd_bus_match_signal(bus.get(), &slot_raw, "org.freedesktop.systemd1",
                            "/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager",
                            "JobRemoved", on_job_removed, &watch);
    if (r < 0) return bus_error(r, "subscribe to systemd's JobRemoved");
    Slot slot(slot_raw);

    sd_bus_message* call_raw = nullptr;
    r = sd_bus_message_new_method_call(bus.get(), &call_raw, "org.freedesktop.systemd1",
                                       "/org/freedesktop/systemd1",
                                       "org.freedesktop.systemd1.Manager", "StartTransientUnit");
    if (r < 0) return bus_error(r, "build StartTransientUnit(" + unit + ")");
    Message call(call_raw);
    CORRAL_TRY(append_properties(call.get(), unit), "ask systemd for a delegated scope");

    sd_bus_error error = SD_BUS_ERROR_NULL;
    sd_bus_message* reply_raw = nullptr;
    r = sd_bus_call(bus.get(), call.get(), 0, &error, &reply_raw);
    if (r < 0) {
        std::string message = error.message ? error.message : std::strerror(-r);
        std::string name = error.name ? error.name : "";
        sd_bus_error_free(&error);
        return bus_error(r, "StartTransientUnit(" + unit + "): " + name + ": " + message);
    }
    Message reply(reply_raw);
    const char* job = nullptr;
    r = sd_bus_message_read(reply.get(), "o", &job);
    if (r < 0) return bus_error(r, "read the job of StartTransientUnit(" + unit + ")");
    watch.wanted = job;
    return wait_for_job(bus.get(), watch, unit, 30);
}

ScopeRequester scope_requester() {
    return request_delegated_scope;
}

}  // namespace corral
