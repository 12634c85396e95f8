"""The RFC 6455 framing of the terminal client: the frame decoder fed hostile input (what a
compromised or buggy server could send), the encoder, and a hostile server on a loopback port
this test opens, which must be refused cleanly: a close frame with the RFC's code, the output
failing with the reason after what came before it, no hang."""

import base64
import hashlib
import os
import socket
import struct
import threading

import pytest

from corral import CorralError, FrameDecoder, Terminal, WebSocketProtocolError
from corral.transport import Transport
from corral.websocket import (BINARY, CLOSE, CONTINUATION, GUID, INVALID_DATA, PING, PONG,
                              PROTOCOL_ERROR, TEXT, TOO_BIG, encode_frame)


def frame(opcode, payload=b"", fin=True, rsv=0, mask=False, length=None):
    """A server frame (unmasked unless told); ``length`` overrides the header's length."""
    n = len(payload) if length is None else length
    first = (0x80 if fin else 0) | rsv | opcode
    if n < 126 and length is None:
        head = bytes([first, n])
    elif n < 0x10000:
        head = bytes([first, 126]) + struct.pack(">H", n)
    else:
        head = bytes([first, 127]) + struct.pack(">Q", n)
    if mask:
        key = b"\x01\x02\x03\x04"
        return bytes([head[0], head[1] | 0x80]) + head[2:] + key + bytes(
            b ^ key[i % 4] for i, b in enumerate(payload))
    return head + payload


def refused(data, close_code, pattern, **limits):
    decoder = FrameDecoder(**limits)
    with pytest.raises(WebSocketProtocolError, match=pattern) as e:
        decoder.feed(data)
    assert e.value.close_code == close_code
    assert isinstance(e.value, CorralError)
    # A decoder that refused stays refused: nothing after a violation is believed.
    with pytest.raises(WebSocketProtocolError):
        decoder.feed(frame(TEXT, b"ok"))


def test_whole_fragmented_and_byte_by_byte_messages():
    d = FrameDecoder()
    assert d.feed(frame(TEXT, b'{"type":"exit"}')) == [("text", '{"type":"exit"}')]
    data = (frame(BINARY, b"ab", fin=False) + frame(PING, b"p") +
            frame(CONTINUATION, b"cd", fin=False) + frame(CONTINUATION, b"e"))
    seen = []
    for i in range(len(data)):
        seen += d.feed(data[i:i + 1])
    assert seen == [("ping", b"p"), ("binary", b"abcde")]
    euro = "€".encode()
    assert d.feed(frame(TEXT, euro[:1], fin=False) + frame(CONTINUATION, euro[1:])) == [("text", "€")]
    mid, big = os.urandom(300), os.urandom(70000)
    assert d.feed(frame(BINARY, mid) + frame(BINARY, big)) == [("binary", mid), ("binary", big)]
    assert d.feed(frame(CLOSE, b"\x03\xe8ok")) == [("close", 1000, "ok")]
    assert d.feed(frame(CLOSE)) == [("close", None, "")]


@pytest.mark.parametrize("data,code,pattern", [
    (frame(TEXT, b"hi", mask=True), PROTOCOL_ERROR, "masked"),
    (frame(TEXT, b"hi", rsv=0x40), PROTOCOL_ERROR, "reserved bits"),
    (frame(0x3, b"x"), PROTOCOL_ERROR, "unknown opcode 0x3"),
    (frame(PING, b"x", fin=False), PROTOCOL_ERROR, "fragmented control"),
    (frame(PONG, b"x" * 126), PROTOCOL_ERROR, "longer than 125"),
    (frame(CONTINUATION, b"x"), PROTOCOL_ERROR, "no message to continue"),
    (frame(TEXT, b"a", fin=False) + frame(BINARY, b"b"), PROTOCOL_ERROR, "before the fragmented one ended"),
    (frame(TEXT, b"\xc3\x28"), INVALID_DATA, "not UTF-8"),
    (frame(TEXT, b"\xed\xa0\x80"), INVALID_DATA, "not UTF-8"),  # a UTF-16 surrogate
    (frame(CLOSE, b"\x03"), PROTOCOL_ERROR, "1-byte body"),
    (frame(CLOSE, b"\x03\xed"), PROTOCOL_ERROR, "close code 1005"),
    (frame(BINARY, b"short", length=5)[:4], PROTOCOL_ERROR, "shortest form"),
])
def test_frames_a_server_must_not_send_are_refused(data, code, pattern):
    refused(data, code, pattern)


