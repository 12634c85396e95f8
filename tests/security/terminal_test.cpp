// Terminal injection: a sandboxed process that keeps the caller's controlling terminal can push
// keystrokes into it (TIOCSTI), which the caller's shell runs once the sandbox has exited.

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "base/unique_fd.hpp"
#include "support/sandbox_harness.hpp"

namespace corral::security {
namespace {

constexpr const char* kMarker = "CORRALX";

/// A pseudo-terminal whose slave side is in raw mode, so injected bytes are readable at once.
struct Pty {
    UniqueFd master;
    std::string slave_path;

    static Pty open() {
        Pty pty;
        pty.master.reset(::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
        if (!pty.master || ::grantpt(pty.master.get()) != 0 || ::unlockpt(pty.master.get()) != 0)
            return pty;
        pty.slave_path = ::ptsname(pty.master.get());
        UniqueFd slave(::open(pty.slave_path.c_str(), O_RDWR | O_NOCTTY | O_CLOEXEC));
        termios mode{};
        ::tcgetattr(slave.get(), &mode);
        ::cfmakeraw(&mode);
        ::tcsetattr(slave.get(), TCSANOW, &mode);
        return pty;
    }
    /// Whatever is waiting in the slave's input queue (what a shell reading the terminal gets).
    std::string pending_input() const {
        UniqueFd slave(::open(slave_path.c_str(), O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC));
        std::string text;
        char buf[256];
        ssize_t n;
        while ((n = ::read(slave.get(), buf, sizeof buf)) > 0) text.append(buf, size_t(n));
        return text;
    }
    /// Makes the slave the calling process's controlling terminal and its stdin.
    void become_controlling_terminal() const {
        ::setsid();
        int fd = ::open(slave_path.c_str(), O_RDWR);  // first tty a session leader opens: its ctty
        ::ioctl(fd, TIOCSCTTY, 0);
        ::dup2(fd, 0);
    }
};

class Terminal : public SandboxTest {};

// CVE-2017-5226 (bubblewrap): TIOCSTI from inside the sandbox into the caller's terminal. corral
// must start the command in a new session (setsid), so the terminal is not its controlling one and
// the kernel refuses the ioctl, whatever the command's stdin is.
TEST_F(Terminal, TiocstiCannotInjectIntoCallersTerminal_CVE_2017_5226) {
    Pty pty = Pty::open();
    ASSERT_FALSE(pty.slave_path.empty()) << "no pseudo-terminal";

    // Control: with the terminal as its controlling one, a process can inject (the attack works
    // on this kernel; dev.tty.legacy_tiocsti=0 would refuse it for everyone).
    pid_t control = ::fork();
    if (control == 0) {
        pty.become_controlling_terminal();
        char c = 'y';
        ::_exit(::ioctl(0, TIOCSTI, &c) == 0 ? 0 : 1);
    }
    int status = 0;
    ::waitpid(control, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        GTEST_SKIP() << "this kernel refuses TIOCSTI even on a controlling terminal";
    ASSERT_EQ(pty.pending_input(), "y") << "control injection not seen";

    RunOptions options;
    options.in_child = [&] { pty.become_controlling_terminal(); };
    auto r = corral({"run", "--policy", "default", "--", probe(), "tiocsti", kMarker}, options);
    auto a = answers(r.out);
    EXPECT_EQ(a["tiocsti"], "EPERM") << r.out << r.err;
    EXPECT_EQ(a["devtty"], "ENXIO") << "the command has a controlling terminal\n" << r.out;
    EXPECT_EQ(pty.pending_input(), "") << "keystrokes were injected into the caller's terminal";
}

}  // namespace
}  // namespace corral::security
