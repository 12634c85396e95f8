"""Issue 15, "the AI SDK's three modes map one to one": Session.set_network_policy against a real
corrald whose --egress-hosts-file maps test names to HTTP servers this test runs on host loopback
addresses (127.0.0.41 and .42, never anything else), and what a curl inside an isolated session
then reaches through the daemon's proxy, mode by mode."""

import http.server
import os
import shutil
import tempfile
import threading

import pytest

from conftest import Daemon, skip_reason


class _Origin:
    """An HTTP server on `address` answering "hello from NAME", in a thread of its own."""

    def __init__(self, address, name):
        body = f"hello from {name}".encode()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer((address, 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def egress():
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    if not os.access("/usr/bin/curl", os.X_OK):
        pytest.skip("needs /usr/bin/curl")
    registry = _Origin("127.0.0.41", "registry")
    other = _Origin("127.0.0.42", "other")
    hosts_dir = tempfile.mkdtemp(prefix="corral-py-egress-")
    hosts = os.path.join(hosts_dir, "hosts")
    with open(hosts, "w") as f:
        f.write("127.0.0.41 registry.example.test\n127.0.0.42 other.example.test\n")
    daemon = Daemon(extra_args=("--egress-hosts-file", hosts))
    session = daemon.client.create_session(policy="default")

    def status(host, origin):
        url = f"http://{host}:{origin.port}/"
        return session.run(f"curl -s -o /dev/null --max-time 30 -w '%{{http_code}}' {url}").stdout

    try:
        yield session, status, registry, other
    finally:
        daemon.stop()
        registry.close()
        other.close()
        shutil.rmtree(hosts_dir, ignore_errors=True)


def test_each_mode_of_set_network_policy_is_enforced(egress):
    session, status, registry, other = egress
    session.set_network_policy("deny-all")
    assert status("registry.example.test", registry) == "403"

    session.set_network_policy("custom", allowed_hosts=["registry.example.test"])
    assert status("registry.example.test", registry) == "200"
    assert status("other.example.test", other) == "403"

    session.set_network_policy("custom", allowed_cidrs=["127.0.0.42/32"])
    assert status("127.0.0.42", other) == "200"
    assert status("127.0.0.41", registry) == "403"
    session.set_network_policy("custom", allowed_cidrs=["127.0.0.0/24"], denied_cidrs=["127.0.0.42/32"])
    assert status("127.0.0.41", registry) == "200"
    assert status("127.0.0.42", other) == "403"

    session.set_network_policy("allow-all")
    assert status("registry.example.test", registry) == "200"
    assert status("other.example.test", other) == "200"
    record = session.info()["egress"]
    assert record["mode"] == "allow-all"
    assert record["refused"] == 4
