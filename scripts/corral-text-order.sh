#!/usr/bin/env bash
# Makes supervisor/corral_text_order.txt: the functions of the static `corral` that its launches
# execute, in the order they first take a page fault, for lld's --symbol-ordering-file
# (supervisor/CMakeLists.txt). With them side by side a `corral run` touches a few 64 KiB windows
# of text instead of one per function spread over 5 MB (issue 18, docs/BENCHMARKS.md).
# With --zygote, supervisor/corrald_launch_text_order.txt the same way for corrald's launch
# zygote (`corrald-launch`): the functions its forks run before their execve (a command's launch,
# a session's holder, a prepared session's waiting first process) and the zygote's own loop.
#
#   sudo scripts/corral-text-order.sh [--zygote] [BUILD_DIR]   # a Release tree; default build-bench
#
# How: the binary is linked with the list so far; each workload below runs under `perf record -e
# page-faults -c 1 -d`, which gives every fault's address; an address in .text names the function
# symbol that holds it (nm); symbols not yet listed are appended in the order they faulted.
# Linking with the longer list moves those functions next to the others, which uncovers the next
# ones (a function first reached inside a window another fault had mapped); it stops when a round
# adds nothing, or after 30 rounds. Run it again after a change to what a launch executes: a
# stale list costs only page faults (lld places a symbol it does not find nowhere special).
# `corral` is relinked on the side; the zygote, which corrald carries in its own binary, is
# relinked in the build tree with the list written into the source tree as it grows.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
zygote=false
if [ "${1:-}" = --zygote ]; then zygote=true; shift; fi
build=${1:-$root/build-bench}
if $zygote; then
  order=$root/supervisor/corrald_launch_text_order.txt
  binary=$build/supervisor/corrald-launch
else
  order=$root/supervisor/corral_text_order.txt
fi
for tool in perf ld.lld ninja nm python3; do
  command -v "$tool" >/dev/null || { echo "corral-text-order: needs $tool" >&2; exit 1; }
done
[ "$(id -u)" -eq 0 ] || { echo "corral-text-order: needs root (corral run)" >&2; exit 1; }
[ -f "$build/build.ninja" ] || { echo "corral-text-order: no build tree at $build" >&2; exit 1; }

work=$(mktemp -d /tmp/corral-text-order-XXXXXX)
daemon=""
trap '[ -z "$daemon" ] || kill "$daemon" 2>/dev/null; rm -rf "$work"' EXIT
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
$zygote || binary=$work/corral
if $zygote; then
  # The tree's own link (corrald-launch, its image, corrald), with the list as the tree's file.
  # CMake applies a list only where the file exists when it configures.
  [ -f "$order" ] || { : >"$order"; cmake "$build" >/dev/null; }
  relink() {
    cp "$list" "$order"
    ninja -C "$build" supervisor/corrald >/dev/null
  }
fi

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
  nm -n --defined-only "$binary" >"$work/nm.txt"
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

# corral's faults: each workload above, corral's own process.
corral_faults() {
  for w in "${workloads[@]}"; do
    # shellcheck disable=SC2086  # the workload is words
    (cd "$jobdir" && perf record -q -c 1 -e page-faults -d -o "$work/pf.data" -- "$work/corral" $w \
      >/dev/null 2>&1) || true
    perf script -i "$work/pf.data" -F comm,addr 2>/dev/null | awk '$1 == "corral" { print $2 }' \
      >>"$work/faults.txt"
  done
}

# The zygote's faults: a corrald of the tree with a pool of two prepared `default` sessions
# serves sessions of the other tiers (their holders), runs, spawns and execs in every one
# (launches), and two claims of `default` from the pool (their waiting first processes; the
# pool's refills make new holders while we record); every fault in the zygote's text, whichever
# of its forks took it, counts.
# Its text is at a random address (a static PIE, from a memfd): the zygote's maps give it.
zygote_faults() {
  rm -rf "$work/state" "$work/d.sock"
  "$build/supervisor/corrald" --socket "$work/d.sock" --state-dir "$work/state" \
    --instance corral-text-order --port-range 45000-45999 --prepare default=2 \
    >>"$work/corrald.log" 2>&1 &
  daemon=$!
  for _ in $(seq 200); do [ -S "$work/d.sock" ] && break; sleep 0.05; done
  sleep 1  # the pool's two sessions prepared
  local z
  z=$(ps -o pid=,comm= --ppid "$daemon" | awk '$2 == "corrald-launch" { print $1; exit }')
  [ -n "$z" ] || { echo "corral-text-order: corrald started no zygote" >&2; exit 1; }
  local span
  span=$(awk '/corrald-launch/ { split($1, r, "-"); if (!b) b = r[1]; e = r[2] } END { print b, e }' \
    "/proc/$z/maps")
  perf record -q -a -c 1 -e page-faults -d -o "$work/pf.data" -- \
    python3 - "$work/d.sock" "$root" >/dev/null 2>&1 <<'PY' || true
import json, sys
sys.path.insert(0, sys.argv[2] + "/tests/bench")
from unix_http import UnixConnection
c = UnixConnection(sys.argv[1])
def call(method, path, body=None):
    c.request(method, path, body=json.dumps(body) if body is not None else None,
              headers={"Content-Type": "application/json"})
    response = c.getresponse()
    return json.loads(response.read() or b"null")
tiers = [{"policy": "default"}, {"policy": "strict"}]
for name in ("tier-mount-pid.yaml", "tier-net.yaml"):
    tiers.append({"policyYaml": open(sys.argv[2] + "/tests/bench/policies/" + name).read()})
for body in tiers + [{"policy": "default"}]:  # both `default` ones are claims from the pool
    sid = call("POST", "/v1/sessions", body)["id"]
    base = "/v1/sessions/" + sid
    for _ in range(3):
        call("POST", base + "/run", {"argv": ["/bin/true"]})
    call("POST", base + "/processes", {"argv": ["/bin/sleep", "0.01"]})
    call("POST", base + "/run", {"argv": ["/bin/sh", "-c", "echo hi >&2"], "cwd": "/tmp"})
    call("DELETE", base)
PY
  kill "$daemon" 2>/dev/null || true
  wait "$daemon" 2>/dev/null || true
  daemon=""
  # Instruction fetches (the address on the faulting instruction's page) in the zygote's
  # mapping, as link-time addresses (its first segment is linked at 0).
  perf script -i "$work/pf.data" -F addr,ip 2>/dev/null | python3 -c '
import sys
base, end = (int(x, 16) for x in sys.argv[1:3])
for line in sys.stdin:
    words = line.split()
    if len(words) != 2: continue
    addr, ip = int(words[0], 16), int(words[1], 16)
    if base <= addr < end and addr >> 12 == ip >> 12: print("%x" % (addr - base))
' $span >>"$work/faults.txt"
}

for round in $(seq 30); do
  relink
  : >"$work/faults.txt"
  if $zygote; then zygote_faults; else corral_faults; fi
  new=$(new_symbols)
  echo "round $round: $(wc -l <"$work/faults.txt") page faults in text," \
    "$(printf '%s' "$new" | grep -c . || true) symbols new" >&2
  [ -z "$new" ] && break
  printf '%s\n' "$new" >>"$list"
done
cp "$list" "$order"
$zygote && ninja -C "$build" supervisor/corrald >/dev/null  # linked with the final list
echo "corral-text-order: $(wc -l <"$order") symbols in $order" >&2
