#!/bin/bash
# Issue 18's goals, each beside its baseline from the same run (docs/BENCHMARKS.md "Issue 18 at
# stop 27"): `corral run --policy none` against a bare exec, `default` against bubblewrap (CPU
# of every process), and the daemon's `run` against a bare fork+exec server over a kept-alive
# connection, for an earlier build and this one.
#
#   sudo tests/bench/issue18_goals.sh BEFORE_BUILD_DIR [LABEL]
#
# BEFORE_BUILD_DIR holds supervisor/corral and supervisor/corrald of the build to compare with
# (e.g. main's); this tree's build/ is the other. LABEL names the conditions ("idle",
# "stress-ng --cpu 2", ...). Everything it starts it stops; its temp directory is removed.
set -euo pipefail
cd "$(dirname "$0")/../.."
before=${1:?usage: issue18_goals.sh BEFORE_BUILD_DIR [LABEL]}
label=${2:-idle}
bench=build/tests/bench
work=$(mktemp -d /tmp/corral-issue18-XXXXXX)
daemon_pid=""
cleanup() {
    if [[ -n $daemon_pid ]]; then kill "$daemon_pid" 2>/dev/null || true; wait "$daemon_pid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT
echo "== $label: $(uptime)"
build/supervisor/corral policy seccomp default >"$work/default.bpf"
bwrap_default="--unshare-pid --unshare-ipc --unshare-uts --unshare-net --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp --tmpfs /run --tmpfs /home --tmpfs /root --cap-drop ALL --new-session --die-with-parent"
"$bench/corral_bench_launch" --runs 300 --warmup 5 --group "none ($label)" \
    "bare posix_spawn+wait=/bin/true" \
    "corral none, before=$before/supervisor/corral run --policy none -- /bin/true" \
    "corral none, this build=build/supervisor/corral run --policy none -- /bin/true" | grep ROW
"$bench/corral_bench_launch" --runs 100 --warmup 3 --group "default ($label)" --open "9=$work/default.bpf" \
    "bare posix_spawn+wait=/bin/true" --cpu-reference bwrap \
    "corral default=build/supervisor/corral run --policy default -- /bin/true" \
    "bwrap=bwrap $bwrap_default --seccomp 9 -- /bin/true" | grep ROW
for which in before this; do
    corrald=$before/supervisor/corrald
    [[ $which == this ]] && corrald=build/supervisor/corrald
    dir=$work/$which
    mkdir -p "$dir"
    "$corrald" --socket "$dir/s" --state-dir "$dir/state" --instance "corral-issue18-$which-$$" \
        --port-range 46000-46999 >"$dir/log" 2>&1 &
    daemon_pid=$!
    for _ in $(seq 100); do [[ -S $dir/s ]] && break; sleep 0.05; done
    echo "-- corrald, $which build ($corrald)"
    "$bench/corral_bench_daemon" --socket "$dir/s" --daemon-pid "$daemon_pid" \
        --policy-dir tests/bench/policies --only run | grep ROW
    kill "$daemon_pid"
    wait "$daemon_pid" 2>/dev/null || true
    daemon_pid=""
done
echo "== end $label: $(uptime)"
