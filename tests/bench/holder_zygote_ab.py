#!/usr/bin/env python3
"""Session ready beside SESSIONS busy sessions, for two corrald binaries side by side (issue 18,
holders cloned by the launch zygote). Root.

    holder_zygote_ab.py CORRALD_A CORRALD_B [SESSIONS] [ROUNDS]

Starts both daemons (own socket, state dir, instance and half of 53000-54999 each, --prepare
default=8), fills each with SESSIONS `none` sessions holding a `sleep 3600`, then ROUNDS times,
alternating A and B, pauses 20 ms (PAUSE_MS) and times POST /v1/sessions {"policy":"default"} and its first
POST .../run of /bin/true; the session is deleted untimed. Prints medians of create, create+run
and the mean of corrald's own CPU (user+system, not its reaped children) per round. Everything it starts it
stops; its temp directory is removed. With PERF=SECONDS set, it then records `perf record -g`
of each daemon and its launch zygote for that long while it keeps making sessions, and prints
the share of copy_page_range, do_wp_page and unmap_page_range in each profile.
"""
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from unix_http import UnixConnection


SYMBOLS = ("copy_page_range", "do_wp_page", "unmap_page_range")
# "20", or "10-40" for a pause drawn uniformly from that range each round (not phase-locked to
# the pool's 20 ms refill delay).
PAUSE_RANGE = [float(x) / 1000 for x in os.environ.get("PAUSE_MS", "20").split("-")]
PAUSE = PAUSE_RANGE[0]


class Daemon:
    def __init__(self, tag, binary, work, ports):
        self.tag, self.dir = tag, os.path.join(work, tag)
        os.makedirs(self.dir)
        self.sock = os.path.join(self.dir, "s")
        self.log = open(os.path.join(self.dir, "log"), "w")
        self.proc = subprocess.Popen(
            [binary, "--socket", self.sock, "--state-dir", os.path.join(self.dir, "state"),
             "--instance", f"corral-hz-{tag}-{os.getpid()}", "--port-range", ports,
             "--prepare", "default=8"], stdout=self.log, stderr=subprocess.STDOUT)
        for _ in range(200):
            if os.path.exists(self.sock):
                break
            time.sleep(0.05)
        self.conn = UnixConnection(self.sock)

    def request(self, method, path, body=None):
        self.conn.request(method, path, body=json.dumps(body) if body is not None else None,
                          headers={"Content-Type": "application/json"})
        response = self.conn.getresponse()
        data = response.read()
        if response.status >= 300:
            raise SystemExit(f"{self.tag}: {method} {path}: HTTP {response.status} {data[:200]!r}")
        return json.loads(data) if data else None

    def cpu_seconds(self):
        fields = open(f"/proc/{self.proc.pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def fill(self, sessions):
        for _ in range(sessions):
            sid = self.request("POST", "/v1/sessions", {"policy": "none"})["id"]
            self.request("POST", f"/v1/sessions/{sid}/processes", {"argv": ["sleep", "3600"]})

    def one_round(self):
        time.sleep(random.uniform(PAUSE_RANGE[0], PAUSE_RANGE[-1]))
        cpu = self.cpu_seconds()
        start = time.monotonic()
        sid = self.request("POST", "/v1/sessions", {"policy": "default"})["id"]
        made = time.monotonic()
        self.request("POST", f"/v1/sessions/{sid}/run", {"argv": ["/bin/true"]})
        ran = time.monotonic()
        self.request("DELETE", f"/v1/sessions/{sid}")
        return (made - start) * 1000, (ran - start) * 1000, (self.cpu_seconds() - cpu) * 1000

    def zygotes(self):
        found = []
        for task in os.listdir(f"/proc/{self.proc.pid}/task"):
            for child in open(f"/proc/{self.proc.pid}/task/{task}/children").read().split():
                try:
                    if open(f"/proc/{child}/comm").read().strip() == "corrald-launch":
                        found.append(int(child))
                except OSError:
                    pass
        return found

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def main():
    a, b = sys.argv[1], sys.argv[2]
    sessions = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 200
    perf_seconds = int(os.environ.get("PERF", "0"))
    work = tempfile.mkdtemp(prefix="corral-holder-ab-")
    daemons = []
    try:
        daemons = [Daemon("A", a, work, "53000-53999"), Daemon("B", b, work, "54000-54999")]
        for d in daemons:
            started = time.monotonic()
            d.fill(sessions)
            print(f"{d.tag}: {sessions} sessions filled in {time.monotonic() - started:.1f} s, "
                  f"corrald RSS {open(f'/proc/{d.proc.pid}/status').read().split('VmRSS:')[1].split()[0]} kB",
                  flush=True)
        for d in daemons:  # warm up: the prepared pool refilled, caches warm
            for _ in range(10):
                d.one_round()
        results = {d.tag: [] for d in daemons}
        for _ in range(rounds):
            for d in daemons:
                results[d.tag].append(d.one_round())
        print(f"load {open('/proc/loadavg').read().split()[0]}, {rounds} rounds each, alternated, "
              f"{os.environ.get('PAUSE_MS', '20')} ms pause before each")
        print("daemon  binary                          create p50  create+run p50  corrald CPU/round (mean)")
        med = {}
        for d, binary in zip(daemons, (a, b)):
            rows = results[d.tag]
            # CPU comes in clock ticks: its mean over all rounds, not a median of ticks.
            med[d.tag] = [statistics.median(r[0] for r in rows),
                          statistics.median(r[1] for r in rows),
                          sum(r[2] for r in rows) / len(rows)]
            print(f"{d.tag:6}  {binary[-30:]:30}  {med[d.tag][0]:8.2f} ms  {med[d.tag][1]:11.2f} ms"
                  f"  {med[d.tag][2]:10.2f} ms")
        print(f"B/A: create {med['B'][0] / med['A'][0]:.2f}, create+run "
              f"{med['B'][1] / med['A'][1]:.2f}, CPU {med['B'][2] / max(med['A'][2], 1e-9):.2f}")
        if perf_seconds:
            for d in daemons:
                data = os.path.join(work, f"perf-{d.tag}.data")
                # corrald and its zygote: a clone's copy_page_range runs in the cloner.
                pids = [str(d.proc.pid)] + [str(z) for z in d.zygotes()]
                perf = subprocess.Popen(["perf", "record", "-q", "-g", "-o", data, "-p",
                                         ",".join(pids)], stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
                end = time.monotonic() + perf_seconds
                while time.monotonic() < end:
                    d.one_round()
                perf.send_signal(2)
                perf.wait()
                keep = os.environ.get("PERF_KEEP")
                if keep:
                    shutil.copy(data, os.path.join(keep, f"perf-{d.tag}.data"))
                # Flat, with children: "Children  Self  [k] symbol" per line.
                report = subprocess.run(["perf", "report", "-i", data, "--children", "--sort",
                                         "symbol", "--stdio", "-g", "none"],
                                        capture_output=True, text=True).stdout
                shares = {}
                for line in report.splitlines():
                    fields = line.split()
                    for symbol in SYMBOLS:
                        if f"] {symbol} " in line + " " and symbol not in shares:
                            shares[symbol] = f"{fields[0]} with callees, {fields[1]} self"
                print(f"perf {d.tag}: " + "; ".join(f"{k} {shares.get(k, 'absent')}"
                                                   for k in SYMBOLS), flush=True)
    finally:
        for d in daemons:
            d.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
