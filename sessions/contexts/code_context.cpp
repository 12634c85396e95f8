#include "sessions/contexts/code_context.hpp"

#include <signal.h>
#include <sys/socket.h>

#include <algorithm>

#include "base/unique_fd.hpp"

namespace corral {
namespace detail {
std::string_view embedded_python_driver();
std::string_view embedded_node_driver();
}  // namespace detail

namespace {

/// The longest prefix of valid UTF-8 `text` that is at most `max` bytes and ends on a character.
size_t utf8_cut(std::string_view text, size_t max) {
    if (text.size() <= max) return text.size();
    size_t cut = max;
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
    return cut;
}

/// The last `max` bytes the interpreter wrote to its own stderr (a crash of the driver itself).
std::string stderr_tail(const Process& process, size_t max) {
    const ProcessInfo info = process.info();
    const uint64_t total = info.stderr_stats.total_bytes;
    const uint64_t from = total > max ? total - max : 0;
    return process.read(OutputStream::err, from, max).data;
}

}  // namespace

std::string_view to_string(CodeLanguage language) {
    return language == CodeLanguage::python ? "python" : "javascript";
}

std::optional<CodeLanguage> parse_code_language(std::string_view name) {
    if (name == "python" || name == "python3") return CodeLanguage::python;
    if (name == "javascript" || name == "js" || name == "node") return CodeLanguage::javascript;
    return std::nullopt;
}

std::vector<std::string> interpreter_argv(CodeLanguage language) {
    // `-` reads the program from stdin until EOF before running it: the driver arrives there
    // (ProcessSetup::stdin_data), and the code's stdin is then at EOF, as for any command.
    if (language == CodeLanguage::python) return {"python3", "-u", "-"};
    // --expose-internals: the driver uses node's REPL transform for top-level await
    // (internal/repl/await). The code could reach node's internals too; it already runs with the
    // interpreter's full authority inside the sandbox, so that grants it nothing new.
    return {"node", "--expose-internals", "-"};
}

std::string_view driver_source(CodeLanguage language) {
    return language == CodeLanguage::python ? detail::embedded_python_driver()
                                            : detail::embedded_node_driver();
}

CodeContext::CodeContext(boost::asio::io_context& io, std::string id, CodeLanguage language,
                         std::string cwd, Options options)
    : io_(io),
      id_(std::move(id)),
      language_(language),
      cwd_(std::move(cwd)),
      options_(options),
      channel_(io),
      timer_(io) {}

CodeContext::~CodeContext() {
    if (exit_wait_) *exit_wait_ = false;
    boost::system::error_code ignored;
    channel_.close(ignored);
}

CodeContextInfo CodeContext::info() const {
    CodeContextInfo info;
    info.id = id_;
    info.language = language_;
    info.status = dead_ ? "dead" : !started_ ? "starting" : running_ ? "running" : "idle";
    info.cwd = cwd_;
    info.version = version_;
    info.runs = runs_;
    info.queued = queue_.size();
    info.error = error_;
    if (process_) {
        ProcessInfo record = process_->info();
        info.process = record.id;
        info.pid = record.pid;
        if (!record.running) info.exit = std::move(record);
    }
    return info;
}

Status CodeContext::start(const Launch& launch, Ready ready) {
    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0)
        return sys_error("code context " + id_ + ": socketpair");
    UniqueFd ours(pair[0]);
    UniqueFd theirs(pair[1]);
    auto process = launch(theirs.get());
    if (!process) return std::move(process.error());
    process_ = std::move(*process);
    theirs.reset();  // the interpreter holds its end; ours sees EOF when it is gone
    const ProcessInfo record = process_->info();
    const std::string interpreter = interpreter_argv(language_).front();
    if (!record.running && record.reason == ExitReason::setup_failed) {
        dead_ = true;
        error_ = interpreter + " is not available in the sandbox: " + record.error;
        return sys_error(ENOPKG, error_);
    }
    channel_.assign(boost::asio::local::stream_protocol(), ours.release());
    ready_ = std::move(ready);
    std::weak_ptr<CodeContext> weak = weak_from_this();
    exit_wait_ = process_->wait_exit(std::nullopt, [weak](bool) {
        if (auto self = weak.lock()) self->on_process_exit();
    });
    timer_.expires_after(options_.start_timeout);
    timer_.async_wait([weak, interpreter](const boost::system::error_code& ec) {
        auto self = weak.lock();
        if (ec || !self || self->started_ || self->dead_) return;
        self->die(interpreter + " did not start its driver within " +
                  std::to_string(self->options_.start_timeout.count() / 1000) + " s");
    });
    read_frames();
    return {};
}

void CodeContext::read_frames() {
    std::weak_ptr<CodeContext> weak = weak_from_this();
    channel_.async_read_some(
        boost::asio::buffer(read_buffer_), [weak](const boost::system::error_code& ec, size_t n) {
            auto self = weak.lock();
            if (!self || self->dead_) return;
            if (ec) {
                self->on_channel_closed(ec);
                return;
            }
            if (Status fed = self->decoder_.feed(std::string_view(self->read_buffer_.data(), n));
                !fed) {
                self->die(fed.error().message);
                return;
            }
            while (auto payload = self->decoder_.next()) {
                auto message = parse_driver_message(*payload);
                if (!message) {
                    self->die(message.error().message);
                    return;
                }
                self->handle(std::move(*message));
                if (self->dead_) return;
            }
            self->read_frames();
        });
}

