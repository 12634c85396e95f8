// What corrald's memory grows by with the sessions it holds (issue 18: "while 1,000 sessions
// exist"). Found by re-running issue 12's stress figures: 100 `default` sessions took corrald
// from 9 to 143 MB, ~1.3 MB each, 38 MB of it kept after they ended. Two causes, one test each:
// a 256 KiB thread_local read buffer that every thread of corrald got in its static TLS block
// (zeroed, so resident, at the thread's creation: two threads per isolated session), and the
// nftables context each session's worker kept for the session's life (~530 KiB of libnftables
// cache and parser state).
#include <elf.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "support/corrald_process.hpp"
#include "support/http_client.hpp"

namespace corral {
namespace {

using testing::corrald_can_run;
using testing::CorraldProcess;
using testing::HttpClient;

/// The PT_TLS segment's size in memory (what each thread gets of the executable's own static
/// TLS), or -1 when the file cannot be read as a 64-bit ELF.
long static_tls_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    Elf64_Ehdr header{};
    if (!in.read(reinterpret_cast<char*>(&header), sizeof header) ||
        std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0 || header.e_ident[EI_CLASS] != ELFCLASS64)
        return -1;
    for (unsigned i = 0; i < header.e_phnum; ++i) {
        Elf64_Phdr segment{};
        in.seekg(static_cast<std::streamoff>(header.e_phoff + i * header.e_phentsize));
        if (!in.read(reinterpret_cast<char*>(&segment), sizeof segment)) return -1;
        if (segment.p_type == PT_TLS) return static_cast<long>(segment.p_memsz);
    }
    return 0;
}

/// VmRSS of `pid` in KiB (0 if unreadable).
long resident_kib(pid_t pid) {
    std::ifstream status("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(status, line))
        if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
    return 0;
}

// Every thread of a process gets the executable's whole static TLS block, zeroed: a large
// thread_local there is resident memory in each of corrald's threads (the namespace thread, the
// nftables worker, the launch worker; once two per isolated session), whether the thread ever
// uses it or not (the read buffer was 256 KiB: 51 MB of 143 MB).
TEST(DaemonMemory, CorraldsThreadsCarryNoLargeStaticTls) {
    const std::string corrald = CORRAL_BINARY_DIR "/supervisor/corrald";
    if (!std::filesystem::exists(corrald)) GTEST_SKIP() << "corrald is not built";
    const long tls = static_tls_bytes(corrald);
    ASSERT_GE(tls, 0) << corrald << " is not a 64-bit ELF file";
    EXPECT_LE(tls, 16 * 1024) << "corrald's static TLS is " << tls
                              << " bytes per thread: a large thread_local belongs on the heap";
}

// Resident memory per isolated session, the part of corrald's that grows with the session count.
// Measured with one session made first (code pages, the loop's buffers, glibc's arenas are then
// in place), then 60 more `default` sessions: before the fixes ~1,300 KiB each, after ~190.
TEST(DaemonMemory, IsolatedSessionsCostLittleOfCorraldsResidentMemory) {
    std::string why;
    if (!corrald_can_run(why)) GTEST_SKIP() << why;
    CorraldProcess daemon;
    ASSERT_TRUE(daemon.ready()) << "corrald did not start:\n" << daemon.log();
    HttpClient c = daemon.client();
    std::vector<std::string> ids;
    auto create = [&] {
        auto res = c.post("/v1/sessions", {{"policy", "default"}});
        ASSERT_EQ(res.status, 201) << res.body;
        ids.push_back(res.json()["id"]);
    };
    create();
    const long before = resident_kib(daemon.pid());
    constexpr int kSessions = 60;
    for (int i = 0; i < kSessions; ++i) {
        create();
        if (::testing::Test::HasFatalFailure()) break;
    }
    const long with = resident_kib(daemon.pid());
    for (const auto& id : ids) EXPECT_EQ(c.del("/v1/sessions/" + id).status, 200);
    ASSERT_FALSE(::testing::Test::HasFatalFailure());
    const long per_session = (with - before) / kSessions;
    std::printf("corrald VmRSS %ld KiB with 1 session, %ld KiB with %d: %ld KiB per session\n",
                before, with, kSessions + 1, per_session);
    EXPECT_LE(per_session, 512) << "each isolated session costs corrald " << per_session
                                << " KiB of resident memory";
    const auto left = daemon.footprint();
    EXPECT_TRUE(left.empty()) << left.describe();
}

}  // namespace
}  // namespace corral
