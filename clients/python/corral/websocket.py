"""A WebSocket client (RFC 6455) for corrald's terminal sockets, standard library only.

The framing is here because the standard library has none: masked client frames, fragmented
messages both ways, ping/pong, the close handshake, text vs binary messages, and limits on what
the server may send. A masked server frame, reserved bits, an unknown opcode, a bad control frame,
text that is not UTF-8 or a frame or message beyond the limits closes the socket with the RFC's
code instead of being believed.
"""

import base64
import hashlib
import os
import socket
import struct
import threading

from .errors import CorralError

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"  # RFC 6455 section 1.3

CONTINUATION, TEXT, BINARY, CLOSE, PING, PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
NORMAL, PROTOCOL_ERROR, INVALID_DATA, TOO_BIG = 1000, 1002, 1007, 1009


class WebSocketProtocolError(CorralError):
    """The server broke the protocol; ``close_code`` is what the client closed with."""

    def __init__(self, close_code, what):
        super().__init__("bad_frame", f"corrald sent a bad WebSocket frame: {what}", 0)
        self.close_code = close_code


class FrameDecoder:
    """Turns the server's bytes into messages: ``("text", str)``, ``("binary", bytes)``,
    ``("ping"|"pong", bytes)`` or ``("close", code_or_None, reason)``.

    ``feed(data)`` answers the messages completed so far. The first violation raises
    WebSocketProtocolError — from this call when it completed no message before it, else from
    the next (``failure`` has it), so what came before a bad frame is still delivered.
    """

    def __init__(self, max_frame_bytes=1 << 20, max_message_bytes=4 << 20):
        self.max_frame = max_frame_bytes
        self.max_message = max_message_bytes
        self._buffer = bytearray()
        self._fragments = []
        self._fragment_bytes = 0
        self._fragment_type = None
        self.failure = None

    def feed(self, data):
        if self.failure:
            raise self.failure
        self._buffer += data
        out = []
        try:
            while True:
                message = self._next()
                if message is None:
                    break
                if message is not _FRAGMENT:
                    out.append(message)
        except WebSocketProtocolError as e:
            self.failure = e
            if not out:
                raise
        return out

    def _next(self):
        buf = self._buffer
        if len(buf) < 2:
            return None
        fin = buf[0] & 0x80
        rsv = buf[0] & 0x70
        opcode = buf[0] & 0x0F
        masked = buf[1] & 0x80
        length = buf[1] & 0x7F
        # Checked before the length arrives whole: a hostile header is refused at once.
        if rsv:
            raise _fail(PROTOCOL_ERROR, "reserved bits set (no extension was negotiated)")
        if masked:
            raise _fail(PROTOCOL_ERROR, "a server frame is masked (RFC 6455 5.1 forbids it)")
        control = opcode >= 0x8
        if opcode not in (CONTINUATION, TEXT, BINARY, CLOSE, PING, PONG):
            raise _fail(PROTOCOL_ERROR, f"unknown opcode {opcode:#x}")
        if control and not fin:
            raise _fail(PROTOCOL_ERROR, "a fragmented control frame")
        if control and length > 125:
            raise _fail(PROTOCOL_ERROR, "a control frame longer than 125 bytes")
        offset = 2
        if length == 126:
            if len(buf) < 4:
                return None
            (length,) = struct.unpack_from(">H", buf, 2)
            if length < 126:
                raise _fail(PROTOCOL_ERROR, "a frame length not in its shortest form")
            offset = 4
        elif length == 127:
            if len(buf) < 10:
                return None
            (length,) = struct.unpack_from(">Q", buf, 2)
            if length >> 63:
                raise _fail(PROTOCOL_ERROR, "a 64-bit frame length with its top bit set")
            if length < 0x10000:
                raise _fail(PROTOCOL_ERROR, "a frame length not in its shortest form")
            offset = 10
        if length > self.max_frame:
            raise _fail(TOO_BIG, f"a frame of {length} bytes (the limit is {self.max_frame})")
        if not control:
            if opcode == CONTINUATION and self._fragment_type is None:
                raise _fail(PROTOCOL_ERROR, "a continuation frame with no message to continue")
            if opcode != CONTINUATION and self._fragment_type is not None:
                raise _fail(PROTOCOL_ERROR, "a new message before the fragmented one ended")
            if self._fragment_bytes + length > self.max_message:
                raise _fail(TOO_BIG, f"a message of more than {self.max_message} bytes")
        if len(buf) < offset + length:
            return None
        payload = bytes(buf[offset:offset + length])
        del buf[:offset + length]
        if control:
            return _control(opcode, payload)
        if opcode != CONTINUATION:
            self._fragment_type = "text" if opcode == TEXT else "binary"
        self._fragments.append(payload)
        self._fragment_bytes += length
        if not fin:
            return _FRAGMENT
        whole = b"".join(self._fragments)
        kind = self._fragment_type
        self._fragments, self._fragment_bytes, self._fragment_type = [], 0, None
        return (kind, _utf8(whole) if kind == "text" else whole)


