#!/bin/bash
# Issue 18 (stop 28): how long a `default` session's `run` of /bin/true takes while N other
# `default` sessions exist, i.e. what each fork of a large corrald costs (their threads and
# memory). Prints the median and p90 of RUNS runs, in ms, for one corrald binary; run it for two
# builds one after the other to compare them.
#
#   sudo tests/bench/isolated_density_run.sh CORRALD [N (1000)] [RUNS (40)]
#
# Everything it starts it stops (the daemon ends its sessions); its temp directory is removed.
set -euo pipefail
corrald=${1:?usage: isolated_density_run.sh CORRALD [N] [RUNS]}
n=${2:-1000}
runs=${3:-40}
work=$(mktemp -d /tmp/corral-density-XXXXXX)
pid=""
cleanup() {
    if [[ -n $pid ]]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT
"$corrald" --socket "$work/s" --state-dir "$work/state" --instance "corral-density-$$" \
    --port-range 50000-52999 >"$work/log" 2>&1 &
pid=$!
for _ in $(seq 100); do [[ -S $work/s ]] && break; sleep 0.05; done
create() { curl -sf --unix-socket "$work/s" -X POST http://corrald/v1/sessions -d '{"policy":"default"}'; }
for _ in $(seq "$n"); do create >/dev/null; done
sid=$(create | python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])')
for _ in $(seq "$runs"); do
    curl -sf -o /dev/null -w '%{time_total}\n' --unix-socket "$work/s" -X POST \
        "http://corrald/v1/sessions/$sid/run" -d '{"argv":["/bin/true"]}'
done >"$work/times"
python3 - "$work/times" "$corrald" "$n" <<'PY'
import statistics, sys
times = sorted(float(line) * 1000 for line in open(sys.argv[1]))
print(f"{sys.argv[2]}: default run beside {sys.argv[3]} default sessions: "
      f"median {statistics.median(times):.2f} ms, p90 {times[int(len(times) * 0.9)]:.2f} ms, n={len(times)}")
PY
