#pragma once
// Code contexts (issue 14; Cloudflare's createCodeContext/runCode, E2B's code interpreter): a
// persistent interpreter inside a session — python3 or node as the sandbox sees them — that keeps
// its variables, imports and definitions from one run to the next, like a notebook kernel.
//
// The interpreter is an ordinary session process (its own leaf cgroup, listed among the
// processes, limits apply, killed with the session). It runs a small driver shipped inside corrald
// (drivers/, embedded at build time, handed to the interpreter on its stdin so argv stays short)
// that talks to the daemon over a socket at its fd 3 in length-prefixed JSON frames
// (driver_frames.hpp). The code's own output is wrapped into frames by the driver, so nothing
// the code prints is ever read as protocol; and nothing from the daemon is evaluated but the
// code the caller sent, inside the sandbox.
//
// Runs of one context are serialized in arrival order (a queue). A run's timeout sends SIGINT to
// the interpreter (KeyboardInterrupt in Python; node runs the code with breakOnSigint), repeated
// until the run ends: the run ends with that error and the context keeps its state. Code that
// does not stop within the policy's grace period (timeouts.grace) after that gets the context
// killed. A context whose interpreter died
// (killed, OOM, exited, a protocol violation) stays listed as "dead" with the reason; runs on it
// are refused, and the id can be created again.

#include <array>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <string>

#include "base/asio.hpp"
#include "base/error.hpp"
#include "sessions/contexts/code_context_types.hpp"
#include "sessions/contexts/driver_frames.hpp"
#include "sessions/process.hpp"

namespace corral {

/// The argv that starts `language`'s interpreter with its driver read from stdin.
std::vector<std::string> interpreter_argv(CodeLanguage language);
/// The driver program of `language` (embedded at build time).
std::string_view driver_source(CodeLanguage language);

/// One code context of a session. Event-loop thread only.
class CodeContext : public std::enable_shared_from_this<CodeContext> {
  public:
    /// Starts the interpreter process with `channel_fd` as its fd 3.
    using Launch = std::function<Result<std::shared_ptr<Process>>(int channel_fd)>;
    /// Called (posted) once: the ready record, or why the interpreter did not come up.
    using Ready = std::function<void(Result<CodeContextInfo>)>;
    /// Receives a run's events; `end` is the last one.
    using Events = std::function<void(const CodeRunEvent&)>;

    struct Options {
        size_t output_cap = 16u << 20;          ///< bytes of stdout+stderr, and of results, per run
        std::optional<Millis> default_timeout;  ///< a run's timeout when it gives none
        Millis grace{5000};                     ///< after SIGINT, before the context is killed
        Millis start_timeout{60000};            ///< for the driver's ready frame
    };

    CodeContext(boost::asio::io_context& io, std::string id, CodeLanguage language, std::string cwd,
                Options options);
    ~CodeContext();

    const std::string& id() const { return id_; }
    bool dead() const { return dead_; }
    /// Snapshot for the API.
    CodeContextInfo info() const;
    /// Launches the interpreter. ENOPKG when the sandbox has no such interpreter (the launch
    /// failed to exec it); `ready` is then never called.
    Status start(const Launch& launch, Ready ready);
    /// Queues a run; `events` gets its events once its turn came. Returns the run's id;
    /// EOWNERDEAD when the context is dead. Setting `*alive` false drops a queued run and mutes a
    /// running one.
    Result<uint64_t> enqueue(CodeRunRequest request, std::shared_ptr<bool> alive, Events events);
    /// Interrupts run `run` if it is the one running (SIGINT, as at its timeout; it ends as
    /// "interrupted"). Nothing when it already ended or is not running.
    void interrupt(uint64_t run);
    /// Ends the context: its interpreter is killed, runs waiting or running end as context_died.
    void close(const std::string& why);

  private:
    struct Run {
        uint64_t id = 0;
        CodeRunRequest request;
        std::shared_ptr<bool> alive;
        Events events;
        std::chrono::steady_clock::time_point started;
        size_t output_bytes = 0;  ///< stdout and stderr, bounded by output_cap
        size_t result_bytes = 0;  ///< results, bounded by output_cap too
        bool truncated = false;
        bool had_error = false;
        bool timed_out = false;
        bool interrupted = false;  ///< by interrupt() (its client went away)
    };
    void read_frames();
    void handle(DriverMessage message);
    void handle_output(DriverMessage::Type type, std::string text);
    void start_next();
    void arm_timeout();
    void on_timeout();
    void send_interrupt();
    void repeat_interrupt();
    void finish_run(std::string status, std::string message);
    void deliver(Run& run, const CodeRunEvent& event);
    void die(std::string reason);
    void on_channel_closed(const boost::system::error_code& ec);
    void on_process_exit();

    boost::asio::io_context& io_;
    std::string id_;
    CodeLanguage language_;
    std::string cwd_;
    Options options_;
    std::shared_ptr<Process> process_;
    boost::asio::local::stream_protocol::socket channel_;
    std::array<char, 64 * 1024> read_buffer_{};
    FrameDecoder decoder_;
    std::string write_buffer_;
    Ready ready_;
    bool started_ = false;  ///< the ready frame came
    bool dead_ = false;
    std::string error_;
    std::string version_;
    std::deque<std::unique_ptr<Run>> queue_;
    std::unique_ptr<Run> running_;
    uint64_t next_run_ = 1;
    uint64_t runs_ = 0;
    boost::asio::steady_timer timer_;  ///< start timeout, run timeout, then the grace period
    std::chrono::steady_clock::time_point interrupt_until_;  ///< the grace's end, SIGINT repeats
    std::shared_ptr<bool> exit_wait_;
};

}  // namespace corral
