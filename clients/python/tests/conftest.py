"""A real corrald for the tests: the binary from the CMake build dir ($CORRAL_BUILD_DIR, default
../../build relative to clients/python), a temp Unix socket, state dir, cgroup instance and port
range. Teardown ends every session, then stops the daemon by its pid."""

import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from corral import Client, CorralError  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
BUILD = pathlib.Path(os.environ.get("CORRAL_BUILD_DIR", HERE.parent / "../../build")).resolve()
CORRALD = BUILD / "supervisor" / "corrald"


def skip_reason():
    if os.geteuid() != 0:
        return "needs root (corrald makes cgroups and namespaces)"
    if not CORRALD.exists():
        return f"corrald is not built at {CORRALD} (set CORRAL_BUILD_DIR)"
    return None


class Daemon:
    def __init__(self, extra_args=()):
        self.dir = tempfile.mkdtemp(prefix="corral-py-test-")
        self.socket_path = os.path.join(self.dir, "corrald.sock")
        os.mkdir(os.path.join(self.dir, "policies"))
        # 40 ports per test process, 8000-8799: below the ephemeral range, apart from the C++
        # suites (10000-32759) and the TypeScript suite (9000-9799).
        self.port_first = 8000 + (os.getpid() % 20) * 40
        self.log_path = os.path.join(self.dir, "corrald.log")
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [str(CORRALD), "--socket", self.socket_path, "--state-dir", os.path.join(self.dir, "state"),
                 "--policy-dir", os.path.join(self.dir, "policies"),
                 "--instance", f"corral-py-{os.getpid()}-{int(time.time() * 1000) % 100000}",
                 "--port-range", f"{self.port_first}-{self.port_first + 39}", *extra_args],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        self.client = Client(socket_path=self.socket_path)
        deadline = time.monotonic() + 30
        while True:
            try:
                self.client.health()
                return
            except CorralError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    log = open(self.log_path).read()
                    self.stop()
                    raise RuntimeError("corrald did not start:\n" + log)
                time.sleep(0.02)

    def stop(self):
        if self.proc.poll() is None:
            try:
                for s in self.client.sessions():
                    if s["state"] == "active":
                        self.client.session(s["id"]).end()
            except CorralError:
                pass
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def daemon():
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    d = Daemon()
    try:
        yield d
    finally:
        d.stop()


@pytest.fixture
def session(daemon):
    s = daemon.client.create_session(policy="default")
    try:
        yield s
    finally:
        try:
            s.end()
        except CorralError:
            pass


def tcp_daemon():
    """A Daemon that also listens on a free loopback TCP port; its base URL is ``d.url``."""
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    import socket
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    d = Daemon(["--listen", f"127.0.0.1:{port}"])
    d.url = f"http://127.0.0.1:{port}"
    return d
