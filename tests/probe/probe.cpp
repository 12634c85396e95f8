// corral_probe: tiny actions run INSIDE a sandbox by the integration tests, each printing one
// line that says what the kernel answered ("ok" or the errno name), so a test can assert on the
// real outcome of a system call rather than on a shell's wording.
//
//   corral_probe ptrace | mount | unshare-mount | caps | pids | netdevs
//   corral_probe write PATH | connect PORT | alloc MIB

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>

namespace {

int report(int result) {
    if (result == 0) {
        std::puts("ok");
        return 0;
    }
    const char* name = strerrorname_np(errno);
    std::puts(name ? name : "error");
    return 1;
}

int list_dir(const char* path, bool numeric_only) {
    DIR* dir = opendir(path);
    if (!dir) return report(-1);
    while (dirent* entry = readdir(dir)) {
        std::string name = entry->d_name;
        if (name == "." || name == "..") continue;
        if (numeric_only && name.find_first_not_of("0123456789") != std::string::npos) continue;
        std::puts(name.c_str());
    }
    closedir(dir);
    return 0;
}

sockaddr_in loopback(int port) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return addr;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) return 2;
    std::string action = argv[1];
    if (action == "ptrace") return report(static_cast<int>(ptrace(PTRACE_TRACEME, 0, nullptr, nullptr)));
    if (action == "mount") return report(mount("none", "/mnt", "tmpfs", 0, nullptr));
    if (action == "unshare-mount") return report(unshare(CLONE_NEWNS));
    if (action == "pids") return list_dir("/proc", true);
    if (action == "netdevs") return list_dir("/sys/class/net", false);
    if (action == "caps") {
        std::ifstream status("/proc/self/status");
        for (std::string line; std::getline(status, line);)
            if (line.rfind("Cap", 0) == 0 || line.rfind("NoNewPrivs", 0) == 0 ||
                line.rfind("Seccomp:", 0) == 0)
                std::puts(line.c_str());
        return 0;
    }
    if (action == "write" && argc == 3) {
        FILE* f = std::fopen(argv[2], "w");
        if (!f) return report(-1);
        std::fclose(f);
        return report(0);
    }
    if (action == "alloc" && argc == 3) {  // touch every page, so the memory is really charged
        size_t bytes = static_cast<size_t>(std::atol(argv[2])) << 20;
        char* block = static_cast<char*>(std::malloc(bytes));
        if (!block) return report(-1);
        for (size_t i = 0; i < bytes; i += 4096) block[i] = 1;
        std::puts("allocated");
        return 0;
    }
    if (action == "connect" && argc == 3) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in addr = loopback(std::atoi(argv[2]));
        return report(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr));
    }
    return 2;
}
