#include <sys/prctl.h>

#include <cstdio>

#include "supervisor/cli/commands.hpp"

int main(int argc, char** argv) {
    // Non-dumpable, as corrald (see corrald_main.cpp): `corral run`'s children and the sandbox's
    // PID 1 are copies of this process (its environment: a CI job's secrets) until execve.
    if (::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) {
        std::perror("corral: prctl(PR_SET_DUMPABLE, 0)");
        return 125;
    }
    return corral::cli::main(argc, argv);
}
