#!/usr/bin/env bash
# Makes supervisor/corral_text_order.txt: the functions of the static `corral` that its launches
# execute, in the order they first take a page fault, for lld's --symbol-ordering-file
# (supervisor/CMakeLists.txt). With them side by side a `corral run` touches a few 64 KiB windows
# of text instead of one per function spread over 5 MB (issue 18, docs/BENCHMARKS.md).
#
#   sudo scripts/corral-text-order.sh [BUILD_DIR]     # a Release tree; default build-bench
#
# How: `corral` is linked with the list so far; each workload below runs under `perf record -e
# page-faults -c 1 -d`, which gives every fault's address; an address in .text names the function
# symbol that holds it (nm); symbols not yet listed are appended in the order they faulted.
# Linking with the longer list moves those functions next to the others, which uncovers the next
# ones (a function first reached inside a window another fault had mapped); it stops when a round
# adds nothing, or after 30 rounds. Run it again after a change to what a launch executes: a
# stale list costs only page faults (lld places a symbol it does not find nowhere special).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build-bench}
order=$root/supervisor/corral_text_order.txt
for tool in perf ld.lld ninja nm python3; do
  command -v "$tool" >/dev/null || { echo "corral-text-order: needs $tool" >&2; exit 1; }
done
[ "$(id -u)" -eq 0 ] || { echo "corral-text-order: needs root (corral run)" >&2; exit 1; }
[ -f "$build/build.ninja" ] || { echo "corral-text-order: no build tree at $build" >&2; exit 1; }

work=$(mktemp -d /tmp/corral-text-order-XXXXXX)
trap 'rm -rf "$work"' EXIT
list=$work/list.txt
: >"$list"
# A root-owned job directory, as a CI job's checkout often is: the `default` run idmaps it.
jobdir=$work/job
mkdir "$jobdir"

# The link command ninja would run, with our list and our output instead of the tree's.
link=$(cd "$build" && ninja -t commands supervisor/corral | tail -1 |
  sed -E 's/^: && //; s/ && :$//; s/-fuse-ld=[a-z]+//; s/-Wl,--symbol-ordering-file,[^ ]+//')
relink() {
  (cd "$build" && eval "${link/-o supervisor\/corral/-fuse-ld=lld -Wl,--symbol-ordering-file,$list -Wl,--no-warn-symbol-ordering -o $work/corral}")
}

# What launches run: each tier of the benchmarks, a policy file (the YAML parser), the filter
# export and the version (start-up alone).
workloads=(
  "--version"
  "run --policy none -- /bin/true"
  "run --policy default -- /bin/true"
  "run --policy strict -- /bin/true"
  "run --policy $root/tests/bench/policies/tier-net.yaml -- /bin/true"
  "run --policy $root/tests/bench/policies/tier-mount-pid.yaml -- /bin/true"
  "policy seccomp default"
)

# The function symbols that the faults in faults.txt (hex addresses) fall in, not listed yet, in
# the order of their first fault.
new_symbols() {
  nm -n --defined-only "$work/corral" >"$work/nm.txt"
  python3 - "$work/nm.txt" "$work/faults.txt" "$list" <<'PY'
import bisect, sys
nm, faults, listed = sys.argv[1:4]
starts, names = [], []
for line in open(nm):
    words = line.split()
    if len(words) == 3 and words[1] in "TtWi":
        starts.append(int(words[0], 16))
        names.append(words[2])
seen = set(line.strip() for line in open(listed))
for line in open(faults):
    address = int(line, 16)
    i = bisect.bisect_right(starts, address) - 1
    # Only addresses in the text (the next symbol after the last function bounds it loosely;
    # data faults land far from any function symbol's start, in other sections).
    if i < 0 or i + 1 >= len(starts) or address >= starts[i + 1]:
        continue
    if names[i] not in seen:
        seen.add(names[i])
        print(names[i])
PY
}

for round in $(seq 30); do
  relink
  : >"$work/faults.txt"
  for w in "${workloads[@]}"; do
    # shellcheck disable=SC2086  # the workload is words
    (cd "$jobdir" && perf record -q -c 1 -e page-faults -d -o "$work/pf.data" -- "$work/corral" $w \
      >/dev/null 2>&1) || true
    perf script -i "$work/pf.data" -F comm,addr 2>/dev/null | awk '$1 == "corral" { print $2 }' \
      >>"$work/faults.txt"
  done
  new=$(new_symbols)
  echo "round $round: $(wc -l <"$work/faults.txt") page faults of corral in ${#workloads[@]} workloads," \
    "$(printf '%s' "$new" | grep -c . || true) symbols new" >&2
  [ -z "$new" ] && break
  printf '%s\n' "$new" >>"$list"
done
cp "$list" "$order"
echo "corral-text-order: $(wc -l <"$order") symbols in $order" >&2