void CodeContext::handle(DriverMessage message) {
    using Type = DriverMessage::Type;
    if (message.type == Type::ready) {
        if (started_) {
            die("driver protocol: a second `ready`");
            return;
        }
        started_ = true;
        version_ = message.version;
        timer_.cancel();
        if (ready_)
            boost::asio::post(io_, [ready = std::move(ready_), info = info()] { ready(info); });
        ready_ = nullptr;
        start_next();
        return;
    }
    if (!running_ || message.run != running_->id) {
        die("driver protocol: a frame for run " + std::to_string(message.run) +
            (running_ ? " during run " + std::to_string(running_->id) : " between runs"));
        return;
    }
    Run& run = *running_;
    switch (message.type) {
        case Type::stdout_text:
        case Type::stderr_text:
            handle_output(message.type, std::move(message.text));
            break;
        case Type::result: {
            size_t size = 0;
            for (const auto& [mime, value] : message.data) size += mime.size() + value.size();
            // Results have a budget of their own, so a flood of output cannot hide the value.
            if (run.result_bytes + size > options_.output_cap) {
                run.truncated = true;  // a result is whole or not there
                break;
            }
            run.result_bytes += size;
            CodeRunEvent event;
            event.type = CodeRunEvent::Type::result;
            event.data = std::move(message.data);
            deliver(run, event);
            break;
        }
        case Type::error: {
            run.had_error = true;
            CodeRunEvent event;
            event.type = CodeRunEvent::Type::error;
            event.error = {std::move(message.name), std::move(message.value),
                           std::move(message.traceback)};
            deliver(run, event);
            break;
        }
        case Type::done:
            finish_run(run.timed_out     ? "timeout"
                       : run.interrupted ? "interrupted"
                       : run.had_error   ? "error"
                                         : "ok",
                       "");
            start_next();
            break;
        case Type::ready:
            break;
    }
}

void CodeContext::handle_output(DriverMessage::Type type, std::string text) {
    Run& run = *running_;
    // The policy's output cap bounds what one run keeps (and what a streaming client is sent).
    const size_t room =
        run.output_bytes >= options_.output_cap ? 0 : options_.output_cap - run.output_bytes;
    if (text.size() > room) {
        run.truncated = true;
        text.resize(utf8_cut(text, room));
    }
    if (text.empty()) return;
    run.output_bytes += text.size();
    CodeRunEvent event;
    event.type = type == DriverMessage::Type::stdout_text ? CodeRunEvent::Type::stdout_text
                                                          : CodeRunEvent::Type::stderr_text;
    event.text = std::move(text);
    deliver(run, event);
}

void CodeContext::deliver(Run& run, const CodeRunEvent& event) {
    if (*run.alive && run.events) run.events(event);
}

Result<uint64_t> CodeContext::enqueue(CodeRunRequest request, std::shared_ptr<bool> alive,
                                      Events events) {
    if (dead_)
        return sys_error(EOWNERDEAD, "code context `" + id_ + "` is dead: " + error_ +
                                         " (delete it or create it again)");
    auto run = std::make_unique<Run>();
    run->id = next_run_++;
    const uint64_t id = run->id;
    run->request = std::move(request);
    run->alive = std::move(alive);
    run->events = std::move(events);
    queue_.push_back(std::move(run));
    // Posted: the caller's handler never runs inside this call.
    boost::asio::post(io_, [weak = weak_from_this()] {
        if (auto self = weak.lock()) self->start_next();
    });
    return id;
}

void CodeContext::interrupt(uint64_t run) {
    if (dead_ || !running_ || running_->id != run || running_->interrupted || running_->timed_out)
        return;
    running_->interrupted = true;
    send_interrupt();
}

void CodeContext::start_next() {
    if (dead_ || !started_ || running_) return;
    while (!queue_.empty() && !*queue_.front()->alive) queue_.pop_front();
    if (queue_.empty()) return;
    running_ = std::move(queue_.front());
    queue_.pop_front();
    running_->started = std::chrono::steady_clock::now();
    write_buffer_ = encode_run_frame(running_->id, running_->request.code);
    std::weak_ptr<CodeContext> weak = weak_from_this();
    boost::asio::async_write(
        channel_, boost::asio::buffer(write_buffer_),
        [weak](const boost::system::error_code& ec, size_t) {
            auto self = weak.lock();
            if (!ec || !self || self->dead_) return;
            self->die("could not send the code to the interpreter (" + ec.message() + ")");
        });
    arm_timeout();
}

