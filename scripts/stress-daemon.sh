#!/usr/bin/env bash
# Issue 12's "Done when" figures, reproducibly: builds corrald and corral_bench_stress into the
# build dir, then runs the stress bench, which starts a corrald of its own (own socket, state dir
# and cgroup instance, under a temp dir) for each part and removes everything it made, also on
# failure or Ctrl-C. Must run as root. Heavy: on a shared machine run one part at a time.
#
#   scripts/stress-daemon.sh [--part restart|delete|rss]... [--rounds N] [--sessions N] [--runs N]
#     restart  20 kill -9/restart rounds under a 4-client workload: failed starts, lost session
#              records, orphaned processes, unowned cgroups/mounts/directories
#     delete   20 rounds of 500 sessions (none/default alternating) ended by 8 parallel DELETEs
#     rss      the daemon's RSS and descriptors over 10,000 runs in one session
#   BUILD_DIR=build-other scripts/stress-daemon.sh ...   (default: build)
# Exit status 0 when every figure is as issue 12 requires, 1 otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
if [[ $(id -u) != 0 ]]; then echo "stress-daemon.sh: run as root (cgroups, namespaces)" >&2; exit 2; fi
[[ -f $build/build.ninja || -f $build/Makefile ]] || scripts/build.sh >&2
cmake --build "$build" --target corrald corral_bench_stress -j"$(nproc)" >&2
echo "machine: $(nproc) cores, $(uptime)"
exec "$build/tests/bench/corral_bench_stress" "$@"
