"""A terminal session process over its WebSocket (GET /v1/sessions/{sid}/terminals/{proc}/ws,
docs/API.md "Terminals"): binary messages are the terminal's bytes both ways, text messages JSON
control (resize from here; error and exit from corrald). On attach corrald sends the kept
scrollback first, then live output; ``close()`` detaches and leaves the terminal running.

A reader thread takes the socket's messages as they come (answering pings), so output waits in
``read()``'s queue while the caller does something else.
"""

import json
import queue
import threading
import time
import urllib.parse

from .client import check_started, shell_exit_code
from .errors import CorralError
from . import websocket

_END = object()
_INPUT_MESSAGE_BYTES = 256 << 10  # well below corrald's 1 MiB per client message


class TerminalExit:
    """How the terminal's process ended: ``exit_code`` as a shell says it (128+N for signal N),
    ``status`` (exited, killed, ...) and ``signal``."""

    def __init__(self, message):
        self.status = message.get("status")
        self.signal = message.get("signal")
        self.exit_code = shell_exit_code(message)

    @property
    def timed_out(self):
        """Whether corrald stopped the process at its timeout (``status: timeout``), which its
        exit_code and signal alone (143/SIGTERM) do not tell from another SIGTERM."""
        return self.status == "timeout"

    def __repr__(self):
        return f"TerminalExit(exit_code={self.exit_code}, status={self.status!r}, signal={self.signal!r})"


class Terminal:
    """One attached terminal: ``write``, ``read``/iteration over output bytes, ``resize``,
    ``wait`` for the exit, ``close`` to detach. Also a context manager (closes on exit)."""

    def __init__(self, transport, sid, proc, record=None, on_control=None, **limits):
        self.id = proc
        self.record = record
        self.errors = []          # corrald's error messages on this socket: {code, message}
        self.exit = None          # TerminalExit once the process ended
        self.failure = None       # why the socket ended early (a bad frame, a lost connection)
        self._on_control = on_control
        self._output = queue.Queue()
        self._done = threading.Event()
        self._transport, self._sid = transport, sid
        path = f"/v1/sessions/{_q(sid)}/terminals/{_q(proc)}/ws"
        self._ws = websocket.connect(transport, path, **limits)
        self._reader = threading.Thread(target=self._read_loop, name=f"corral-terminal-{proc}",
                                        daemon=True)
        self._reader.start()

    def write(self, data):
        """Types into the terminal (``"\\x03"`` is Ctrl-C). Large input goes as several messages:
        corrald takes at most 1 MiB per message."""
        data = data.encode() if isinstance(data, str) else bytes(data)
        for at in range(0, max(len(data), 1), _INPUT_MESSAGE_BYTES):
            self._ws.send(data[at:at + _INPUT_MESSAGE_BYTES])

    def resize(self, cols, rows):
        """Sets the window size (1..4096 each); the foreground job gets SIGWINCH."""
        for name, value in (("cols", cols), ("rows", rows)):
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 4096:
                raise CorralError("invalid", f"{name} must be an integer in 1..4096, not {value!r}", 0)
        self._ws.send(json.dumps({"type": "resize", "cols": cols, "rows": rows}))

    def read(self, timeout=None):
        """The next output bytes; b"" once the output ended. Raises the socket's failure (a bad
        frame, a lost connection) after the bytes that came before it, and TimeoutError."""
        try:
            chunk = self._output.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"no terminal output within {timeout} s") from None
        if chunk is _END:
            self._output.put(_END)  # stays ended for the next read
            if self.failure is not None:
                raise self.failure
            return b""
        return chunk

    def __iter__(self):
        while True:
            chunk = self.read()
            if not chunk:
                return
            yield chunk

    def read_until(self, marker, timeout=30):
        """Reads until ``marker`` (bytes or str) has appeared; answers everything read."""
        marker = marker.encode() if isinstance(marker, str) else marker
        deadline = time.monotonic() + timeout
        seen = b""
        while marker not in seen:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no {marker!r} in the terminal output: {seen[-500:]!r}")
            chunk = self.read(timeout=left)
            if not chunk:
                raise CorralError("detached", f"the output ended before {marker!r}: {seen[-500:]!r}", 0)
            seen += chunk
        return seen

    def wait(self, timeout=None):
        """The TerminalExit once the process ended. Raises CorralError ``setup_failed`` when it
        never started, ``detached`` when the socket ended first (close(), corrald stopping), the
        failure for a bad frame, and TimeoutError."""
        if not self._done.wait(timeout):
            raise TimeoutError(f"terminal `{self.id}` still runs after {timeout} s")
        if self.exit is not None:
            if self.exit.status == "setup-failed":
                check_started(self._record_of_setup_failure())
            return self.exit
        if self.failure is not None:
            raise self.failure
        raise CorralError("detached", f"terminal `{self.id}`: the socket closed before the process exited", 0)

    @property
    def exit_code(self):
        """The exit code once the process ended (waits for it)."""
        return self.wait().exit_code

    def _record_of_setup_failure(self):
        """The process record, for its ``error``: the exit frame does not carry the reason."""
        if self.record and self.record.get("status") == "setup-failed":
            return self.record
        try:
            return self._transport.json("GET", f"/v1/sessions/{_q(self._sid)}/processes/{_q(self.id)}")
        except CorralError:
            return {"id": self.id, "status": "setup-failed"}

    def close(self, timeout=5):
        """Detaches (the terminal goes on running; attach again to continue)."""
        if not self._done.is_set():
            try:
                self._ws.start_close()
            except CorralError:
                pass
            self._done.wait(timeout)
        if not self._done.is_set():
            self._ws._shutdown()  # the server never answered the close
            self._done.wait(timeout)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _read_loop(self):
        try:
            while True:
                message = self._ws.recv()
                if message is None:
                    break
                kind, data = message
                if kind == "binary":
                    self._output.put(data)
                else:
                    self._control(data)
        except CorralError as e:
            if self.exit is None:
                self.failure = e
        except OSError as e:
            if self.exit is None:
                self.failure = CorralError("connection_lost", f"terminal socket: {e}", 0)
        finally:
            self._output.put(_END)
            self._done.set()

    def _control(self, text):
        try:
            message = json.loads(text)
        except ValueError:
            return  # corrald only sends JSON; anything else is not ours to act on
        if not isinstance(message, dict):
            return
        if message.get("type") == "exit":
            self.exit = TerminalExit(message)
        elif message.get("type") == "error":
            self.errors.append({"code": message.get("code"), "message": message.get("message")})
        if self._on_control:
            self._on_control(message)


def _q(segment):
    return urllib.parse.quote(segment, safe="")
