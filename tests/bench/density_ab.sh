#!/usr/bin/env bash
# Two corrald binaries side by side on issue 18's density case: each ROUNDS times, alternated, a
# fresh daemon (own socket, state dir and instance under a temp dir, removed after) measured by
# density_cpu.py. Root.   tests/bench/density_ab.sh CORRALD_A CORRALD_B [ROUNDS]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
a=$1 b=$2 rounds=${3:-3}
for round in $(seq "$rounds"); do
    for tag in A B; do
        bin=$a; [[ $tag == B ]] && bin=$b
        work=$(mktemp -d /tmp/corral-density-ab.XXXXXX)
        "$bin" --socket "$work/s" --state-dir "$work/state" --instance "corral-density-ab-$$" \
            --port-range 41000-41999 >"$work/log" 2>&1 &
        pid=$!
        for _ in $(seq 100); do [[ -S $work/s ]] && break; sleep 0.05; done
        echo "$tag round $round, load $(cut -d' ' -f1 /proc/loadavg): $(python3 "$here/density_cpu.py" "$work/s" "$pid")"
        kill -TERM "$pid"; wait "$pid" || true
        rm -rf "$work"
    done
done
