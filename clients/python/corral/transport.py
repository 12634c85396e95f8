"""HTTP/1.1 to corrald over its Unix socket (AF_UNIX, as ``curl --unix-socket``) or loopback TCP
with a bearer token. Standard library only: http.client, socket, json."""

import http.client
import json
import os
import socket
import urllib.parse

from .errors import CorralError

DEFAULT_SOCKET = "/run/corral/corrald.sock"


class _UnixConnection(http.client.HTTPConnection):
    """An HTTPConnection whose socket is a Unix stream socket."""

    def __init__(self, path, timeout):
        super().__init__("corral", timeout=timeout)
        self._path = path

    def connect(self):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            if self.timeout is not None:
                sock.settimeout(self.timeout)
            sock.connect(self._path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


class Transport:
    """Sends requests to one corrald with one set of credentials (a new connection per request)."""

    def __init__(self, socket_path=None, url=None, token=None, timeout=None):
        self.url = url
        self.token = token
        self.timeout = timeout
        if url:
            parsed = urllib.parse.urlsplit(url)
            if parsed.scheme != "http":
                raise CorralError("invalid", f"url `{url}`: only http: is served by corrald", 0)
            self._host, self._port = parsed.hostname, parsed.port or 80
            self.socket_path = None
        else:
            self.socket_path = socket_path or os.environ.get("CORRAL_SOCKET") or DEFAULT_SOCKET

    def with_token(self, token):
        """The same daemon with another token (a session's restricted token, say)."""
        return Transport(self.socket_path, self.url, token, self.timeout)

    def _connection(self):
        if self.url:
            return http.client.HTTPConnection(self._host, self._port, timeout=self.timeout)
        return _UnixConnection(self.socket_path, self.timeout)

    def request(self, method, path, query=None, json_body=None, body=None, content_type=None,
                accept=None):
        """Sends a request; returns the open response once its status is 2xx (else CorralError)."""
        if query:
            pairs = {k: _query_value(v) for k, v in query.items() if v is not None}
            if pairs:
                path += "?" + urllib.parse.urlencode(pairs)
        headers = {}
        if self.token is not None:
            headers["Authorization"] = f"Bearer {self.token}"
        if json_body is not None:
            body = json.dumps(json_body).encode()
            headers["Content-Type"] = "application/json"
        elif content_type:
            headers["Content-Type"] = content_type
        if accept:
            headers["Accept"] = accept
        if isinstance(body, str):
            body = body.encode()
        if body is None and method not in ("GET", "HEAD"):
            body = b""
        conn = self._connection()
        try:
            try:
                conn.request(method, path, body=body, headers=headers)
            except (BrokenPipeError, ConnectionResetError):
                # corrald may answer (an error, before reading the body) and close while the body
                # is still being sent: its answer is then waiting in the socket.
                pass
            sock = conn.sock  # getresponse() hands it to the response when corrald will close
            response = conn.getresponse()
        except OSError as e:
            conn.close()
            where = self.url or f"unix:{self.socket_path}"
            raise CorralError("unreachable", f"corrald at {where}: {e}", 0) from e
        if 200 <= response.status < 300:
            response._corral_connection = conn  # closed with the response
            response._corral_socket = sock
            return response
        data = response.read()
        conn.close()
        raise CorralError.from_body(response.status, data)

    def json(self, method, path, **kwargs):
        """A request whose 2xx answer is JSON."""
        response = self.request(method, path, **kwargs)
        try:
            data = response.read()
        finally:
            response._corral_connection.close()
        try:
            return json.loads(data)
        except ValueError:
            raise CorralError("bad_response", f"{method} {path}: answer is not JSON: {data[:200]!r}",
                              response.status) from None

    def bytes(self, method, path, **kwargs):
        response = self.request(method, path, **kwargs)
        try:
            return response.read()
        finally:
            response._corral_connection.close()


def _query_value(value):
    if value is True:
        return "true"
    if value is False:
        return "false"
    return str(value)


class EventStream:
    """The JSON events of an NDJSON response, one per line, as an iterator; the connection closes
    at the end, on an error, or with ``close()`` (also a context manager).

    ``close()`` may come from another thread while a read waits there: it shuts the socket down
    first, which wakes that read (a bare close() would not). corral.aio reads in a worker thread
    and closes from the event loop's; closing an exec stream early stops its command.
    ``check(event)`` may raise for an event, which then ends the stream."""

    def __init__(self, response, check=None):
        self._response = response
        self._check = check
        self._closed = False

    def __iter__(self):
        return self

    def __next__(self):
        try:
            event = self._next_event()
        except BaseException:
            woken = self._closed  # close() from another thread ended this read: the stream's end
            self.close()
            if woken:
                raise StopIteration from None
            raise
        if event is None:
            self.close()
            raise StopIteration
        return event

    def _next_event(self):
        while not self._closed:
            line = self._response.readline()
            if not line:
                return None
            if line.strip():
                event = json.loads(line)
                if self._check:
                    self._check(event)
                return event
        return None

    def close(self):
        if self._closed:
            return
        self._closed = True
        try:
            self._response._corral_socket.shutdown(socket.SHUT_RDWR)
        except (OSError, AttributeError):
            pass
        self._response.close()
        self._response._corral_connection.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def iter_ndjson(response, check=None):
    """The events of an NDJSON response: an EventStream."""
    return EventStream(response, check)
