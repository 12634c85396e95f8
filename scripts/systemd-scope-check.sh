#!/bin/sh
# corrald's sd-bus path against a real systemd (issue 11.5): boots Debian's systemd as PID 1 of a
# pid + mount + cgroup namespace inside ../shared/vm/pure-v2 (the way systemd-nspawn runs one:
# `container=` set, its own /proc, cgroup2 and /run), with the real dbus-daemon, then starts
# corrald as a transient service that is not delegated and whose cgroup also holds a `sleep` (a
# busy cgroup, as a login shell's session scope is). corrald must ask systemd for a delegated
# scope (StartTransientUnit over D-Bus), build its tree below it, enforce a session's limits there,
# and leave no unit behind when it stops. Not a fake bus: systemd 252 and dbus-daemon from Debian.
#
#   scripts/systemd-scope-check.sh [BUILD_DIR]     (root; about 90 s under qemu TCG)
#
# Exit 0 when every check held; 1 with what failed (a guest that did not finish within its bound,
# SYSTEMD_CHECK_TIMEOUT seconds, 300 unless set, counts as failed); 125, with the reason, only
# when it cannot run on this machine (no harness, not root, no systemd or dbus-daemon package).
# .ci/run runs it as its last stage.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$here/build}" && pwd) || exit 125
# Beside the repository (a clone next to shared/), or beside the worktrees' directory.
pure_v2=${PURE_V2:-}
for candidate in "$here/../shared/vm/pure-v2" "$here/../../shared/vm/pure-v2"; do
    [ -n "$pure_v2" ] || { [ -x "$candidate" ] && pure_v2=$candidate; }
done
[ -n "$pure_v2" ] && [ -x "$pure_v2" ] || { echo "no pure-v2 harness found (set PURE_V2)"; exit 125; }
[ "$(id -u)" -eq 0 ] || { echo "needs root (the harness exports / over 9p)"; exit 125; }
[ -x /lib/systemd/systemd ] && command -v dbus-daemon >/dev/null ||
    { echo "needs Debian's systemd and dbus-daemon packages"; exit 125; }
[ -x "$build/supervisor/corrald" ] || { echo "no corrald in $build (build it first)"; exit 1; }
timeout=${SYSTEMD_CHECK_TIMEOUT:-300}
# The guest's /tmp and /run are fresh tmpfs: a build there must be shown (harness README, --view).
view=
case "$build" in /tmp/*|/run/*) view="--view $build" ;; esac
work=$(mktemp -d /tmp/corral-systemd-check-XXXXXX) || exit 125
trap 'rm -rf "$work"' EXIT

printf '%s' '{"policyYaml":"extends: none\nlimits: { memory: 96Mi, pids: 64 }\n"}' >"$work/body.json"
printf '%s' '{"command":"cat /proc/self/cgroup"}' >"$work/run.json"

# In the guest, as a systemd service: corrald, a session with limits, a command in it.
cat >"$work/service.sh" <<EOF
#!/bin/sh
S=/run/corral-check
sleep 300 &
mkdir -p \$S
$build/supervisor/corrald --socket \$S/c.sock --state-dir \$S/state --instance check >\$S/log 2>&1 &
D=\$!
for i in \$(seq 1 120); do [ -S \$S/c.sock ] && break; sleep 1; done
echo "service cgroup: \$(cat /proc/self/cgroup)"
echo "corrald cgroup: \$(cat /proc/\$D/cgroup)"
curl -s --unix-socket \$S/c.sock -H 'content-type: application/json' --data @$work/body.json \
    http://corrald/v1/sessions >\$S/created
SID=\$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' \$S/created)
curl -s --unix-socket \$S/c.sock -H 'content-type: application/json' --data @$work/run.json \
    http://corrald/v1/sessions/\$SID/run |
    python3 -c 'import json,sys; print("command cgroup:", json.load(sys.stdin)["stdout"].strip())'
for f in \$(find /sys/fs/cgroup -path "*corrald-*.scope*/sessions/\$SID/memory.max"); do
    echo "session limits: memory.max=\$(cat \$f) pids.max=\$(cat \${f%memory.max}pids.max)"
done
kill \$D
wait \$D
echo "corrald exit: \$?"
cat \$S/log
EOF

# In the guest: systemd as PID 1 of its own namespaces, then the service above.
cat >"$work/guest.sh" <<EOF
#!/bin/sh
mkdir -p /sys/fs/cgroup/systemd-check
echo \$\$ >/sys/fs/cgroup/systemd-check/cgroup.procs
unshare --pid --mount --cgroup --uts --fork --propagation private sh -c '
  mount -t proc proc /proc
  mount -t cgroup2 cgroup2 /sys/fs/cgroup
  mount -t tmpfs -o mode=755 tmpfs /run
  mkdir -p /run/systemd/system
  printf "[Unit]\nDescription=corral check\nRequires=dbus.socket\nAfter=dbus.socket\n" \
      >/run/systemd/system/corral-check.target
  exec env container=corral-check /lib/systemd/systemd --unit=corral-check.target
' >/tmp/systemd.log 2>&1 &
U=\$!
sleep 2
SD=\$(cat /proc/\$U/task/\$U/children)
for i in \$(seq 1 300); do nsenter -t \$SD -m test -S /run/dbus/system_bus_socket && break; sleep 1; done
echo "systemd: \$(nsenter -t \$SD -a systemctl is-system-running --wait)"
nsenter -t \$SD -a systemd-run --wait --pipe -p Delegate=no $work/service.sh
echo "units left: \$(nsenter -t \$SD -a systemctl list-units --no-legend --plain --all 'corrald-*')"
EOF
chmod +x "$work/service.sh" "$work/guest.sh"

start=$(date +%s)
# shellcheck disable=SC2086 # $view is empty or two words
out=$(cd "$work" && "$pure_v2" --timeout "$timeout" $view -- "$work/guest.sh" 2>&1)
status=$?
printf '%s\n' "$out"
echo "the check took $(( $(date +%s) - start )) s"
case $status in
    0) ;;
    124) echo "FAILED: the guest did not finish within $timeout s"; exit 1 ;;
    *) echo "FAILED: the harness or the guest failed ($status)"; exit 1 ;;
esac
failed=0
check() {
    printf '%s\n' "$out" | grep -Eq "$1" && echo "ok: $2" || { echo "FAILED: $2"; failed=1; }
}
check '^systemd: running' "systemd runs (dbus-daemon on the system bus)"
check '^corrald cgroup: 0::.*/corrald-[0-9]+\.scope/check/supervisor$' \
    "corrald moved itself into a delegated scope systemd made for it"
check '^command cgroup: 0::.*/corrald-[0-9]+\.scope/check/sessions/s[0-9a-f]+/p1$' \
    "the session's command runs below that scope"
check '^session limits: memory.max=100663296 pids.max=64$' "the session's limits are set there"
check '^corrald exit: 0$' "corrald stopped cleanly"
check '^units left: $' "systemd holds no corral unit afterwards (CollectMode=inactive-or-failed)"
exit $failed
