// make_mapping_namespace (isolation/namespaces.hpp), the user namespace that carries an idmapped
// workdir's mapping, against the real kernel (root): the namespace it returns maps what was
// asked and nothing else, and its helper process (cloned sharing our memory on x86_64 since
// issue 18, forked elsewhere) is gone and reaped when it returns, on every call.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/nsfs.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "base/file_io.hpp"
#include "base/pipe.hpp"
#include "isolation/clone_vm.hpp"
#include "isolation/namespaces.hpp"

namespace corral {
namespace {

namespace fs = std::filesystem;

/// Our children, as the kernel lists them for every thread of ours.
std::string our_children() {
    std::string all;
    for (const auto& task : fs::directory_iterator("/proc/self/task"))
        if (auto text = read_file((task.path() / "children").string())) all += *text;
    return all;
}

size_t open_descriptors() {
    size_t n = 0;
    for ([[maybe_unused]] const auto& entry : fs::directory_iterator("/proc/self/fd")) ++n;
    return n;
}

/// What a process that joined `ns` reads as its uid_map and gid_map ("" if it could not join).
std::string maps_seen_inside(int ns) {
    auto pipe = make_pipe();
    if (!pipe) return "";
    const pid_t child = ::fork();
    if (child == 0) {
        if (::setns(ns, CLONE_NEWUSER) != 0) _exit(1);
        auto uid = read_file("/proc/self/uid_map");
        auto gid = read_file("/proc/self/gid_map");
        const std::string text = (uid ? *uid : "?") + "|" + (gid ? *gid : "?");
        (void)!::write(pipe->write_end.get(), text.data(), text.size());
        _exit(0);
    }
    pipe->write_end.reset();
    std::string text;
    char buf[256];
    for (ssize_t n; (n = ::read(pipe->read_end.get(), buf, sizeof buf)) > 0;)
        text.append(buf, static_cast<size_t>(n));
    int status = 0;
    ::waitpid(child, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? text : "";
}

std::string squeeze(const std::string& s) {
    std::string out;
    for (char c : s)
        if (c != ' ' || (!out.empty() && out.back() != ' ')) out += c;
    return out;
}

class MappingNamespace : public ::testing::Test {
  protected:
    void SetUp() override {
        if (::geteuid() != 0) GTEST_SKIP() << "needs root (writes another process's id maps)";
    }
};

TEST_F(MappingNamespace, MapsExactlyTheOneIdAskedFor) {
    auto ns = make_mapping_namespace({1000, 1879048197, 1}, {1001, 1879048198, 1});
    ASSERT_TRUE(ns) << ns.error().describe();
    EXPECT_EQ(::ioctl(ns->get(), NS_GET_NSTYPE), CLONE_NEWUSER);
    const std::string maps = squeeze(maps_seen_inside(ns->get()));
    EXPECT_EQ(maps, "1000 1879048197 1\n| 1001 1879048198 1\n");
}

// The helper must never outlive the call: one left sharing our memory would hold it (and its
// user namespace) for as long as it lived, and one per idmapped run would pile up. Every call
// ends and reaps it, and keeps no descriptor but the namespace's.
TEST_F(MappingNamespace, LeavesNoHelperAndNoDescriptorBehind) {
    const std::string children_before = our_children();
    const size_t descriptors_before = open_descriptors();
    for (int i = 0; i < 50; ++i) {
        auto ns = make_mapping_namespace({0, 1879048192u + static_cast<uint32_t>(i), 1},
                                         {0, 1879048192u + static_cast<uint32_t>(i), 1});
        ASSERT_TRUE(ns) << ns.error().describe();
        ASSERT_EQ(our_children(), children_before) << "a helper still runs after call " << i;
    }
    EXPECT_EQ(open_descriptors(), descriptors_before);
    siginfo_t info{};
    EXPECT_EQ(::waitid(P_ALL, 0, &info, WEXITED | WNOHANG), -1) << "an unreaped child";
}

// What the helper sharing our memory is for (issue 18): a forked helper write-protects every page
// of ours, and each page we write after the call takes a copy-on-write fault; one that shares
// our memory leaves our page tables as they were. Pins which path ran: a sharing path that
// quietly fell back to a fork fails here.
TEST_F(MappingNamespace, SharingHelperLeavesOurPagesWritableWithoutFaults) {
    if (!clone_on_stack_available()) GTEST_SKIP() << "the helper is forked on this build";
    constexpr size_t kPages = 512;
    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    std::vector<char> memory(kPages * page, 1);  // every page touched, so present and writable
    auto ns = make_mapping_namespace({0, 1879048300, 1}, {0, 1879048300, 1});
    ASSERT_TRUE(ns) << ns.error().describe();
    rusage before{}, after{};
    ::getrusage(RUSAGE_THREAD, &before);
    for (size_t i = 0; i < kPages; ++i) memory[i * page] = 2;
    ::getrusage(RUSAGE_THREAD, &after);
    EXPECT_LT(after.ru_minflt - before.ru_minflt, 32)
        << "writing " << kPages << " pages after the call faulted: our memory was copied";
}

// A host id asked for that the caller may not map is refused by the kernel and said so; the
// helper is ended all the same.
TEST_F(MappingNamespace, AMapTheKernelRefusesIsAnErrorAndLeavesNothing) {
    const std::string children_before = our_children();
    auto ns = make_mapping_namespace({0, 4294967295u, 1}, {0, 4294967295u, 1});  // -1: invalid
    ASSERT_FALSE(ns);
    EXPECT_NE(ns.error().describe().find("uid_map"), std::string::npos) << ns.error().describe();
    EXPECT_EQ(our_children(), children_before);
}

}  // namespace
}  // namespace corral
