#!/usr/bin/env python3
"""Run latency and CPU per run of a corrald, idle and with N sessions (issue 18's density case).

    density_cpu.py SOCKET DAEMON_PID [SESSIONS] [RUNS]

Runs /bin/true RUNS times in a `none` session, then creates SESSIONS more `none` sessions holding
a `sleep` each and runs again. CPU is the daemon's user + system time including its reaped
children (the commands), from /proc/PID/stat, divided by RUNS. Deletes every session it made.
"""
import json
import os
import sys
import time

from unix_http import UnixConnection


def main():
    sock, pid = sys.argv[1], int(sys.argv[2])
    sessions = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
    runs = int(sys.argv[4]) if len(sys.argv) > 4 else 500
    conn = UnixConnection(sock)

    def request(method, path, body=None):
        conn.request(method, path, body=json.dumps(body) if body is not None else None,
                     headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        data = response.read()
        if response.status >= 300:
            raise SystemExit(f"{method} {path}: HTTP {response.status} {data[:200]!r}")
        return json.loads(data) if data else None

    def cpu_seconds():
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")

    def measure(sid):
        latencies, before = [], cpu_seconds()
        for _ in range(runs):
            start = time.monotonic()
            request("POST", f"/v1/sessions/{sid}/run", {"argv": ["/bin/true"]})
            latencies.append(time.monotonic() - start)
        used = cpu_seconds() - before
        latencies.sort()
        return latencies[len(latencies) // 2] * 1000, used / runs * 1000

    made = []
    try:
        probe = request("POST", "/v1/sessions", {"policy": "none"})["id"]
        made.append(probe)
        idle = measure(probe)
        for _ in range(sessions):
            sid = request("POST", "/v1/sessions", {"policy": "none"})["id"]
            made.append(sid)
            request("POST", f"/v1/sessions/{sid}/processes", {"argv": ["sleep", "3600"]})
        loaded = measure(probe)
        print(f"idle: run p50 {idle[0]:.3f} ms, CPU per run {idle[1]:.3f} ms | "
              f"{sessions} sessions: run p50 {loaded[0]:.3f} ms, CPU per run {loaded[1]:.3f} ms")
    finally:
        for sid in made:
            try:
                request("DELETE", f"/v1/sessions/{sid}")
            except Exception:  # the daemon ends the rest when it stops
                pass


if __name__ == "__main__":
    main()
