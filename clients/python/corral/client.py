"""corrald's HTTP API (docs/API.md, docs/openapi.yaml) as Client, Session and Process objects.

Records (sessions, processes, file entries) are the JSON objects corrald answers, as dicts.
"""

import base64
import re
import signal as _signal
import urllib.parse

from .errors import CorralError
from .transport import Transport, iter_ndjson


def _q(segment):
    return urllib.parse.quote(segment, safe="")


def event_bytes(event, key="data"):
    """The bytes of an output event or result field (``data`` or ``dataBase64``)."""
    if event.get(key + "Base64") is not None:
        return base64.b64decode(event[key + "Base64"])
    return (event.get(key) or "").encode()


def shell_exit_code(record):
    """``exitCode``, or 128+N when the record names signal N without a code; -1 if neither."""
    if record.get("exitCode") is not None:
        return record["exitCode"]
    name = record.get("signal")
    if name:
        try:
            return 128 + int(getattr(_signal, name if name.startswith("SIG") else "SIG" + name))
        except AttributeError:
            pass
    return -1


def check_started(record):
    """Raises CorralError ``setup_failed`` (the daemon's reason, the record) when the record says
    the process never started (``status: setup-failed``); answers the record otherwise.

    Such a process has no exit of its own: its ``exitCode`` is null (or 127/126 when execve
    failed, as a shell says) and it wrote nothing, so reporting it as an exit would look like a
    command that failed silently. docs/API.md "Results and records"."""
    if record.get("status") == "setup-failed":
        reason = record.get("error") or "its setup failed (corrald gave no reason)"
        raise CorralError("setup_failed", f"process `{record.get('id')}` never started: {reason}", 0,
                          record=record)
    return record


def _check_exit_event(event):
    """For a process's event stream: ``setup_failed`` in place of the exit event of a process
    that never started."""
    if event.get("type") == "exit":
        check_started(event)


class RunResult:
    """The answer of ``run``: exit code, decoded output and the full process record."""

    def __init__(self, record):
        self.record = record
        self.exit_code = shell_exit_code(record)
        self.status = record["status"]
        self.signal = record.get("signal")
        self.stdout_bytes = event_bytes(record, "stdout")
        self.stderr_bytes = event_bytes(record, "stderr")
        self.stdout = self.stdout_bytes.decode("utf-8", "replace")
        self.stderr = self.stderr_bytes.decode("utf-8", "replace")

    @property
    def timed_out(self):
        """Whether corrald stopped the command at its timeout (``status: timeout``). Its exit_code
        and signal are then those of the signal that stopped it (143/SIGTERM, or 137/SIGKILL
        after the grace period), as for a command killed by other means."""
        return self.status == "timeout"

    def __repr__(self):
        return f"RunResult(exit_code={self.exit_code}, status={self.status!r}, stdout={self.stdout!r})"


class Client:
    """A client of one corrald: ``Client()`` uses $CORRAL_SOCKET (or /run/corral/corrald.sock);
    ``Client(url="http://127.0.0.1:7777", token=T)`` talks TCP with a session token."""

    def __init__(self, socket_path=None, url=None, token=None, timeout=None, transport=None):
        self.transport = transport or Transport(socket_path, url, token, timeout)

    def with_token(self, token):
        return Client(transport=self.transport.with_token(token))

    # ---- daemon
    def health(self):
        return self.transport.json("GET", "/v1/health")

    def policies(self):
        return self.transport.json("GET", "/v1/policies")

    def validate_policy(self, yaml_text):
        return self.transport.json("POST", "/v1/policies/validate", body=yaml_text,
                                   content_type="application/yaml")

    def metrics(self):
        """Prometheus text (GET /metrics)."""
        return self.transport.bytes("GET", "/metrics").decode()

    # ---- sessions
    def create_session(self, policy=None, policy_yaml=None, id=None, env=None, cwd=None,
                       command_timeout_ms=None):
        """Creates a session; the returned Session holds its full and restricted tokens."""
        body = {k: v for k, v in {"policy": policy, "policyYaml": policy_yaml, "id": id, "env": env,
                                  "cwd": cwd, "commandTimeoutMs": command_timeout_ms}.items()
                if v is not None}
        record = self.transport.json("POST", "/v1/sessions", json_body=body)
        return Session(self, record["id"], record)

    def sessions(self):
        return self.transport.json("GET", "/v1/sessions")["sessions"]

    def session(self, sid):
        """An existing session by id (its record is fetched, so an unknown id raises 404)."""
        return Session(self, sid, self.transport.json("GET", f"/v1/sessions/{_q(sid)}"))