void CodeContext::arm_timeout() {
    const std::optional<Millis> timeout =
        running_->request.timeout ? running_->request.timeout : options_.default_timeout;
    if (!timeout || timeout->count() == 0) return;
    timer_.expires_after(*timeout);
    timer_.async_wait(
        [weak = weak_from_this(), run = running_->id](const boost::system::error_code& ec) {
            auto self = weak.lock();
            if (ec || !self || self->dead_ || !self->running_ || self->running_->id != run) return;
            self->on_timeout();
        });
}

void CodeContext::on_timeout() {
    running_->timed_out = true;
    send_interrupt();
}

void CodeContext::send_interrupt() {
    interrupt_until_ = std::chrono::steady_clock::now() + options_.grace;
    repeat_interrupt();
}

// SIGINT to the interpreter itself (not its tree): KeyboardInterrupt / breakOnSigint. One SIGINT
// can come too early to interrupt anything: node queues a SIGINT that arrives before the code runs
// under breakOnSigint for its event loop, which a busy loop never gives back, and Python ignores
// one that comes before the code started (both lost it on the pure-v2 VM's slow kernel, where the
// 300 ms timeout fired that early). So it is repeated every kInterruptRepeat until the run ends
// (finish_run cancels the timer) or the grace runs out; the drivers ignore repeats between runs
// and after the run was interrupted.
void CodeContext::repeat_interrupt() {
    constexpr Millis kInterruptRepeat{500};
    (void)process_->signal(SIGINT);
    const auto left = std::chrono::duration_cast<Millis>(interrupt_until_ -
                                                         std::chrono::steady_clock::now());
    timer_.expires_after(std::max(Millis(0), std::min(kInterruptRepeat, left)));
    timer_.async_wait(
        [weak = weak_from_this(), run = running_->id](const boost::system::error_code& ec) {
            auto self = weak.lock();
            if (ec || !self || self->dead_ || !self->running_ || self->running_->id != run) return;
            if (std::chrono::steady_clock::now() < self->interrupt_until_) {
                self->repeat_interrupt();
                return;
            }
            self->die("run " + std::to_string(run) + " did not stop within " +
                      std::to_string(self->options_.grace.count()) +
                      " ms of SIGINT (the policy's timeouts.grace); the context was killed");
        });
}

void CodeContext::finish_run(std::string status, std::string message) {
    timer_.cancel();
    std::unique_ptr<Run> run = std::move(running_);
    ++runs_;
    CodeRunEvent end;
    end.type = CodeRunEvent::Type::end;
    end.status = std::move(status);
    end.message = std::move(message);
    end.truncated = run->truncated;
    end.duration_ms = static_cast<uint64_t>(
        std::chrono::duration_cast<Millis>(std::chrono::steady_clock::now() - run->started)
            .count());
    deliver(*run, end);
}

void CodeContext::die(std::string reason) {
    if (dead_) return;
    dead_ = true;
    if (process_ && process_->main_running()) {
        (void)process_->kill();
    } else if (process_) {
        const ProcessInfo record = process_->info();
        reason += " (" + record.status();
        if (record.exit_code) reason += ", exit code " + std::to_string(*record.exit_code);
        if (record.signal) reason += ", signal " + std::to_string(*record.signal);
        reason += ")";
    }
    if (process_) {
        const std::string tail = stderr_tail(*process_, 2048);
        if (!tail.empty()) reason += "; its stderr ends with: " + tail;
    }
    error_ = std::move(reason);
    timer_.cancel();
    boost::system::error_code ignored;
    channel_.close(ignored);
    if (ready_) {
        boost::asio::post(
            io_, [ready = std::move(ready_), error = error_] { ready(sys_error(ENOPKG, error)); });
        ready_ = nullptr;
    }
    if (running_) finish_run("context_died", error_);
    while (!queue_.empty()) {
        running_ = std::move(queue_.front());
        queue_.pop_front();
        running_->started = std::chrono::steady_clock::now();
        finish_run("context_died", error_);
    }
}

// The channel closes when the interpreter exits, a moment before its exit is reaped: the exit's
// reason (oom, killed, exited 1) is the truth, so wait for it — bounded, since code could also
// close the driver's socket and live on.
void CodeContext::on_channel_closed(const boost::system::error_code& ec) {
    if (!process_ || !process_->main_running()) {
        on_process_exit();
        return;
    }
    timer_.expires_after(options_.grace);
    timer_.async_wait(
        [weak = weak_from_this(), why = ec.message()](const boost::system::error_code& error) {
            auto self = weak.lock();
            if (error || !self || self->dead_) return;
            self->die("the interpreter's driver closed its channel to corrald (" + why + ")");
        });
}

void CodeContext::on_process_exit() {
    if (dead_) return;
    // Its launch failed on the loop (process_launch.cpp): say so as start() does for one that
    // failed at once.
    if (process_) {
        const ProcessInfo record = process_->info();
        if (record.reason == ExitReason::setup_failed || !record.error.empty()) {
            die(interpreter_argv(language_).front() +
                " is not available in the sandbox: " + record.error);
            return;
        }
    }
    die("the interpreter exited");
}

void CodeContext::close(const std::string& why) {
    die(why);
}

}  // namespace corral
