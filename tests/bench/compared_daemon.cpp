// See compared_daemon.hpp.
#include "tests/bench/compared_daemon.hpp"

#include <cstdio>
#include <utility>

namespace corral::bench {

bool start_compared_daemon(ComparedDaemon& one, std::string label,
                           std::vector<std::string> extra_args) {
    one.label = std::move(label);
    one.daemon = std::make_unique<testing::CorraldProcess>(std::move(extra_args));
    if (!one.daemon->ready()) {
        std::fprintf(stderr, "corrald %s did not start:\n%s\n", one.label.c_str(),
                     one.daemon->log().c_str());
        return false;
    }
    one.socket = one.daemon->socket_path();
    return true;
}

}  // namespace corral::bench