class Session:
    """One corral session: commands, processes, files, ports, shells, contexts."""

    def __init__(self, client, sid, record=None):
        self.client = client
        self.id = sid
        self.record = record or {}
        self.token = self.record.get("token")
        self.restricted_token = self.record.get("restrictedToken")
        self._base = f"/v1/sessions/{_q(sid)}"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.end()

    def _json(self, method, path="", **kwargs):
        return self.client.transport.json(method, self._base + path, **kwargs)

    def restricted(self):
        """This session seen through its restricted token (run, spawn, files; no end, env, leases)."""
        if not self.restricted_token:
            raise CorralError("no_token", f"session `{self.id}` was not created by this client", 0)
        return Session(self.client.with_token(self.restricted_token), self.id)

    def info(self):
        self.record = {**self.record, **self._json("GET")}
        return self.record

    def end(self):
        """Ends the session: kills its whole tree, releases its ports; returns the report."""
        return self._json("DELETE")

    def patch_env(self, set=None, unset=None):
        """Sets variables (a None value unsets) and unsets names; returns the resulting env."""
        set = dict(set or {})
        unset = list(unset or []) + [k for k, v in set.items() if v is None]
        set = {k: v for k, v in set.items() if v is not None}
        return self._json("PATCH", "/env", json_body={"set": set, "unset": unset})["env"]

    def set_network_policy(self, mode, allowed_hosts=None, allowed_cidrs=None, denied_cidrs=None):
        body = {"mode": mode}
        for key, value in (("allowedHosts", allowed_hosts), ("allowedCIDRs", allowed_cidrs),
                           ("deniedCIDRs", denied_cidrs)):
            if value is not None:
                body[key] = list(value)
        return self._json("PATCH", "/network", json_body=body)

    # ---- commands
    @staticmethod
    def _command(command, argv=None, cwd=None, env=None, timeout_ms=None, stdin=None,
                 stdin_open=None, shell=None):
        if isinstance(command, (list, tuple)):
            command, argv = None, list(command)
        if (command is None) == (argv is None):
            raise CorralError("invalid", "give exactly one of command and argv", 0)
        body = {"command": command, "argv": argv, "cwd": cwd, "env": env, "timeoutMs": timeout_ms,
                "stdin": stdin, "stdinOpen": stdin_open, "shell": shell}
        return {k: v for k, v in body.items() if v is not None}

    def run(self, command=None, **options):
        """Runs a command (a shell string, or a list for argv) to its end: a RunResult. A command
        that never started (a missing cwd, no such program for argv) raises CorralError
        ``setup_failed`` with corrald's reason."""
        record = self._json("POST", "/run", json_body=self._command(command, **options))
        return RunResult(check_started(record))

    def exec(self, command=None, **options):
        """Runs a command and yields its NDJSON events (start, stdout, stderr, exit|error); raises
        CorralError ``setup_failed`` instead of the exit event when it never started.
        Closing the iterator early closes the stream, which stops the command."""
        response = self.client.transport.request("POST", self._base + "/exec",
                                                 json_body=self._command(command, **options))
        return iter_ndjson(response, _check_exit_event)

    def spawn(self, command=None, **options):
        """Starts a background process: a Process (CorralError ``setup_failed`` when it never
        started)."""
        record = self._json("POST", "/processes", json_body=self._command(command, **options))
        return Process(self, record["id"], check_started(record))

    def processes(self):
        return self._json("GET", "/processes")["processes"]

    def process(self, proc):
        return Process(self, proc, self._json("GET", f"/processes/{_q(proc)}"))

    def kill_all(self):
        """Kills every running process of the session (DELETE .../processes)."""
        return self._json("DELETE", "/processes")

    def create_terminal(self, cols=80, rows=24, command=None, cwd=None, env=None, shell=None,
                        timeout_ms=None):
        """Starts a process on a PTY (the login shell unless ``command``): its record
        (CorralError ``setup_failed`` when it never started). ``timeout_ms``: the session's
        command timeout unless given (0: none)."""
        body = {k: v for k, v in {"cols": cols, "rows": rows, "command": command, "cwd": cwd,
                                  "env": env, "shell": shell, "timeoutMs": timeout_ms}.items()
                if v is not None}
        return check_started(self._json("POST", "/terminals", json_body=body))

    def terminal(self, cols=80, rows=24, command=None, cwd=None, env=None, shell=None,
                 on_control=None, timeout_ms=None):
        """Starts a process on a PTY and attaches to it: a Terminal (write, read, resize, wait,
        close). ``shell`` names a shell context of this session to start in."""
        from .terminal import Terminal
        record = self.create_terminal(cols, rows, command, cwd, env, shell, timeout_ms)
        return Terminal(self.client.transport, self.id, record["id"], record, on_control)

    def attach_terminal(self, proc, on_control=None):
        """Attaches to a running terminal again: its scrollback comes first."""
        from .terminal import Terminal
        return Terminal(self.client.transport, self.id, proc, None, on_control)

    # ---- files
    def read(self, path):
        """A file's bytes."""
        return self.client.transport.bytes("GET", self._base + "/files", query={"path": path})

    def read_text(self, path, encoding="utf-8", start_line=None, end_line=None):
        r"""A file's text; start_line/end_line (1-based, inclusive) pick lines, and past the end
        stop at the end.

        Lines are corrald's (docs/API.md "Files"): each ends after a "\n" and only there, so
        "\r", "\x0c" or U+2028 inside a line do not split it (str.splitlines() would). corrald
        selects them when "\n" is that byte in ``encoding``; otherwise (UTF-16, ...) the client
        splits the decoded text the same way."""
        if start_line is None and end_line is None:
            return self.read(path).decode(encoding)
        start = 1 if start_line is None else start_line
        for value in (start, end_line):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
                raise CorralError("invalid", f"line numbers are integers, not {value!r}", 0)
        if start < 1 or (end_line is not None and end_line < start):
            raise CorralError("invalid", f"line range {start_line}..{end_line}", 0)
        if "\n".encode(encoding) == b"\n":
            query = {"path": path, "startLine": start, "endLine": end_line}
            return self.client.transport.bytes("GET", self._base + "/files", query=query).decode(encoding)
        lines = re.split("(?<=\n)", self.read(path).decode(encoding))
        return "".join(lines[start - 1:end_line])

    def write(self, path, data):
        """Writes a file (bytes, str, or an iterable of bytes sent chunked); parents are created."""
        return self._json("PUT", "/files", query={"path": path}, body=data,
                          content_type="application/octet-stream")

    def delete(self, path, recursive=False):
        return self._json("DELETE", "/files", query={"path": path, "recursive": recursive or None})

    def mkdir(self, path, recursive=False):
        return self._json("POST", "/files/mkdir", json_body={"path": path, "recursive": recursive})

    def move(self, src, dst, replace=None):
        body = {"from": src, "to": dst}
        if replace is not None:
            body["replace"] = replace
        return self._json("POST", "/files/move", json_body=body)

    def list(self, path="/", recursive=False):
        return self._json("GET", "/files/list",
                          query={"path": path, "recursive": recursive or None})["entries"]

    def stat(self, path):
        return self._json("GET", "/files/stat", query={"path": path})

    def exists(self, path):
        try:
            self.stat(path)
            return True
        except CorralError as e:
            if e.code == "not_found":
                return False
            raise

    def watch(self, path, recursive=False):
        """Yields file events under a path (GET .../files/watch)."""
        return iter_ndjson(self.client.transport.request(
            "GET", self._base + "/files/watch", query={"path": path, "recursive": recursive or None}))

    def git_checkout(self, url, branch=None, target_dir=None, depth=None, timeout_ms=None):
        body = {k: v for k, v in {"url": url, "branch": branch, "targetDir": target_dir,
                                  "depth": depth, "timeoutMs": timeout_ms}.items() if v is not None}
        return self._json("POST", "/git/checkout", json_body=body)

    # ---- ports
    def lease_port(self):
        return self._json("POST", "/ports", json_body={})

    def ports(self):
        return self._json("GET", "/ports")["ports"]

    def release_port(self, port):
        return self._json("DELETE", f"/ports/{int(port)}")

    def port_endpoint(self, port, protocol="http"):
        return self._json("GET", f"/ports/{int(port)}/endpoint", query={"protocol": protocol})["url"]

    def wait_port(self, port, timeout_ms=None):
        return self._json("GET", f"/ports/{int(port)}/wait", query={"timeoutMs": timeout_ms})

    # ---- shell contexts
    def create_shell(self, id=None, cwd=None, env=None):
        body = {k: v for k, v in {"id": id, "cwd": cwd, "env": env}.items() if v is not None}
        return self._json("POST", "/shells", json_body=body)

    def shells(self):
        return self._json("GET", "/shells")["shells"]

    def shell(self, shell):
        return self._json("GET", f"/shells/{_q(shell)}")

    def delete_shell(self, shell):
        return self._json("DELETE", f"/shells/{_q(shell)}")

    # ---- code contexts (docs/API.md "Code contexts")
    def create_context(self, language="python", id=None, cwd=None, env=None):
        """Starts a persistent python3 or node interpreter in the session; its record once ready."""
        body = {k: v for k, v in {"language": language, "id": id, "cwd": cwd,
                                  "env": env}.items() if v is not None}
        return self._json("POST", "/contexts", json_body=body)

    def contexts(self):
        return self._json("GET", "/contexts")["contexts"]

    def context(self, ctx):
        return self._json("GET", f"/contexts/{_q(ctx)}")

    def delete_context(self, ctx):
        return self._json("DELETE", f"/contexts/{_q(ctx)}")

    def run_code(self, ctx, code, timeout_ms=None):
        """Runs code in a context: {status, results, stdout, stderr, error?, truncated, durationMs}."""
        return self._json("POST", f"/contexts/{_q(ctx)}/run", json_body=self._code(code, timeout_ms))

    def stream_code(self, ctx, code, timeout_ms=None):
        """Runs code in a context and yields its NDJSON events (stdout, stderr, result, error, end)."""
        return iter_ndjson(self.client.transport.request(
            "POST", self._base + f"/contexts/{_q(ctx)}/run", json_body=self._code(code, timeout_ms),
            accept="application/x-ndjson"))

    @staticmethod
    def _code(code, timeout_ms):
        body = {"code": code}
        if timeout_ms is not None:
            body["timeoutMs"] = timeout_ms
        return body