_FRAGMENT = object()


def _fail(code, what):
    return WebSocketProtocolError(code, what)


def _utf8(data):
    try:
        return data.decode("utf-8")  # strict: surrogates and overlong forms are errors
    except UnicodeDecodeError:
        raise _fail(INVALID_DATA, "a text message that is not UTF-8") from None


def _control(opcode, payload):
    if opcode in (PING, PONG):
        return ("ping" if opcode == PING else "pong", payload)
    if not payload:
        return ("close", None, "")
    if len(payload) == 1:
        raise _fail(PROTOCOL_ERROR, "a close frame with a 1-byte body")
    (code,) = struct.unpack_from(">H", payload)
    # 1000-1003, 1007-1014 and 3000-4999 may be sent; 1004-1006, 1015 and the rest may not.
    if not (1000 <= code <= 1003 or 1007 <= code <= 1014 or 3000 <= code <= 4999):
        raise _fail(PROTOCOL_ERROR, f"close code {code} may not be sent")
    return ("close", code, _utf8(payload[2:]))


def encode_frame(opcode, payload, fin=True):
    """One client frame: FIN as told, the payload masked with a fresh random key."""
    n = len(payload)
    head = bytes([(0x80 if fin else 0) | opcode])
    if n < 126:
        head += bytes([0x80 | n])
    elif n < 0x10000:
        head += bytes([0x80 | 126]) + struct.pack(">H", n)
    else:
        head += bytes([0x80 | 127]) + struct.pack(">Q", n)
    key = os.urandom(4)
    # XOR by whole integers: fast enough for terminal input without numpy.
    mask = int.from_bytes((key * (n // 4 + 1))[:n], "big")
    body = (int.from_bytes(payload, "big") ^ mask).to_bytes(n, "big") if n else b""
    return head + key + body


class WebSocket:
    """An open WebSocket (after the 101) on a blocking socket: ``send``, ``recv``, ``close``.

    ``recv()`` answers the next text or binary message, answering pings on the way, or None once
    the server closed (``close_code`` says how). Sending is safe from other threads while one
    thread receives.
    """

    def __init__(self, sock, leftover=b"", fragment_bytes=64 << 10, max_frame_bytes=1 << 20,
                 max_message_bytes=4 << 20):
        self.sock = sock
        self.decoder = FrameDecoder(max_frame_bytes, max_message_bytes)
        self.fragment_bytes = fragment_bytes
        self.close_code = None
        self.close_reason = ""
        self.closed = False       # the server's close arrived, or the connection is gone
        self.close_sent = False
        self._pending = []
        self._leftover = leftover
        self._send_lock = threading.Lock()
        self.pongs = []

    def send(self, data):
        """Sends one message (str: text, bytes: binary), fragmented past ``fragment_bytes``."""
        if isinstance(data, str):
            opcode, payload = TEXT, data.encode("utf-8")
        else:
            opcode, payload = BINARY, bytes(data)
        frames = []
        at = 0
        while True:
            end = min(len(payload), at + self.fragment_bytes)
            frames.append(encode_frame(opcode, payload[at:end], fin=end == len(payload)))
            opcode, at = CONTINUATION, end
            if at >= len(payload):
                break
        self._write(b"".join(frames))

    def ping(self, data=b""):
        self._write(encode_frame(PING, data))

    def _write(self, data):
        with self._send_lock:
            if self.close_sent or self.closed:
                raise CorralError("closed", "the terminal socket is closed", 0)
            try:
                self.sock.sendall(data)
            except OSError as e:
                raise CorralError("connection_lost", f"terminal socket: {e}", 0) from e

    def _send_close(self, code, reason=""):
        with self._send_lock:
            if self.close_sent:
                return
            self.close_sent = True
            try:
                self.sock.sendall(encode_frame(CLOSE, struct.pack(">H", code) + reason.encode()))
            except OSError:
                pass

    def recv(self):
        """The next ("text", str) or ("binary", bytes) message, or None at the end. Raises
        WebSocketProtocolError (after closing with its code) for a bad frame."""
        while True:
            if self._pending:
                message = self._pending.pop(0)
                kind = message[0]
                if kind == "ping":
                    if not self.close_sent:
                        try:
                            self._write(encode_frame(PONG, message[1]))
                        except CorralError:
                            pass
                    continue
                if kind == "pong":
                    self.pongs.append(message[1])
                    continue
                if kind == "close":
                    self.close_code, self.close_reason = message[1], message[2]
                    self._send_close(message[1] or NORMAL)  # echo it (RFC 6455 5.5.1)
                    self._shutdown()
                    return None
                return message
            if self.decoder.failure or self.closed:
                return self._end()
            if self._leftover:
                data, self._leftover = self._leftover, b""
            else:
                try:
                    data = self.sock.recv(64 << 10)
                except OSError:
                    data = b""
                if not data:
                    self.closed = True
                    if self.close_code is None and not self.close_sent:
                        raise CorralError("connection_lost",
                                          "the terminal socket closed without a close frame", 0)
                    return None
            try:
                self._pending.extend(self.decoder.feed(data))
            except WebSocketProtocolError:
                pass  # decoder.failure: refused once the messages before it are handed out

    def _end(self):
        error = self.decoder.failure
        if error is None:
            return None
        # Refused: say why in the close frame, then stop reading; nothing more is believed.
        self._send_close(error.close_code, "bad frame")
        self._shutdown()
        raise error

    def _shutdown(self):
        self.closed = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()

    def close(self, code=NORMAL, timeout=5):
        """Starts the close handshake and reads (dropping messages) until the server answers it,
        at most ``timeout`` seconds; then the connection is gone. For a socket another thread
        reads, use ``start_close`` and let that thread see the end."""
        self.start_close(code)
        try:
            self.sock.settimeout(timeout)
            while self.recv() is not None:
                pass
        except (CorralError, OSError):
            pass
        if not self.closed:
            self._shutdown()

    def start_close(self, code=NORMAL):
        """Sends the close frame; the reading side then ends when the server answers."""
        self._send_close(code)


def connect(transport, path, timeout=30, **limits):
    """Opens a WebSocket to ``path`` on the transport's daemon (its Unix socket, or TCP with the
    bearer token). An answer other than 101 raises the API's CorralError."""
    key = base64.b64encode(os.urandom(16)).decode()
    where = transport.url or f"unix:{transport.socket_path}"
    try:
        if transport.url:
            sock = socket.create_connection((transport._host, transport._port), timeout=timeout)
        else:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(timeout)
            sock.connect(transport.socket_path)
    except OSError as e:
        raise CorralError("unreachable", f"corrald at {where}: {e}", 0) from e
    lines = [f"GET {path} HTTP/1.1", "Host: corral", "Connection: Upgrade", "Upgrade: websocket",
             "Sec-WebSocket-Version: 13", f"Sec-WebSocket-Key: {key}"]
    if transport.token is not None:
        lines.append(f"Authorization: Bearer {transport.token}")
    try:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        status, headers, rest = _read_head(sock)
        if status != 101:
            body = _read_body(sock, headers, rest)
            raise CorralError.from_body(status, body)
        expected = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
        if headers.get("sec-websocket-accept") != expected:
            raise CorralError("bad_response", f"{path}: the upgrade answer has a wrong "
                                              "Sec-WebSocket-Accept", 101)
        if "sec-websocket-extensions" in headers or "sec-websocket-protocol" in headers:
            raise CorralError("bad_response", f"{path}: the server chose an extension or "
                                              "subprotocol nobody asked for", 101)
    except BaseException:
        sock.close()
        raise
    sock.settimeout(None)
    return WebSocket(sock, rest, **limits)


def _read_head(sock):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            raise CorralError("connection_lost", "corrald closed the connection before answering", 0)
        data += chunk
        if len(data) > 64 << 10:
            raise CorralError("bad_response", "an upgrade answer head beyond 64 KiB", 0)
    head, rest = data.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    try:
        status = int(lines[0].split(" ", 2)[1])
    except (IndexError, ValueError):
        raise CorralError("bad_response", f"not an HTTP status line: {lines[0][:100]!r}", 0) from None
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers, rest


def _read_body(sock, headers, rest):
    try:
        length = int(headers.get("content-length", "0"))
    except ValueError:
        length = 0
    length = min(length, 1 << 20)
    while len(rest) < length:
        chunk = sock.recv(length - len(rest))
        if not chunk:
            break
        rest += chunk
    return rest[:length]
