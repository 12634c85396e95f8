#!/usr/bin/env bash
# The front door: installs what is missing, builds, and shows corral supervising real sessions.
# Needs root (cgroups, namespaces); run with sudo otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
bin=$PWD/build/supervisor
work=$(mktemp -d /tmp/corral-demo-XXXXXX)
cleanup() {
  [ -n "${daemon_pid:-}" ] && kill "$daemon_pid" 2>/dev/null && wait "$daemon_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
cd "$work"

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "What this host can enforce"
"$bin/corral" doctor

step "A CI job under the default sandbox that leaves a double-forked daemon behind"
cat > job.sh <<'JOB'
echo "job: hostname=$(hostname), I can see $(ls /proc | grep -c '^[0-9]') processes"
setsid sh -c 'sleep 1000 & echo "daemon: started, pid $! in the sandbox"' &
wait
ls /home | wc -l | xargs echo "job: entries visible in /home:"
touch /usr/x 2>&1 | sed 's/^/job: /'
echo "job: done, exiting while the daemon still runs"
JOB
"$bin/corral" run --policy default --report report.json -- sh job.sh || true
echo "report:"; cat report.json

step "A timeout ends the whole tree"
"$bin/corral" run --timeout 1s --report - -- sh -c 'sleep 100 & sleep 100' || echo "exit code $?"

if [ -x "$bin/corrald" ]; then
  step "corrald: a long-lived session driven over its API"
  "$bin/corrald" --socket "$work/corrald.sock" --state-dir "$work/state" --instance "corral-demo-$$" &
  daemon_pid=$!
  export CORRAL_SOCKET=$work/corrald.sock
  for _ in $(seq 50); do [ -S "$CORRAL_SOCKET" ] && break; sleep 0.1; done
  sid=$("$bin/corral" session create --policy default)
  echo "session: $sid"
  "$bin/corral" exec "$sid" -- sh -c 'echo hello > note.txt; echo "inside: $(cat note.txt) from $(pwd)"'
  "$bin/corral" spawn "$sid" -- sh -c 'setsid sh -c "sleep 1000 &"; sleep 1000'
  "$bin/corral" ps "$sid"
  "$bin/corral" cp "$sid:note.txt" "$work/copied.txt" && echo "copied out: $(cat "$work/copied.txt")"
  "$bin/corral" session rm "$sid"
fi
step "Done: no cgroup, mount or process of corral's is left"