class Process:
    """A process of a session (background, or one that exec/run started)."""

    def __init__(self, session, proc, record=None):
        self.session = session
        self.id = proc
        self.record = record or {}
        self.pid = self.record.get("pid")
        self._path = f"/processes/{_q(proc)}"

    def info(self):
        self.record = self.session._json("GET", self._path)
        return self.record

    def wait(self, timeout_ms=None):
        """The record once the process ended, or after timeout_ms (``finished`` says which)."""
        self.record = self.session._json("GET", self._path + "/wait", query={"timeoutMs": timeout_ms})
        return self.record

    @property
    def exit_code(self):
        """None while it runs; its exit code once it ended (128+N for signal N); CorralError
        ``setup_failed`` when it never started."""
        if self.record.get("running", True):
            return None
        return shell_exit_code(check_started(self.record))

    def kill(self, force=False):
        """Stops the process and its descendants; returns the final record with ``killed``."""
        self.record = self.session._json("DELETE", self._path, query={"force": force or None})
        return self.record

    def signal(self, sig, tree=None):
        body = {"signal": sig}
        if tree is not None:
            body["tree"] = tree
        return self.session._json("POST", self._path + "/signal", json_body=body)

    def write_stdin(self, data, eof=False):
        return self.session._json("POST", self._path + "/stdin", body=data, query={"eof": eof or None},
                                  content_type="application/octet-stream")

    def logs(self, stream="stdout", offset=0, limit=None):
        return self.session._json("GET", self._path + "/logs",
                                  query={"stream": stream, "offset": offset, "limit": limit})

    def output(self, stream="stdout"):
        """All kept output of one stream, as bytes."""
        out, offset = b"", 0
        while True:
            chunk = self.logs(stream, offset)
            data = event_bytes(chunk)
            if not data or chunk["nextOffset"] == offset:
                return out
            out += data
            offset = chunk["nextOffset"]

    def stream(self, offset=None, stdout_offset=None, stderr_offset=None, stream=None):
        """Yields the process's output events from an offset, following it to its exit (CorralError
        ``setup_failed`` instead of the exit event when it never started)."""
        query = {"offset": offset, "stdoutOffset": stdout_offset, "stderrOffset": stderr_offset,
                 "stream": stream}
        return iter_ndjson(self.session.client.transport.request(
            "GET", self.session._base + self._path + "/stream", query=query), _check_exit_event)