def test_lengths_beyond_the_limits_are_refused_from_the_header_alone():
    # 2^63 - 1 and 2^62 claimed: never allocated, never waited for.
    refused(bytes([0x82, 127]) + b"\x7f" + b"\xff" * 7, TOO_BIG, "limit is 1048576")
    refused(bytes([0x82, 127, 0x80]) + b"\x00" * 6 + b"\x01", PROTOCOL_ERROR, "top bit")
    refused(frame(BINARY, length=(1 << 20) + 1), TOO_BIG, "frame of 1048577 bytes")
    refused(frame(BINARY, b"x" * 2000), TOO_BIG, "limit is 1000", max_frame_bytes=1000)
    parts = b"".join(frame(CONTINUATION if i else BINARY, b"x" * 1000, fin=False) for i in range(5))
    refused(parts, TOO_BIG, "more than 4096 bytes", max_frame_bytes=1000, max_message_bytes=4096)


def test_random_bytes_end_in_messages_or_a_protocol_error():
    for i in range(2000):
        d = FrameDecoder(max_frame_bytes=4096, max_message_bytes=8192)
        data = os.urandom(1 + i % 64)
        try:
            d.feed(data[:len(data) // 2])
            d.feed(data[len(data) // 2:])
        except WebSocketProtocolError:
            pass


def test_client_frames_are_masked_with_a_fresh_key():
    for size in (0, 5, 125, 126, 65535, 65536):
        payload = os.urandom(size)
        a, b = encode_frame(BINARY, payload), encode_frame(BINARY, payload)
        assert a[0] == 0x82 and a[1] & 0x80
        extra = 0 if size < 126 else 2 if size < 65536 else 8
        key = a[2 + extra:6 + extra]
        assert bytes(x ^ key[i % 4] for i, x in enumerate(a[6 + extra:])) == payload
        if size >= 16:
            assert a != b, "a new mask per frame"
    assert encode_frame(TEXT, b"x", fin=False)[0] == 0x01


class HostileServer:
    """A fake corrald on a loopback port: accepts the upgrade (correctly unless ``accept`` says
    otherwise), sends ``data``, and records the close code the client answers with."""

    def __init__(self, data, accept=None):
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.close_code = None
        self.got_close = threading.Event()
        self.thread = threading.Thread(target=self._serve, args=(data, accept), daemon=True)
        self.thread.start()

    def _serve(self, data, accept):
        conn, _ = self.listener.accept()
        with conn:
            conn.settimeout(10)
            head = b""
            while b"\r\n\r\n" not in head:
                head += conn.recv(4096)
            key = [l.split(b":", 1)[1].strip() for l in head.split(b"\r\n")
                   if l.lower().startswith(b"sec-websocket-key:")][0]
            digest = accept or base64.b64encode(hashlib.sha1(key + GUID.encode()).digest()).decode()
            conn.sendall(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                          f"Connection: Upgrade\r\nSec-WebSocket-Accept: {digest}\r\n\r\n").encode() + data)
            got = b""
            try:
                while len(got) < 8:
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    got += chunk
            except OSError:
                pass
            if len(got) >= 8 and got[0] & 0x0F == CLOSE:
                key = got[2:6]
                self.close_code = ((got[6] ^ key[0]) << 8) | (got[7] ^ key[1])
            self.got_close.set()

    def transport(self):
        return Transport(url=f"http://127.0.0.1:{self.port}", token="t0ken")

    def close(self):
        self.listener.close()


@pytest.mark.parametrize("bad,code,pattern", [
    (frame(BINARY, b"x", mask=True), PROTOCOL_ERROR, "masked"),
    (bytes([0x82, 127, 0x40]) + b"\x00" * 7, TOO_BIG, "limit is 1048576"),
    (frame(BINARY, length=2 << 20), TOO_BIG, "limit is 1048576"),
    (frame(TEXT, b"\xff\xfe"), INVALID_DATA, "not UTF-8"),
])
def test_a_hostile_server_is_refused_cleanly(bad, code, pattern):
    server = HostileServer(frame(BINARY, b"before ") + bad)
    try:
        terminal = Terminal(server.transport(), "s1", "p1")
        assert terminal.read(timeout=10) == b"before ", "what came before the bad frame is delivered"
        with pytest.raises(WebSocketProtocolError, match=pattern):
            terminal.read(timeout=10)
        with pytest.raises(WebSocketProtocolError):
            terminal.wait(timeout=10)
        assert server.got_close.wait(10)
        assert server.close_code == code, "the client said why in its close frame"
        with pytest.raises(CorralError) as e:
            terminal.write("more")
        assert e.value.code == "closed"
    finally:
        server.close()


def test_a_wrong_accept_header_is_refused():
    server = HostileServer(b"", accept="bm90IHRoZSByaWdodCBvbmU=")
    try:
        with pytest.raises(CorralError, match="Sec-WebSocket-Accept") as e:
            Terminal(server.transport(), "s1", "p1")
        assert e.value.code == "bad_response"
    finally:
        server.close()
