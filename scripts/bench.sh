#!/usr/bin/env bash
# One command for every benchmark: installs the baselines (bubblewrap, firejail, hyperfine) when
# missing, builds Release into build-bench, runs the programs of tests/bench and prints one table of
# medians, p99 and ratios against baselines measured in the same run. Must run as root (cgroups,
# namespaces). Everything it creates (daemon, sessions, cgroups, temp dirs) is removed on exit.
#
#   scripts/bench.sh [--quick] [--load N] [--only launch|cgroup|daemon|egress|micro]...
#   RUNS=200 scripts/bench.sh            # launch runs per case (default 100; --quick: 20)
#   --load N: the whole run under N `stress-ng --cpu 1`-style workers (`stress-ng --cpu N`),
#   the documented background load of a busy CI runner; the table's header says so.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=${BUILD_DIR:-$root/build-bench}
runs=${RUNS:-100}
load=0
only=()
while (($#)); do
    case $1 in
        --quick) runs=${RUNS:-20}; export CORRAL_BENCH_QUICK=1 ;;
        --only) only+=("$2"); shift ;;
        --load) load=$2; shift ;;
        *) echo "usage: $0 [--quick] [--load N] [--only launch|cgroup|daemon|egress|micro]..." >&2; exit 2 ;;
    esac
    shift
