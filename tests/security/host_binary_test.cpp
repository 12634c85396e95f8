// Escapes through the supervisor's own process: its binary and its root, reached via /proc.
// corral's namespace holder is PID 1 of the sandbox's PID namespace and is a forked corral process
// (it never execs), so /proc/1/exe names the host's corral binary and /proc/1/root, /proc/1/cwd
// and /proc/1/fd are the holder's view. The sandbox, running without capabilities, must not be
// able to open any of them.

#include <sys/stat.h>

#include <fstream>

#include "support/sandbox_harness.hpp"

namespace corral::security {
namespace {

namespace fs = std::filesystem;

std::string file_bytes(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), {});
}

class HostBinary : public SandboxTest {};

// CVE-2019-5736 (runc): the container opened the runtime's binary through /proc/<pid>/exe and
// overwrote it. Here corral runs from a private copy outside the sandbox's view, so a working
// attack changes only that copy, and the test sees the change.
TEST_F(HostBinary, ProcExeOfSupervisorCannotBeOpenedForWriting_CVE_2019_5736) {
    char tmpl[] = "/tmp/corral-escape-bin-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    const fs::path bin_dir = tmpl;
    const fs::path copy = bin_dir / "corral";
    fs::copy_file(std::string(CORRAL_BINARY_DIR) + "/supervisor/corral", copy);
    ::chmod(copy.c_str(), 0755);
    const std::string before = file_bytes(copy);

    RunOptions options;
    options.corral_binary = copy.string();
    auto r = corral({"run", "--policy", "default", "--", probe(), "exe-write"}, options);
    const std::string after = file_bytes(copy);
    fs::remove_all(bin_dir);

    EXPECT_EQ(r.exit_code, 0) << r.err;
    auto a = answers(r.out);
    ASSERT_TRUE(a.count("exe self")) << r.out << r.err;
    for (const auto& [label, result] : a) EXPECT_NE(result, "ok") << label << "\n" << r.out;
    // The holder is visible as PID 1: the attack really aimed at corral's own process.
    EXPECT_TRUE(a.count("exe 1")) << r.out;
    EXPECT_TRUE(after == before) << "the host's corral binary was modified from inside";
}

// The same handle is a way out of the filesystem view: the holder's root, cwd and open files
// (runc's CVE-2024-21626 leaked a host directory fd into the container the same way).
TEST_F(HostBinary, HolderRootCwdAndFdsAreUnreachable_CVE_2024_21626) {
    const std::string token = unique_token();
    auto r = attack("default", {"create", "/proc/1/root/tmp/" + token, "/proc/1/cwd/" + token});
    auto a = answers(r.out);
    EXPECT_NE(a["/proc/1/root/tmp/" + token], "ok") << r.out;
    EXPECT_NE(a["/proc/1/cwd/" + token], "ok") << r.out;
    EXPECT_FALSE(fs::exists("/tmp/" + token));
    EXPECT_FALSE(fs::exists("/" + token));
    std::error_code ignored;
    fs::remove("/tmp/" + token, ignored);
    fs::remove("/" + token, ignored);

    auto fds = attack("default", {"open-fds", "1"});
    EXPECT_NE(fds.out, "") << fds.err;
    for (const auto& [label, result] : answers(fds.out))
        EXPECT_NE(result, "ok") << label << "\n" << fds.out;
}

}  // namespace
}  // namespace corral::security
