// corrald-launch: corrald's launch zygote as its own small program (isolation/launch_zygote.hpp).
// corrald carries this binary in its own (corrald_launch_image.cmake) and executes it from a
// sealed memfd in a fork of its launch worker's thread; nobody else has a reason to run it.
//
// Why a program of its own: every command of a `default` session and every namespace holder is a
// clone of the zygote, and a clone copies the mappings of the process it clones (a fork of corrald
// had 118, with 20 shared libraries), which the command's execve then tears down again. Linked
// statically with only the launcher, this one has about a dozen.
#include <charconv>
#include <cstdio>
#include <string_view>

#include <sys/stat.h>
#include <unistd.h>

#include "isolation/launch_zygote.hpp"

namespace {

bool parse_int(std::string_view text, int& value) {
    auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    return error == std::errc() && end == text.data() + text.size() && value >= 0;
}

}  // namespace

int main(int argc, char** argv) {
    // corrald-launch SOCKET PARENT HOLDER_NAME: our end of corrald's socket, the pid of the
    // thread that forked us (we end with it), and the name the holders we clone take.
    int socket = -1, parent = -1;
    struct stat st {};
    if (argc != 4 || !parse_int(argv[1], socket) || !parse_int(argv[2], parent) ||
        ::fstat(socket, &st) != 0 || !S_ISSOCK(st.st_mode)) {
        std::fputs("corrald-launch: corrald's launch zygote; corrald starts it, nobody else\n",
                   stderr);
        return 2;
    }
    corral::launch_zygote_main(socket, parent, argv[3]);
}