done
wants() { ((${#only[@]} == 0)) || [[ " ${only[*]} " == *" $1 "* ]]; }

if [[ $(id -u) != 0 ]]; then echo "bench.sh: run as root (cgroups and namespaces)" >&2; exit 1; fi

# --- baselines -------------------------------------------------------------------------------
missing=()
tools="bwrap:bubblewrap firejail:firejail hyperfine:hyperfine"
((load > 0)) && tools+=" stress-ng:stress-ng"
for tool in $tools; do
    command -v "${tool%%:*}" >/dev/null || missing+=("${tool#*:}")
done
if ((${#missing[@]})); then
    echo "bench.sh: installing ${missing[*]}" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2 ||
        echo "bench.sh: could not install ${missing[*]}; their rows will say so" >&2
fi

# --- build -------------------------------------------------------------------------------------
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCORRAL_BUILD_BENCH=ON >/dev/null
# Only what the chosen groups run (a Release tree of everything takes long on a shared 2-vCPU box).
targets=(corral corral_bench_cgroup)  # the cgroup program also removes a dead daemon's instance
wants launch && targets+=(corral_bench_launch)
wants micro && targets+=(corral_bench_micro)
wants egress && targets+=(corral_bench_egress)
cmake --build "$build" --target "${targets[@]}" -j"$(nproc)" >&2
# The daemon is built on its own: if it does not build, the other benchmarks still run and the
# daemon rows say why.
daemon_build_error=""
if wants daemon &&
    ! cmake --build "$build" --target corrald corral_bench_daemon -j"$(nproc)" >"$build/bench-daemon-build.log" 2>&1; then
    daemon_build_error="corrald did not build: $(grep -m1 -E 'error' "$build/bench-daemon-build.log" | cut -c1-120)"
    echo "bench.sh: $daemon_build_error" >&2
fi

# A benchmark program that crashes loses its rows, not the whole table.
set +o pipefail
corral=$build/supervisor/corral
bench=$build/tests/bench
policies=$root/tests/bench/policies
work=$(mktemp -d /tmp/corral-bench-XXXXXX)
rows=$work/rows.tsv
: >"$rows"
daemon_pid=""
load_pid=""

cleanup() {
    set +e
    if [[ -n $load_pid ]]; then kill -TERM "$load_pid" 2>/dev/null; wait "$load_pid" 2>/dev/null; fi
    if [[ -n $daemon_pid ]] && kill -0 "$daemon_pid" 2>/dev/null; then
        kill -TERM "$daemon_pid"
        for _ in $(seq 50); do kill -0 "$daemon_pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$daemon_pid" 2>/dev/null
    fi
    # A daemon that died uncleanly leaves its instance subtree behind; it is ours to remove.
    [[ -n ${instance:-} ]] && "$bench/corral_bench_cgroup" --remove-instance "$instance" >/dev/null
    rm -rf "$work"
}
trap cleanup EXIT INT TERM

collect() { tee -a "$work/log" | grep '^ROW' >>"$rows" || true; }

# --- background load (--load N) ----------------------------------------------------------------
load_note="no load of its own (the machine's other work: see the load averages)"
if ((load > 0)); then
    stress-ng --cpu "$load" --quiet >/dev/null 2>&1 &
    load_pid=$!
    sleep 5  # until the workers run at full speed and the load average starts to show them
    load_note="under $load stress-ng --cpu workers (pid $load_pid)"
    echo "bench.sh: $load_note" >&2
fi
load_at_start=$(cut -d' ' -f1-3 /proc/loadavg)

# --- (1) launch latency per tier -------------------------------------------------------------
if wants launch; then
    echo "== launch latency ($runs runs per case, round-robin) ==" >&2
    # corral's mount tiers always get a minimal /dev (devices, devpts, shm) and a fresh /proc;
    # bwrap's equivalent of that is --dev /dev --proc /proc over a bind of /.
    bwrap_fs="--bind / / --dev /dev --proc /proc"
    bwrap_default="--unshare-pid --unshare-ipc --unshare-uts --unshare-net --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp --tmpfs /run --tmpfs /home --tmpfs /root --cap-drop ALL --new-session --die-with-parent"
    fj="firejail --quiet --noprofile"
    "$bench/corral_bench_launch" --runs "$runs" --warmup 3 --group "launch: cgroup only" \
        "bare posix_spawn+wait=/bin/true" \
        "corral none=$corral run --policy none -- /bin/true" | collect
    "$bench/corral_bench_launch" --runs "$runs" --warmup 3 --group "launch: +mount+pid ns" \
        "bare posix_spawn+wait=/bin/true" \
        "corral mount+pid=$corral run --policy $policies/tier-mount-pid.yaml -- /bin/true" \
        "bwrap --unshare-pid=bwrap --unshare-pid $bwrap_fs -- /bin/true" \
        "firejail (always mount+pid)=$fj -- /bin/true" | collect
    "$bench/corral_bench_launch" --runs "$runs" --warmup 3 --group "launch: +ipc+uts+net ns" \
        "bare posix_spawn+wait=/bin/true" \
        "corral +net=$corral run --policy $policies/tier-net.yaml -- /bin/true" \
        "bwrap +net=bwrap --unshare-pid --unshare-ipc --unshare-uts --unshare-net $bwrap_fs -- /bin/true" \
        "firejail net none=$fj --net=none -- /bin/true" | collect
    # bwrap takes a compiled filter on a descriptor: give it exactly corral's default filter, so
    # that row has the same confinement (the no-seccomp row shows what the filter costs bwrap).
    "$corral" policy seccomp default >"$work/default.bpf"
    "$bench/corral_bench_launch" --runs "$runs" --warmup 3 --group "launch: default (ro /, seccomp, no caps)" \
        --open "9=$work/default.bpf" \
        "bare posix_spawn+wait=/bin/true" \
        --cpu-reference "bwrap default-equiv + corral's seccomp" \
        "corral default=$corral run --policy default -- /bin/true" \
        "corral strict=$corral run --policy strict -- /bin/true" \
        "bwrap default-equiv + corral's seccomp=bwrap $bwrap_default --seccomp 9 -- /bin/true" \
        "bwrap default-equiv (no seccomp)=bwrap $bwrap_default -- /bin/true" \
        "firejail default-equiv=$fj --net=none --seccomp --caps.drop=all --private-tmp --nonewprivs -- /bin/true" | collect
    if command -v hyperfine >/dev/null; then
        # Cross-check of the same cases with an independent tool (means, in the log only).
        hyperfine -N -w 3 -r "$runs" --export-markdown "$work/hyperfine.md" \
            "/bin/true" "$corral run --policy none -- /bin/true" \
            "$corral run --policy default -- /bin/true" \
            "$corral run --policy strict -- /bin/true" >"$work/hyperfine.log" 2>&1 &&
            { echo "== hyperfine cross-check (means) ==" >&2; cat "$work/hyperfine.md" >&2; }
    fi
fi

# --- (4b) raw cgroup.kill baseline -----------------------------------------------------------
if wants cgroup; then
    echo "== raw cgroup.kill of a 1,000-process tree ==" >&2
    "$bench/corral_bench_cgroup" --procs 1000 --runs "${KILL_RUNS:-5}" | collect
fi

# --- (2)-(6) daemon --------------------------------------------------------------------------
# Each group against a corrald of its own: `density`'s session-ready rows against one that keeps
# a pool of prepared `default` sessions (`--prepare default=8`, what issue 18's "session ready"
# goal is measured with; the rows' group says "pool of 8"), the rest against one without, whose
# `default` creations (churn) must be creations, not claims.
start_daemon() {
    instance=corral-bench-$$
    sock=$work/corrald.sock
    rm -rf "$work/state"
    "$build/supervisor/corrald" --socket "$sock" --state-dir "$work/state" \
        --instance "$instance" --port-range 41000-41999 "$@" >>"$work/corrald.log" 2>&1 &
    daemon_pid=$!
    for _ in $(seq 100); do [[ -S $sock ]] && break; sleep 0.05; done
    echo "== corrald (pid $daemon_pid${*:+, $*}) ==" >&2
}
stop_daemon() {
    kill -TERM "$daemon_pid" 2>/dev/null || true
    wait "$daemon_pid" 2>/dev/null || true
    daemon_pid=""
}
if wants daemon; then
    if [[ -z $daemon_build_error && -x $build/supervisor/corrald ]]; then
        raw_kill=$(awk -F'\t' '$2 ~ /^kill/ && $3 ~ /^raw/ {print $4}' "$rows")
        start_daemon
        "$bench/corral_bench_daemon" --socket "$sock" --daemon-pid "$daemon_pid" \
            --policy-dir "$policies" --kill-baseline "${raw_kill:-0}" \
            --only run --only churn --only kill --only output | collect
        stop_daemon
        start_daemon --prepare default=8
        sleep 1  # the pool's first eight preparations
        "$bench/corral_bench_daemon" --socket "$sock" --daemon-pid "$daemon_pid" \
            --policy-dir "$policies" --only density | collect
        stop_daemon
    else
        printf 'ROW\tdaemon\t(all)\t-\t-\t-\t-\tPENDING (%s)\n' "${daemon_build_error:-corrald not built}" >>"$rows"
    fi
fi

# --- egress proxy: throughput and connect latency through it vs direct loopback -------------
if wants egress; then
    echo "== egress proxy vs direct loopback ==" >&2
    "$bench/corral_bench_egress" --runs "${EGRESS_RUNS:-200}" --megabytes "${EGRESS_MB:-256}" | collect
fi

# --- micro-benchmarks (Google Benchmark): where a launch spends its time ---------------------
if wants micro; then
    echo "== micro-benchmarks ==" >&2
    "$bench/corral_bench_micro" --benchmark_min_time=0.2 --benchmark_repetitions=3 \
        --benchmark_report_aggregates_only=true >&2 || true
fi

# --- the table ---------------------------------------------------------------------------------
echo
echo "corral benchmarks — $(nproc) CPUs, kernel $(uname -r), cgroup mode: $(
    if [[ -f /sys/fs/cgroup/cgroup.controllers ]]; then echo unified;
    elif grep -q cgroup2 /proc/self/mountinfo; then echo hybrid; else echo legacy; fi)"
echo "load: $load_note; load average at the start $load_at_start, at the end $(cut -d' ' -f1-3 /proc/loadavg)"
{
    printf 'group\tcase\tmedian\tp99\tunit\tvs baseline\tnote\n'
    cut -f2- "$rows"
} | column -t -s $'\t'
