// process_stat_field (isolation/pid_ref.hpp): the start ticks a journalled process is recognised by
// after a restart, read from /proc/<pid>/stat on every launch. The fields after comm are counted
// from comm's last ')', whatever comm holds (a process names itself: "a) b (c" must not shift them).
#include <gtest/gtest.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "isolation/pid_ref.hpp"

namespace corral {
namespace {

/// Field `wanted` of /proc/<pid>/stat read another way (a stream, as the code once did).
uint64_t field_by_stream(pid_t pid, int wanted) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    std::getline(in, line);
    std::istringstream fields(line.substr(line.rfind(')') + 2));
    std::string field;
    for (int i = 3; i < wanted; ++i) fields >> field;
    uint64_t value = 0;
    fields >> value;
    return value;
}

TEST(ProcessStatField, ReadsTheFieldsAfterCommAsTheKernelWritesThem) {
    for (int field : {4, 5, 19, 22, 52}) {
        auto value = process_stat_field(::getpid(), field);
        ASSERT_TRUE(value) << field << ": " << value.error().describe();
        EXPECT_EQ(*value, field_by_stream(::getpid(), field)) << "field " << field;
    }
    EXPECT_EQ(*process_stat_field(::getpid(), 4), static_cast<uint64_t>(::getppid()));
    EXPECT_EQ(*process_start_ticks(::getpid()), field_by_stream(::getpid(), 22));
}

// A process chooses its comm: one with spaces and parentheses still yields its own fields.
TEST(ProcessStatField, ACommWithSpacesAndParenthesesShiftsNothing) {
    int ready[2];
    ASSERT_EQ(::pipe(ready), 0);
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        ::prctl(PR_SET_NAME, "a) b (c ) 9 9", 0, 0, 0);
        (void)::write(ready[1], "x", 1);
        ::pause();
        ::_exit(0);
    }
    ::close(ready[1]);
    char go;
    ASSERT_EQ(::read(ready[0], &go, 1), 1);
    ::close(ready[0]);
    auto parent = process_stat_field(child, 4);
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
    ASSERT_TRUE(parent) << parent.error().describe();
    EXPECT_EQ(*parent, static_cast<uint64_t>(::getpid()));
}

TEST(ProcessStatField, RefusesWhatIsNotThere) {
    EXPECT_FALSE(process_stat_field(0, 22));
    EXPECT_FALSE(process_stat_field(::getpid(), 2));    // comm is no number
    EXPECT_FALSE(process_stat_field(::getpid(), 500));  // past the last field
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) ::_exit(0);
    ::waitpid(child, nullptr, 0);
    auto gone = process_stat_field(child, 22);  // reaped: no such pid (unless reused at once)
    if (!gone) {
        EXPECT_EQ(gone.error().code, ESRCH);
    }
}

}  // namespace
}  // namespace corral
