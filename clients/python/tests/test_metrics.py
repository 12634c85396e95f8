"""GET /metrics against a real corrald: Prometheus text whose gauges follow what the daemon does,
and which session tokens and unauthenticated TCP callers cannot read."""

import re

import pytest

from conftest import tcp_daemon
from corral import Client, CorralError

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)'
                    r'(\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*",?)*\})?'
                    r' (-?[0-9.e+-]+|\+Inf|NaN)$')


def parse(text):
    """{(name, labels): value}; every non-comment line must be a valid sample line."""
    samples = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        assert m, f"not a Prometheus sample line: {line!r}"
        samples[(m.group(1), m.group(2) or "")] = float(m.group(3))
    return samples


def test_metrics_follow_sessions_processes_and_requests(daemon):
    before = parse(daemon.client.metrics())
    assert ("corral_sessions", '{state="active"}') in before
    s = daemon.client.create_session(policy="default")
    try:
        sleeper = s.spawn("sleep 300")
        s.run("exit 3")
        m = parse(daemon.client.metrics())
        assert m[("corral_sessions", '{state="active"}')] == before[("corral_sessions", '{state="active"}')] + 1
        assert m[("corral_processes_running", "")] >= 1
        assert m[("corral_processes", '{status="running"}')] >= 1
        assert m[("corral_processes", '{status="exited"}')] >= 1
        run = ("corral_http_request_duration_seconds_count", '{method="POST",route="/v1/sessions/{sid}/run"}')
        assert m[run] >= 1
        inf = ("corral_http_request_duration_seconds_bucket", '{method="POST",route="/v1/sessions/{sid}/run",le="+Inf"}')
        assert m[inf] == m[run]
        sleeper.kill()
        m = parse(daemon.client.metrics())
        assert m[("corral_processes", '{status="killed"}')] >= 1
    finally:
        s.end()


def test_pids_limit_events_are_counted(daemon):
    s = daemon.client.create_session(policy_yaml="name: tight\nextends: default\nlimits: { pids: 8 }\n")
    try:
        s.run("for i in $(seq 30); do sleep 2 & done 2>/dev/null; wait")
        hits = s.info()["usage"]["pidsLimitHits"]
        assert hits > 0, "the pids limit refused no fork"
        assert parse(daemon.client.metrics())[("corral_pids_limit_hits", "")] >= hits
    finally:
        s.end()


def test_session_tokens_cannot_read_daemon_metrics(daemon):
    # Daemon-wide counts would let one tenant watch the others (cf. issue 16: /metrics is daemon
    # admin only, as /v1/sessions lists only the caller's own session for a token).
    s = daemon.client.create_session(policy="default")
    try:
        for token in (s.token, s.restricted_token):
            with pytest.raises(CorralError) as e:
                daemon.client.with_token(token).metrics()
            assert e.value.status == 403
    finally:
        s.end()


def test_tcp_metrics_need_a_token():
    d = tcp_daemon()
    try:
        with pytest.raises(CorralError) as e:
            Client(url=d.url).metrics()
        assert e.value.status == 401
        assert "corral_sessions" in d.client.metrics()
    finally:
        d.stop()
