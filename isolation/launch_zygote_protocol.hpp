#pragma once
// What corrald and its launch zygote (launch_zygote.hpp) say to each other over their socket:
// shared by corrald's side (launch_zygote.cpp) and the zygote's (launch_zygote_main.cpp), which
// runs either in a fork of corrald or as its own small program (corrald-launch, executed from
// the image corrald carries).
#include <linux/capability.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <string_view>

namespace corral::zygote_protocol {

constexpr const char* kCaller = "launch zygote";

/// How much one launch may weigh (argv, env, filters). Raised from the socket's default
/// (~200 KiB) where we may: a larger spec is launched from the worker instead (EMSGSIZE).
constexpr int kMessageBytes = 4 << 20;

/// The zygote's answer: a launch started (its report channel and pidfd attached, in that order)
/// or the Error launch_begin() gave.
struct Answer {
    int32_t code = 0;  ///< failed: the Error's code (its message follows this struct)
    int32_t pid = -1;
    uint8_t failed = 0;
    uint8_t listener_expected = 0;
    uint8_t has_pidfd = 0;
    uint8_t unused = 0;
};
static_assert(sizeof(Answer) == 12, "no padding: every byte of it is sent");

/// The zygote's first message, once it has set itself up: the capabilities it holds. corrald
/// compares them with its own: an executed zygote keeps corrald's only where corrald holds them
/// as root does (a corrald given its capabilities as file capabilities, or under SECBIT_NOROOT,
/// would start a zygote without them), and one that lacks any is not used.
struct Ready {
    char tag[8] = {'r', 'e', 'a', 'd', 'y', 0, 0, 0};
    uint32_t effective[2] = {0, 0};
    uint32_t permitted[2] = {0, 0};

    /// The calling thread's capabilities. All zero if capget fails (never equal to a real
    /// root's, so a zygote that cannot tell is not used).
    static Ready of_this_thread() noexcept {
        Ready ready;
        __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
        __user_cap_data_struct data[2]{};
        if (::syscall(SYS_capget, &header, data) == 0) {
            for (int i = 0; i < 2; ++i) {
                ready.effective[i] = data[i].effective;
                ready.permitted[i] = data[i].permitted;
            }
        }
        return ready;
    }
    std::string_view bytes() const {
        return {reinterpret_cast<const char*>(this), sizeof *this};
    }
};
static_assert(sizeof(Ready) == 24, "no padding: every byte of it is sent");

}  // namespace corral::zygote_protocol
